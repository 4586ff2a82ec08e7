package test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"sandgate/gateway"
	"sandgate/policies"
	"sandgate/render"
)

// The second line of defence: every job the renderer produces is admitted,
// and every single mutation of a rendered job (what a bug in the renderer or
// a tampered request would produce) is denied by exactly the rule that owns
// it. A mutation caught by the wrong rule, or by several, fails: the rule id
// is what a reviewer and an operator read.

var createdAt = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

type fixture struct {
	engine   *policies.Engine
	settings policies.Settings
	renderer *render.Renderer
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	e, err := policies.New(context.Background(), policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s := e.Settings()
	r, err := render.New(gateway.RenderConfig(s))
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{engine: e, settings: s, renderer: r}
}

func (f *fixture) spec(profile render.Profile, network render.Network) render.SandboxSpec {
	s := f.settings
	return render.SandboxSpec{
		ID: "k7x2m9p4q8r5t1v6", Prefix: s.Prefix, Node: "w1", OS: "linux", Arch: "arm64",
		Profile: profile, Network: network,
		LifetimeCeiling: time.Duration(s.Lifetime.CeilingSeconds) * time.Second,
		TTL:             time.Hour, CreatedAt: createdAt,
		CPUMHz: s.Sandbox.DefaultCPUMHz, MemoryMB: s.Sandbox.DefaultMemoryMB, Image: s.Images.Default,
		Priority: s.Priority.Default, WorkspaceMB: 256, TmpMB: 64, PidsLimit: s.Docker.PidsLimitDefault,
		Ulimits: render.Ulimits{NoFile: render.Ulimit{Soft: 1024, Hard: 1024}, NProc: render.Ulimit{Soft: 512, Hard: 512}},
		Runtime: s.Runtimes.Default, DiskMB: s.Docker.TaskDirs.QuotaMB,
	}
}

// doc is the admission input as a generic JSON document, ready to mutate.
type doc = map[string]any

func (f *fixture) input(t *testing.T, profile render.Profile, network render.Network) doc {
	t.Helper()
	spec := f.spec(profile, network)
	job, err := f.renderer.Job(spec)
	if err != nil {
		t.Fatal(err)
	}
	jobJSON, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	enrollment := "sandbox"
	if network == render.NetworkEgress {
		enrollment = "sandbox+egress"
	}
	mem, disk := 41.5, 22.0
	in := &policies.AdmissionInput{
		Now: createdAt.Unix(),
		Sandbox: policies.SandboxFacts{ID: spec.ID, Profile: string(profile), Network: string(network), Principal: "agent:ci",
			CreatedAt: createdAt.Unix(), CeilingAt: spec.CeilingAt().Unix()},
		Job: jobJSON,
		Node: policies.NodeFacts{ID: "5f3c", Name: "w1", Status: "ready", Eligibility: "eligible",
			Attributes:    map[string]string{"kernel.name": "linux", "cpu.arch": "arm64", "unique.hostname": "w1"},
			Meta:          map[string]string{},
			OperatorState: "active", Enrollment: enrollment,
			Usage: policies.NodeUsage{MemoryPercent: &mem, DiskPercent: &disk}},
		Budget: policies.Budget{
			Limits: policies.BudgetLimits{MaxSandboxes: 10, CPUMHz: 8000, MemoryMB: 16384},
			Used:   policies.BudgetUse{Sandboxes: 3, CPUMHz: 1500, MemoryMB: 1536},
		},
		Principal:   policies.PrincipalFacts{Sub: "ci", Role: "agent", LiveSandboxes: 1},
		NomadMounts: gateway.NomadMounts(f.settings),
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var d doc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func (f *fixture) decide(t *testing.T, d doc) policies.Decision {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	v, err := policies.ParseInputBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := f.engine.Decide(context.Background(), policies.Admission, v)
	if err != nil {
		t.Fatal(err)
	}
	return dec
}

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

var combos = []struct {
	profile render.Profile
	network render.Network
}{
	{render.ProfileStrict, render.NetworkNone},
	{render.ProfileWorkspace, render.NetworkNone},
	{render.ProfileStrict, render.NetworkEgress},
	{render.ProfileWorkspace, render.NetworkEgress},
}

func TestEveryRenderedJobIsAdmitted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, c := range combos {
		t.Run(fmt.Sprintf("%s/%s", c.profile, c.network), func(t *testing.T) {
			d := f.decide(t, f.input(t, c.profile, c.network))
			if !d.Allow {
				t.Fatalf("the rendered job was denied: %+v", d.Violations)
			}
		})
	}
}

func TestEachSingleMutationIsDeniedByExactlyItsRule(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cases := []struct {
		name    string
		profile render.Profile // default strict
		network render.Network // default none
		mutate  func(d doc)
		want    string
	}{
		{name: "privileged true", want: "H1", mutate: func(d doc) { config(d)["privileged"] = true }},
		{name: "privileged removed", want: "H1", mutate: func(d doc) { delete(config(d), "privileged") }},
		{name: "a cap_add outside the profile (SYS_ADMIN on workspace)", profile: render.ProfileWorkspace, want: "H1", mutate: func(d doc) {
			config(d)["cap_add"] = append(config(d)["cap_add"].([]any), "SYS_ADMIN")
		}},
		{name: "a cap_add on strict, which has none", want: "H1", mutate: func(d doc) { config(d)["cap_add"] = []any{"CHOWN"} }},
		{name: "cap_drop empty", want: "H1", mutate: func(d doc) { config(d)["cap_drop"] = []any{} }},
		{name: "cap_drop not ALL", want: "H1", mutate: func(d doc) { config(d)["cap_drop"] = []any{"NET_RAW"} }},
		{name: "the raw_exec driver", want: "H1", mutate: func(d doc) { task(d)["Driver"] = "raw_exec" }},
		{name: "two allocations", want: "H1", mutate: func(d doc) { group(d)["Count"] = 2 }},
		{name: "an unknown docker option", want: "H1", mutate: func(d doc) { config(d)["oom_score_adj"] = -1000 }},
		{name: "no-new-privileges missing", want: "H2", mutate: func(d doc) { config(d)["security_opt"] = []any{} }},
		{name: "pids_limit removed", want: "H3", mutate: func(d doc) { delete(config(d), "pids_limit") }},
		{name: "memory_max above memory", want: "H3", mutate: func(d doc) {
			resources(d)["MemoryMaxMB"] = resources(d)["MemoryMB"].(float64) + 1
		}},
		{name: "init off", want: "H3", mutate: func(d doc) { config(d)["init"] = false }},
		{name: "ipc shared with the host", want: "H3", mutate: func(d doc) { config(d)["ipc_mode"] = "host" }},
		{name: "no hard cpu limit", want: "H3", mutate: func(d doc) { config(d)["cpu_hard_limit"] = false }},
		{name: "nofile ulimit above the max", want: "H3", mutate: func(d doc) { ulimit(d)["nofile"] = "1048576:1048576" }},
		// The docker driver wants ulimit and labels as a list of one map of strings: an
		// object registers and fails the task at start, and Nomad merges several maps.
		{name: "ulimit as an object", want: "H3", mutate: func(d doc) { config(d)["ulimit"] = ulimit(d) }},
		{name: "ulimit as a list of two maps", want: "H3", mutate: func(d doc) {
			config(d)["ulimit"] = []any{doc{"nofile": ulimit(d)["nofile"]}, doc{"nproc": ulimit(d)["nproc"]}}
		}},
		{name: "labels as an object", want: "H9", mutate: func(d doc) { config(d)["labels"] = labels(d) }},
		{name: "labels as a list of two maps", want: "H9", mutate: func(d doc) {
			config(d)["labels"] = []any{labels(d), doc{"team": "ci"}}
		}},
		{name: "identity env on", want: "H4", mutate: func(d doc) { task(d)["Identity"].(doc)["Env"] = true }},
		{name: "identity file on", want: "H4", mutate: func(d doc) { task(d)["Identity"].(doc)["File"] = true }},
		{name: "a vault block", want: "H4", mutate: func(d doc) { task(d)["Vault"] = doc{"Policies": []any{"x"}} }},
		{name: "a template block", want: "H4", mutate: func(d doc) {
			task(d)["Templates"] = []any{doc{"EmbeddedTmpl": "x", "DestPath": "local/x"}}
		}},
		{name: "an artifact fetched by the host", want: "H4", mutate: func(d doc) {
			task(d)["Artifacts"] = []any{doc{"GetterSource": "http://169.254.169.254/latest"}}
		}},
		{name: "a host volume", want: "H5", mutate: func(d doc) { config(d)["volumes"] = []any{"/etc:/host-etc"} }},
		{name: "a docker.sock mount", want: "H5", mutate: func(d doc) {
			config(d)["mount"] = append(config(d)["mount"].([]any), doc{"type": "bind", "source": "/var/run/docker.sock", "target": "/var/run/docker.sock"})
		}},
		{name: "a device", want: "H5", mutate: func(d doc) { config(d)["devices"] = []any{doc{"host_path": "/dev/kvm"}} }},
		{name: "the host pid namespace", want: "H5", mutate: func(d doc) { config(d)["pid_mode"] = "host" }},
		{name: "an ephemeral disk above the task-dir quota", want: "H5", mutate: func(d doc) {
			group(d)["EphemeralDisk"].(doc)["SizeMB"] = 100000
		}},
		{name: "a sticky ephemeral disk", want: "H5", mutate: func(d doc) { group(d)["EphemeralDisk"].(doc)["Sticky"] = true }},
		{name: "Nomad's own mounts left out of the input", want: "INPUT", mutate: func(d doc) { delete(d, "nomad_mounts") }},
		{name: "tmpfs without a size", want: "H6", mutate: func(d doc) { delete(mount(d, "/workspace"), "tmpfs_options") }},
		{name: "tmpfs /tmp missing", want: "H6", mutate: func(d doc) {
			config(d)["mount"] = []any{mount(d, "/workspace")}
		}},
		{name: "readonly off in strict", want: "H6", mutate: func(d doc) { config(d)["readonly_rootfs"] = false }},
		{name: "a group service block", want: "H7", mutate: func(d doc) { group(d)["Services"] = []any{doc{"Name": "x"}} }},
		{name: "a task service with tags", want: "H7", mutate: func(d doc) { task(d)["Services"] = []any{doc{"Name": "x", "Tags": []any{"a"}}} }},
		{name: "ports", want: "H7", mutate: func(d doc) { config(d)["ports"] = []any{"http"} }},
		{name: "a resolver inside the cluster", want: "H7", mutate: func(d doc) { config(d)["dns_servers"] = []any{"10.0.0.2"} }},
		{name: "host network", want: "H7", mutate: func(d doc) { config(d)["network_mode"] = "host" }},
		{name: "bridge network on a none sandbox", want: "H7", mutate: func(d doc) { config(d)["network_mode"] = "bridge" }},
		{name: "a group network", want: "H7", mutate: func(d doc) { group(d)["Networks"] = []any{doc{"Mode": "host"}} }},
		{name: "a command that does not sleep", want: "H8", mutate: func(d doc) { config(d)["command"] = "sh" }},
		{name: "a sleep past the ceiling", want: "H8", mutate: func(d doc) { config(d)["args"] = []any{"999999"} }},
		{name: "an entrypoint override", want: "H8", mutate: func(d doc) { config(d)["entrypoint"] = []any{"/bin/sh"} }},
		{name: "priority at the ceiling", want: "R1", mutate: func(d doc) { job(d)["Priority"] = 20 }},
		{name: "priority above the ceiling", want: "R1", mutate: func(d doc) { job(d)["Priority"] = 90 }},
		{name: "restarts on", want: "R1", mutate: func(d doc) { group(d)["RestartPolicy"].(doc)["Attempts"] = 3 }},
		{name: "reschedule unlimited", want: "R1", mutate: func(d doc) { group(d)["ReschedulePolicy"].(doc)["Unlimited"] = true }},
		{name: "a job id without the prefix", want: "H9", mutate: func(d doc) { job(d)["ID"] = "other-k7x2m9p4q8r5t1v6" }},
		{name: "a job name without the prefix", want: "H9", mutate: func(d doc) { job(d)["Name"] = "web" }},
		{name: "seccomp unconfined", want: "H10", mutate: func(d doc) {
			config(d)["security_opt"] = []any{"no-new-privileges", "seccomp=unconfined"}
		}},
		{name: "apparmor unconfined", want: "H10", mutate: func(d doc) {
			config(d)["security_opt"] = []any{"no-new-privileges", "apparmor=unconfined"}
		}},
		{name: "an unlisted runtime", want: "H10", mutate: func(d doc) { config(d)["runtime"] = "kata-runtime" }},
		{name: "an image off the allowlist", want: "H11", mutate: func(d doc) { config(d)["image"] = "evil:latest" }},
		{name: "the node pin removed", want: "P1", mutate: func(d doc) {
			cs := job(d)["Constraints"].([]any)
			job(d)["Constraints"] = slices.DeleteFunc(cs, func(c any) bool { return c.(doc)["LTarget"] == "${node.unique.name}" })
		}},
		{name: "the node pin pointing elsewhere", want: "P1", mutate: func(d doc) { constraint(d, "${node.unique.name}")["RTarget"] = "w2" }},
		{name: "the node pin as a regexp", want: "P1", mutate: func(d doc) {
			constraint(d, "${node.unique.name}")["Operand"] = "regexp"
			constraint(d, "${node.unique.name}")["RTarget"] = ".*"
		}},
		{name: "a wrong architecture", want: "P1", mutate: func(d doc) { constraint(d, "${attr.cpu.arch}")["RTarget"] = "amd64" }},
		{name: "a node that is not enrolled", want: "P1", mutate: func(d doc) { node(d)["enrollment"] = "none" }},
		{name: "a control-plane node", want: "P2", mutate: func(d doc) { node(d)["control_plane"] = true }},
		{name: "a node with a control-plane role in its meta", want: "P2", mutate: func(d doc) { node(d)["meta"] = doc{"node-role": "server"} }},
		{name: "a draining node", want: "P3", mutate: func(d doc) { node(d)["drain"] = true }},
		{name: "a frozen node", want: "P3", mutate: func(d doc) { node(d)["operator_state"] = "frozen" }},
		{name: "a reserved node", want: "P3", mutate: func(d doc) { node(d)["operator_state"] = "reserved" }},
		{name: "a node the operator drains", want: "P3", mutate: func(d doc) { node(d)["operator_state"] = "draining" }},
		{name: "a down node", want: "P3", mutate: func(d doc) { node(d)["status"] = "down" }},
		{name: "an ineligible node", want: "P3", mutate: func(d doc) { node(d)["eligibility"] = "ineligible" }},
		{name: "a node at 90 % memory", want: "P3", mutate: func(d doc) { node(d)["usage"].(doc)["memory_percent"] = 90.0 }},
		{name: "a node at 85 % disk", want: "P3", mutate: func(d doc) { node(d)["usage"].(doc)["disk_percent"] = 85.0 }},
		{name: "a sandbox count overrun by one", want: "B1", mutate: func(d doc) { used(d)["sandboxes"] = limits(d)["max_sandboxes"] }},
		{name: "a cpu budget overrun by one", want: "B1", mutate: func(d doc) {
			used(d)["cpu_mhz"] = limits(d)["cpu_mhz"].(float64) - resources(d)["CPU"].(float64) + 1
		}},
		{name: "a memory budget overrun by one", want: "B1", mutate: func(d doc) {
			used(d)["memory_mb"] = limits(d)["memory_mb"].(float64) - resources(d)["MemoryMB"].(float64) + 1
		}},
		{name: "an agent at its default quota", want: "B3", mutate: func(d doc) { d["principal"].(doc)["live_sandboxes"] = 5 }},
		{name: "an agent at its token's quota", want: "B3", mutate: func(d doc) {
			d["principal"].(doc)["max_live_sandboxes"] = 1
		}},
		{name: "cpu above the per-sandbox max", want: "B2", mutate: func(d doc) { resources(d)["CPU"] = 2001 }},
		{name: "memory above the per-sandbox max", want: "B2", mutate: func(d doc) { resources(d)["MemoryMB"] = 4097 }},
		{name: "egress on a node not enrolled for egress", network: render.NetworkEgress, want: "I5", mutate: func(d doc) {
			node(d)["enrollment"] = "sandbox"
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			profile, network := c.profile, c.network
			if profile == "" {
				profile = render.ProfileStrict
			}
			if network == "" {
				network = render.NetworkNone
			}
			d := f.input(t, profile, network)
			c.mutate(d)
			dec := f.decide(t, d)
			if dec.Allow {
				t.Fatalf("mutation %q was admitted", c.name)
			}
			if got := dec.RuleIDs(); len(got) != 1 || got[0] != c.want {
				t.Fatalf("mutation %q denied by %v, want exactly [%s]:\n%s", c.name, got, c.want, violations(dec))
			}
		})
	}
}

func violations(d policies.Decision) string {
	var b strings.Builder
	for _, v := range d.Violations {
		fmt.Fprintf(&b, "  %s: %s\n", v.Rule, v.Msg)
	}
	return b.String()
}
