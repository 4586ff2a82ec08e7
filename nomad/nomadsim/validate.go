package nomadsim

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// multiError formats errors the way hashicorp/go-multierror does, which is
// what Nomad returns for an invalid job:
// "1 error occurred:\n\t* Missing job task groups\n\n".
func multiError(errs []string) string {
	if len(errs) == 1 {
		return fmt.Sprintf("1 error occurred:\n\t* %s\n\n", errs[0])
	}
	points := make([]string, len(errs))
	for i, e := range errs {
		points[i] = "* " + e
	}
	return fmt.Sprintf("%d errors occurred:\n\t%s\n\n", len(errs), strings.Join(points, "\n\t"))
}

// validateJob is the subset of Nomad's Job.Validate that a canonicalized
// job can fail, with Nomad's wording and nesting (group and task errors are
// wrapped multierrors, as in error-register-task-without-driver.json).
func validateJob(j *api.Job) []string {
	var errs []string
	id := deref(j.ID)
	switch {
	case id == "":
		errs = append(errs, "Missing job ID")
	case strings.Contains(id, " "):
		errs = append(errs, "Job ID contains a space")
	case strings.Contains(id, "\x00"):
		errs = append(errs, "Job ID contains a null character")
	}
	if deref(j.Name) == "" {
		errs = append(errs, "Missing job name")
	} else if strings.Contains(*j.Name, "\x00") {
		errs = append(errs, "Job Name contains a null character")
	}
	if deref(j.Namespace) == "" {
		errs = append(errs, "Job must be in a namespace")
	}
	switch t := deref(j.Type); t {
	case api.JobTypeService, api.JobTypeBatch, api.JobTypeSystem, api.JobTypeSysbatch:
	default:
		errs = append(errs, fmt.Sprintf("Invalid job type: %q", t))
	}
	if p := deref(j.Priority); p < 1 || p > 100 {
		errs = append(errs, "Job priority must be between [1, 100]")
	}
	for _, dc := range j.Datacenters {
		if dc == "" {
			errs = append(errs, "Job datacenter must be non-empty string")
		}
	}
	if len(j.TaskGroups) == 0 {
		errs = append(errs, "Missing job task groups")
	}
	for i, c := range j.Constraints {
		if e := validateConstraint(c); len(e) > 0 {
			errs = append(errs, fmt.Sprintf("Constraint %d validation failed: %s", i+1, multiError(e)))
		}
	}
	seen := map[string]int{}
	for i, tg := range j.TaskGroups {
		name := deref(tg.Name)
		if prev, dup := seen[name]; dup {
			errs = append(errs, fmt.Sprintf("Job task group %d redefines '%s' from group %d", i+1, name, prev+1))
		} else {
			seen[name] = i
		}
		if e := validateGroup(tg); len(e) > 0 {
			errs = append(errs, fmt.Sprintf("Task group %s validation failed: %s", name, multiError(e)))
		}
	}
	return errs
}

func validateGroup(tg *api.TaskGroup) []string {
	var errs []string
	if deref(tg.Name) == "" {
		errs = append(errs, "Missing task group name")
	}
	if deref(tg.Count) < 0 {
		errs = append(errs, "Task group count can't be negative")
	}
	if len(tg.Tasks) == 0 {
		errs = append(errs, "Missing tasks for task group")
	}
	for i, c := range tg.Constraints {
		if e := validateConstraint(c); len(e) > 0 {
			errs = append(errs, fmt.Sprintf("Constraint %d validation failed: %s", i+1, multiError(e)))
		}
	}
	seen := map[string]int{}
	for i, t := range tg.Tasks {
		if prev, dup := seen[t.Name]; dup && t.Name != "" {
			errs = append(errs, fmt.Sprintf("Task %d redefines '%s' from task %d", i+1, t.Name, prev+1))
		} else {
			seen[t.Name] = i
		}
		if e := validateTask(t); len(e) > 0 {
			errs = append(errs, fmt.Sprintf("Task %s validation failed: %s", t.Name, multiError(e)))
		}
	}
	return errs
}

func validateTask(t *api.Task) []string {
	var errs []string
	switch {
	case t.Name == "":
		errs = append(errs, "Missing task name")
	case strings.Contains(t.Name, "/"):
		errs = append(errs, "Task name cannot include slashes")
	case strings.Contains(t.Name, "\x00"):
		errs = append(errs, "Task name cannot include null characters")
	}
	if t.Driver == "" {
		errs = append(errs, "Missing task driver")
	}
	if t.KillTimeout != nil && *t.KillTimeout < 0 {
		errs = append(errs, "KillTimeout must be a positive value")
	}
	if t.Resources != nil {
		if cpu := deref(t.Resources.CPU); cpu < 1 && deref(t.Resources.Cores) == 0 {
			errs = append(errs, fmt.Sprintf("minimum CPU value is 1; got %d", cpu))
		}
		if mem := deref(t.Resources.MemoryMB); mem < 10 {
			errs = append(errs, fmt.Sprintf("minimum MemoryMB value is 10; got %d", mem))
		}
	}
	for i, c := range t.Constraints {
		if e := validateConstraint(c); len(e) > 0 {
			errs = append(errs, fmt.Sprintf("Constraint %d validation failed: %s", i+1, multiError(e)))
		}
	}
	return errs
}

func validateConstraint(c *api.Constraint) []string {
	if c == nil {
		return []string{"Missing constraint"}
	}
	var errs []string
	if c.Operand == "" {
		errs = append(errs, "Missing constraint operand")
	}
	if c.Operand == api.ConstraintRegex {
		if _, err := regexp.Compile(c.RTarget); err != nil {
			errs = append(errs, fmt.Sprintf("Regular expression failed to compile: %v", err))
		}
	}
	if c.Operand != api.ConstraintDistinctHosts && c.LTarget == "" {
		errs = append(errs, "No LTarget provided but is required by constraint")
	}
	return errs
}

// dockerListOfMapAttrs are the docker driver config attributes whose schema
// type is list(map(string)) and that the simulator checks, in the order the
// agent listed them when both were wrong (it decodes them from a Go map, so
// its order may vary).
var dockerListOfMapAttrs = []string{"ulimit", "labels"}

// driverConfigError is the validation error the client agent reports when it
// decodes a task's driver config against the driver's schema at task start,
// or "" when the simulated checks pass. The server never checks driver config
// (register-bad-driver-config.json); a real v1.6.5 client with Docker refused
// an object for ulimit or labels with this multierror, in a "Failed
// Validation" task event. Only that is simulated: a value that is neither
// absent, null nor a list. The elements of a list are not checked. t's
// Config must be JSON-decoded (maps and []any), as in an allocation's job.
func driverConfigError(t *api.Task) string {
	if t.Driver != "docker" {
		return ""
	}
	var errs []string
	for _, attr := range dockerListOfMapAttrs {
		switch t.Config[attr].(type) {
		case nil, []any:
		default:
			errs = append(errs, fmt.Sprintf("Incorrect attribute value type: Inappropriate value for attribute %q: list of map of string required.", attr))
		}
	}
	if len(errs) == 0 {
		return ""
	}
	return multiError(append([]string{"failed to parse config: "}, errs...))
}
