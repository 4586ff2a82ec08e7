package escape

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"sandgate/jobspec"
	"sandgate/policies"
	"sandgate/render"
)

// doc is an input as a generic JSON document, ready to change.
type doc = map[string]any

// mutation is one dangerous change of a rendered job or of the facts
// admission decides it on.
type mutation struct {
	ID, What, Rule string
	profile        render.Profile // default strict
	network        render.Network // default none
	mutate         func(d doc)
}

// auditTime is when every audited sandbox is created: the audit is the
// same at every run.
var auditTime = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// BaseSpec is the sandbox every admission case starts from: the
// settings' defaults, on an enrolled healthy node of an allowed
// architecture.
func BaseSpec(s policies.Settings, profile render.Profile, network render.Network) render.SandboxSpec {
	arch := "arm64"
	if len(s.Placement.AllowedArchitectures) > 0 {
		arch = s.Placement.AllowedArchitectures[0]
	}
	return render.SandboxSpec{
		ID: "k7x2m9p4q8r5t1v6", Prefix: s.Prefix, Node: "w1", OS: "linux", Arch: arch,
		Profile: profile, Network: network,
		LifetimeCeiling: time.Duration(s.Lifetime.CeilingSeconds) * time.Second,
		TTL:             time.Hour, CreatedAt: auditTime,
		CPUMHz: s.Sandbox.DefaultCPUMHz, MemoryMB: s.Sandbox.DefaultMemoryMB, Image: s.Images.Default,
		Priority: s.Priority.Default, WorkspaceMB: 256, TmpMB: 64, PidsLimit: s.Docker.PidsLimitDefault,
		Ulimits: render.Ulimits{NoFile: render.Ulimit{Soft: 1024, Hard: 1024}, NProc: render.Ulimit{Soft: 512, Hard: 512}},
		Runtime: s.Runtimes.Default, DiskMB: s.Docker.TaskDirs.QuotaMB,
	}
}

// BaseAdmission is the admission input of the rendered base job, as a
// document: what the shipped bundle admits.
func BaseAdmission(s policies.Settings, profile render.Profile, network render.Network) (doc, error) {
	r, err := render.New(jobspec.RenderConfig(s))
	if err != nil {
		return nil, err
	}
	spec := BaseSpec(s, profile, network)
	job, err := r.Job(spec)
	if err != nil {
		return nil, err
	}
	jobJSON, err := json.Marshal(job)
	if err != nil {
		return nil, err
	}
	enrollment := s.Placement.EgressEnrollment
	if network != render.NetworkEgress || enrollment == "" {
		enrollment = "sandbox"
	}
	meta := map[string]string{}
	if network == render.NetworkEgress && s.Placement.EgressIsolation.MetaKey != "" && len(s.Placement.EgressIsolation.AcceptedVersions) > 0 {
		meta[s.Placement.EgressIsolation.MetaKey] = s.Placement.EgressIsolation.AcceptedVersions[0]
	}
	mem, disk := 41.5, 22.0
	node := policies.NodeFacts{ID: "5f3c", Name: "w1", Status: "ready", Eligibility: "eligible",
		Attributes:    map[string]string{"kernel.name": "linux", "cpu.arch": spec.Arch, "unique.hostname": "w1"},
		Meta:          meta,
		OperatorState: "active", Enrollment: enrollment,
		Usage: policies.NodeUsage{MemoryPercent: &mem, DiskPercent: &disk},
		Capacity: &policies.NodeCapacity{
			Allocatable: policies.Resources{CPUMHz: 8000, MemoryMB: 16384},
			Sandboxes:   policies.Resources{CPUMHz: 1500, MemoryMB: 1536},
		}}
	budget := policies.Budget{
		Limits: policies.BudgetLimits{MaxSandboxes: 10, CPUMHz: 8000, MemoryMB: 16384},
		Used:   policies.BudgetUse{Sandboxes: 3, CPUMHz: 1500, MemoryMB: 1536},
	}
	principal := policies.PrincipalFacts{Sub: "ci", Role: "agent", LiveSandboxes: 1}
	in := jobspec.AdmissionInput(spec, jobJSON, node, budget, principal, jobspec.NomadMounts(s))
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	var d doc
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, err
	}
	return d, nil
}

func admissionCases() []Case {
	cases := make([]Case, 0, len(mutations))
	for _, m := range mutations {
		cases = append(cases, mutatedCase(m))
	}
	return cases
}

// mutatedCase is the admission case of m: the base job of its profile and
// network, changed by m.mutate.
func mutatedCase(m mutation) Case {
	if m.profile == "" {
		m.profile = render.ProfileStrict
	}
	if m.network == "" {
		m.network = render.NetworkNone
	}
	return Case{ID: m.ID, What: m.What, Rule: m.Rule, Entrypoint: policies.Admission,
		input: func(s policies.Settings) (v any, err error) {
			d, err := BaseAdmission(s, m.profile, m.network)
			if err != nil {
				return nil, err
			}
			// A bundle whose renderer settings give another job shape
			// cannot take this change: say so rather than crash.
			defer func() {
				if p := recover(); p != nil {
					v, err = nil, fmt.Errorf("%w: %v", errShape, p)
				}
			}()
			m.mutate(d)
			return d, nil
		}}
}

var errShape = errors.New("the rendered job does not have the shape the case changes")

func job(d doc) doc       { return d["job"].(doc) }
func group(d doc) doc     { return job(d)["TaskGroups"].([]any)[0].(doc) }
func task(d doc) doc      { return group(d)["Tasks"].([]any)[0].(doc) }
func config(d doc) doc    { return task(d)["Config"].(doc) }
func resources(d doc) doc { return task(d)["Resources"].(doc) }
func ulimit(d doc) doc    { return config(d)["ulimit"].([]any)[0].(doc) }
func labels(d doc) doc    { return config(d)["labels"].([]any)[0].(doc) }
func node(d doc) doc      { return d["node"].(doc) }
func used(d doc) doc      { return d["budget"].(doc)["used"].(doc) }
func limits(d doc) doc    { return d["budget"].(doc)["limits"].(doc) }

// constraint returns the job constraint on target.
func constraint(d doc, target string) doc {
	for _, c := range job(d)["Constraints"].([]any) {
		if c.(doc)["LTarget"] == target {
			return c.(doc)
		}
	}
	panic("no constraint on " + target)
}

func mount(d doc, target string) doc {
	for _, m := range config(d)["mount"].([]any) {
		if m.(doc)["target"] == target {
			return m.(doc)
		}
	}
	panic("no mount at " + target)
}

// mutations are the job and placement cases, each denied by the shipped
// bundle with exactly its Rule.
var mutations = []mutation{
	{ID: "job/privileged-true", What: "privileged true", Rule: "H1", mutate: func(d doc) { config(d)["privileged"] = true }},
	{ID: "job/privileged-removed", What: "privileged removed", Rule: "H1", mutate: func(d doc) { delete(config(d), "privileged") }},
	{ID: "job/a-cap-add-outside-the-profile-sys-admin-on-workspace", What: "a cap_add outside the profile (SYS_ADMIN on workspace)", profile: render.ProfileWorkspace, Rule: "H1", mutate: func(d doc) {
		config(d)["cap_add"] = append(config(d)["cap_add"].([]any), "SYS_ADMIN")
	}},
	{ID: "job/a-cap-add-on-strict-which-has-none", What: "a cap_add on strict, which has none", Rule: "H1", mutate: func(d doc) { config(d)["cap_add"] = []any{"CHOWN"} }},
	{ID: "job/cap-drop-empty", What: "cap_drop empty", Rule: "H1", mutate: func(d doc) { config(d)["cap_drop"] = []any{} }},
	{ID: "job/cap-drop-not-all", What: "cap_drop not ALL", Rule: "H1", mutate: func(d doc) { config(d)["cap_drop"] = []any{"NET_RAW"} }},
	{ID: "job/the-raw-exec-driver", What: "the raw_exec driver", Rule: "H1", mutate: func(d doc) { task(d)["Driver"] = "raw_exec" }},
	{ID: "job/two-allocations", What: "two allocations", Rule: "H1", mutate: func(d doc) { group(d)["Count"] = 2 }},
	{ID: "job/an-unknown-docker-option", What: "an unknown docker option", Rule: "H1", mutate: func(d doc) { config(d)["oom_score_adj"] = -1000 }},
	{ID: "job/no-new-privileges-missing", What: "no-new-privileges missing", Rule: "H2", mutate: func(d doc) { config(d)["security_opt"] = []any{} }},
	{ID: "job/pids-limit-removed", What: "pids_limit removed", Rule: "H3", mutate: func(d doc) { delete(config(d), "pids_limit") }},
	{ID: "job/memory-max-above-memory", What: "memory_max above memory", Rule: "H3", mutate: func(d doc) {
		resources(d)["MemoryMaxMB"] = resources(d)["MemoryMB"].(float64) + 1
	}},
	{ID: "job/init-off", What: "init off", Rule: "H3", mutate: func(d doc) { config(d)["init"] = false }},
	{ID: "job/ipc-shared-with-the-host", What: "ipc shared with the host", Rule: "H3", mutate: func(d doc) { config(d)["ipc_mode"] = "host" }},
	{ID: "job/no-hard-cpu-limit", What: "no hard cpu limit", Rule: "H3", mutate: func(d doc) { config(d)["cpu_hard_limit"] = false }},
	{ID: "job/nofile-ulimit-above-the-max", What: "nofile ulimit above the max", Rule: "H3", mutate: func(d doc) { ulimit(d)["nofile"] = "1048576:1048576" }},
	// The docker driver wants ulimit and labels as a list of one map of strings: an
	// object registers and fails the task at start, and Nomad merges several maps.
	{ID: "job/ulimit-as-an-object", What: "ulimit as an object", Rule: "H3", mutate: func(d doc) { config(d)["ulimit"] = ulimit(d) }},
	{ID: "job/ulimit-as-a-list-of-two-maps", What: "ulimit as a list of two maps", Rule: "H3", mutate: func(d doc) {
		config(d)["ulimit"] = []any{doc{"nofile": ulimit(d)["nofile"]}, doc{"nproc": ulimit(d)["nproc"]}}
	}},
	{ID: "job/labels-as-an-object", What: "labels as an object", Rule: "H9", mutate: func(d doc) { config(d)["labels"] = labels(d) }},
	{ID: "job/labels-as-a-list-of-two-maps", What: "labels as a list of two maps", Rule: "H9", mutate: func(d doc) {
		config(d)["labels"] = []any{labels(d), doc{"team": "ci"}}
	}},
	{ID: "job/identity-env-on", What: "identity env on", Rule: "H4", mutate: func(d doc) { task(d)["Identity"].(doc)["Env"] = true }},
	{ID: "job/identity-file-on", What: "identity file on", Rule: "H4", mutate: func(d doc) { task(d)["Identity"].(doc)["File"] = true }},
	{ID: "job/a-vault-block", What: "a vault block", Rule: "H4", mutate: func(d doc) { task(d)["Vault"] = doc{"Policies": []any{"x"}} }},
	{ID: "job/a-template-block", What: "a template block", Rule: "H4", mutate: func(d doc) {
		task(d)["Templates"] = []any{doc{"EmbeddedTmpl": "x", "DestPath": "local/x"}}
	}},
	{ID: "job/an-artifact-fetched-by-the-host", What: "an artifact fetched by the host", Rule: "H4", mutate: func(d doc) {
		task(d)["Artifacts"] = []any{doc{"GetterSource": "http://169.254.169.254/latest"}}
	}},
	{ID: "job/a-host-volume", What: "a host volume", Rule: "H5", mutate: func(d doc) { config(d)["volumes"] = []any{"/etc:/host-etc"} }},
	{ID: "job/a-docker-sock-mount", What: "a docker.sock mount", Rule: "H5", mutate: func(d doc) {
		config(d)["mount"] = append(config(d)["mount"].([]any), doc{"type": "bind", "source": "/var/run/docker.sock", "target": "/var/run/docker.sock"})
	}},
	{ID: "job/a-device", What: "a device", Rule: "H5", mutate: func(d doc) { config(d)["devices"] = []any{doc{"host_path": "/dev/kvm"}} }},
	{ID: "job/the-host-pid-namespace", What: "the host pid namespace", Rule: "H5", mutate: func(d doc) { config(d)["pid_mode"] = "host" }},
	{ID: "job/an-ephemeral-disk-above-the-task-dir-quota", What: "an ephemeral disk above the task-dir quota", Rule: "H5", mutate: func(d doc) {
		group(d)["EphemeralDisk"].(doc)["SizeMB"] = 100000
	}},
	{ID: "job/a-sticky-ephemeral-disk", What: "a sticky ephemeral disk", Rule: "H5", mutate: func(d doc) { group(d)["EphemeralDisk"].(doc)["Sticky"] = true }},
	{ID: "job/nomad-s-own-mounts-left-out-of-the-input", What: "Nomad's own mounts left out of the input", Rule: "INPUT", mutate: func(d doc) { delete(d, "nomad_mounts") }},
	{ID: "job/tmpfs-without-a-size", What: "tmpfs without a size", Rule: "H6", mutate: func(d doc) { delete(mount(d, "/workspace"), "tmpfs_options") }},
	{ID: "job/tmpfs-tmp-missing", What: "tmpfs /tmp missing", Rule: "H6", mutate: func(d doc) {
		config(d)["mount"] = []any{mount(d, "/workspace")}
	}},
	{ID: "job/readonly-off-in-strict", What: "readonly off in strict", Rule: "H6", mutate: func(d doc) { config(d)["readonly_rootfs"] = false }},
	{ID: "job/a-group-service-block", What: "a group service block", Rule: "H7", mutate: func(d doc) { group(d)["Services"] = []any{doc{"Name": "x"}} }},
	{ID: "job/a-task-service-with-tags", What: "a task service with tags", Rule: "H7", mutate: func(d doc) { task(d)["Services"] = []any{doc{"Name": "x", "Tags": []any{"a"}}} }},
	{ID: "job/ports", What: "ports", Rule: "H7", mutate: func(d doc) { config(d)["ports"] = []any{"http"} }},
	{ID: "job/a-resolver-inside-the-cluster", What: "a resolver inside the cluster", Rule: "H7", mutate: func(d doc) { config(d)["dns_servers"] = []any{"10.0.0.2"} }},
	{ID: "job/host-network", What: "host network", Rule: "H7", mutate: func(d doc) { config(d)["network_mode"] = "host" }},
	{ID: "job/bridge-network-on-a-none-sandbox", What: "bridge network on a none sandbox", Rule: "H7", mutate: func(d doc) { config(d)["network_mode"] = "bridge" }},
	{ID: "job/a-group-network", What: "a group network", Rule: "H7", mutate: func(d doc) { group(d)["Networks"] = []any{doc{"Mode": "host"}} }},
	{ID: "job/a-command-that-does-not-sleep", What: "a command that does not sleep", Rule: "H8", mutate: func(d doc) { config(d)["command"] = "sh" }},
	{ID: "job/a-sleep-past-the-ceiling", What: "a sleep past the ceiling", Rule: "H8", mutate: func(d doc) { config(d)["args"] = []any{"999999"} }},
	{ID: "job/an-entrypoint-override", What: "an entrypoint override", Rule: "H8", mutate: func(d doc) { config(d)["entrypoint"] = []any{"/bin/sh"} }},
	{ID: "job/priority-at-the-ceiling", What: "priority at the ceiling", Rule: "R1", mutate: func(d doc) { job(d)["Priority"] = 20 }},
	{ID: "job/priority-above-the-ceiling", What: "priority above the ceiling", Rule: "R1", mutate: func(d doc) { job(d)["Priority"] = 90 }},
	{ID: "job/restarts-on", What: "restarts on", Rule: "R1", mutate: func(d doc) { group(d)["RestartPolicy"].(doc)["Attempts"] = 3 }},
	{ID: "job/reschedule-unlimited", What: "reschedule unlimited", Rule: "R1", mutate: func(d doc) { group(d)["ReschedulePolicy"].(doc)["Unlimited"] = true }},
	{ID: "job/a-job-id-without-the-prefix", What: "a job id without the prefix", Rule: "H9", mutate: func(d doc) { job(d)["ID"] = "other-k7x2m9p4q8r5t1v6" }},
	{ID: "job/a-job-name-without-the-prefix", What: "a job name without the prefix", Rule: "H9", mutate: func(d doc) { job(d)["Name"] = "web" }},
	{ID: "job/seccomp-unconfined", What: "seccomp unconfined", Rule: "H10", mutate: func(d doc) {
		config(d)["security_opt"] = []any{"no-new-privileges", "seccomp=unconfined"}
	}},
	{ID: "job/apparmor-unconfined", What: "apparmor unconfined", Rule: "H10", mutate: func(d doc) {
		config(d)["security_opt"] = []any{"no-new-privileges", "apparmor=unconfined"}
	}},
	{ID: "job/an-unlisted-runtime", What: "an unlisted runtime", Rule: "H10", mutate: func(d doc) { config(d)["runtime"] = "kata-runtime" }},
	{ID: "job/an-image-off-the-allowlist", What: "an image off the allowlist", Rule: "H11", mutate: func(d doc) { config(d)["image"] = "evil:latest" }},
	{ID: "job/the-node-pin-removed", What: "the node pin removed", Rule: "P1", mutate: func(d doc) {
		cs := job(d)["Constraints"].([]any)
		job(d)["Constraints"] = slices.DeleteFunc(cs, func(c any) bool { return c.(doc)["LTarget"] == "${node.unique.name}" })
	}},
	{ID: "job/the-node-pin-pointing-elsewhere", What: "the node pin pointing elsewhere", Rule: "P1", mutate: func(d doc) { constraint(d, "${node.unique.name}")["RTarget"] = "w2" }},
	{ID: "job/the-node-pin-as-a-regexp", What: "the node pin as a regexp", Rule: "P1", mutate: func(d doc) {
		constraint(d, "${node.unique.name}")["Operand"] = "regexp"
		constraint(d, "${node.unique.name}")["RTarget"] = ".*"
	}},
	{ID: "job/a-wrong-architecture", What: "a wrong architecture", Rule: "P1", mutate: func(d doc) { constraint(d, "${attr.cpu.arch}")["RTarget"] = "mips64" }},
	{ID: "job/a-node-that-is-not-enrolled", What: "a node that is not enrolled", Rule: "P1", mutate: func(d doc) { node(d)["enrollment"] = "none" }},
	{ID: "job/a-control-plane-node", What: "a control-plane node", Rule: "P2", mutate: func(d doc) { node(d)["control_plane"] = true }},
	{ID: "job/a-node-with-a-control-plane-role-in-its-meta", What: "a node with a control-plane role in its meta", Rule: "P2", mutate: func(d doc) { node(d)["meta"] = doc{"node-role": "server"} }},
	{ID: "job/a-draining-node", What: "a draining node", Rule: "P3", mutate: func(d doc) { node(d)["drain"] = true }},
	{ID: "job/a-frozen-node", What: "a frozen node", Rule: "P3", mutate: func(d doc) { node(d)["operator_state"] = "frozen" }},
	{ID: "job/a-reserved-node", What: "a reserved node", Rule: "P3", mutate: func(d doc) { node(d)["operator_state"] = "reserved" }},
	{ID: "job/a-node-the-operator-drains", What: "a node the operator drains", Rule: "P3", mutate: func(d doc) { node(d)["operator_state"] = "draining" }},
	{ID: "job/a-down-node", What: "a down node", Rule: "P3", mutate: func(d doc) { node(d)["status"] = "down" }},
	{ID: "job/an-ineligible-node", What: "an ineligible node", Rule: "P3", mutate: func(d doc) { node(d)["eligibility"] = "ineligible" }},
	{ID: "job/a-node-at-90-pct-memory", What: "a node at 90 % memory", Rule: "P3", mutate: func(d doc) { node(d)["usage"].(doc)["memory_percent"] = 90.0 }},
	{ID: "job/a-node-at-85-pct-disk", What: "a node at 85 % disk", Rule: "P3", mutate: func(d doc) { node(d)["usage"].(doc)["disk_percent"] = 85.0 }},
	{ID: "job/a-sandbox-count-overrun-by-one", What: "a sandbox count overrun by one", Rule: "B1", mutate: func(d doc) { used(d)["sandboxes"] = limits(d)["max_sandboxes"] }},
	{ID: "job/a-cpu-budget-overrun-by-one", What: "a cpu budget overrun by one", Rule: "B1", mutate: func(d doc) {
		used(d)["cpu_mhz"] = limits(d)["cpu_mhz"].(float64) - resources(d)["CPU"].(float64) + 1
	}},
	{ID: "job/a-memory-budget-overrun-by-one", What: "a memory budget overrun by one", Rule: "B1", mutate: func(d doc) {
		used(d)["memory_mb"] = limits(d)["memory_mb"].(float64) - resources(d)["MemoryMB"].(float64) + 1
	}},
	{ID: "job/an-agent-at-its-default-quota", What: "an agent at its default quota", Rule: "B3", mutate: func(d doc) { d["principal"].(doc)["live_sandboxes"] = 5 }},
	{ID: "job/an-agent-at-its-token-s-quota", What: "an agent at its token's quota", Rule: "B3", mutate: func(d doc) {
		d["principal"].(doc)["max_live_sandboxes"] = 1
	}},
	{ID: "job/cpu-above-the-per-sandbox-max", What: "cpu above the per-sandbox max", Rule: "B2", mutate: func(d doc) { resources(d)["CPU"] = 2001 }},
	{ID: "job/memory-above-the-per-sandbox-max", What: "memory above the per-sandbox max", Rule: "B2", mutate: func(d doc) { resources(d)["MemoryMB"] = 4097 }},
	{ID: "job/egress-on-a-node-not-enrolled-for-egress", What: "egress on a node not enrolled for egress", network: render.NetworkEgress, Rule: "I5", mutate: func(d doc) {
		node(d)["enrollment"] = "sandbox"
	}},
}
