package jobspec

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"sandgate/policies"
	"sandgate/render"
)

// shipped is the engine of the embedded bundle, compiled once for every test.
var shipped = sync.OnceValues(func() (*policies.Engine, error) {
	return policies.New(context.Background(), policies.Config{})
})

func engine(t *testing.T) *policies.Engine {
	t.Helper()
	e, err := shipped()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var created = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func TestNewTakesTheBundleDefaultsForZeroFields(t *testing.T) {
	t.Parallel()
	s := engine(t).Settings()
	spec, err := New(s, Request{Node: "w1"}, created)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[a-z0-9]{16}$`).MatchString(spec.ID) {
		t.Errorf("id %q: want 16 of [a-z0-9]", spec.ID)
	}
	nofile, _ := parseUlimit(s.Docker.UlimitDefault["nofile"])
	nproc, _ := parseUlimit(s.Docker.UlimitDefault["nproc"])
	want := render.SandboxSpec{
		ID: spec.ID, Prefix: s.Prefix, Node: "w1",
		OS: s.Placement.AllowedOS[0], Arch: s.Placement.AllowedArchitectures[0],
		Profile: render.ProfileStrict, Network: render.NetworkNone,
		LifetimeCeiling: time.Duration(s.Lifetime.CeilingSeconds) * time.Second,
		TTL:             time.Duration(s.Lifetime.DefaultTTLSeconds) * time.Second,
		CreatedAt:       created,
		CPUMHz:          s.Sandbox.DefaultCPUMHz, MemoryMB: s.Sandbox.DefaultMemoryMB,
		Image: s.Images.Default, Priority: s.Priority.Default,
		WorkspaceMB: s.Docker.Tmpfs["/workspace"].DefaultMB, TmpMB: s.Docker.Tmpfs["/tmp"].DefaultMB,
		PidsLimit: s.Docker.PidsLimitDefault, Ulimits: render.Ulimits{NoFile: nofile, NProc: nproc},
		Runtime: s.Runtimes.Default, DiskMB: s.Docker.TaskDirs.QuotaMB,
	}
	if spec != want {
		t.Fatalf("spec\n%+v\nwant\n%+v", spec, want)
	}
	if nofile.Soft == 0 || nproc.Soft == 0 {
		t.Fatalf("the shipped ulimits did not parse: %+v %+v", nofile, nproc)
	}
}

func TestNewKeepsWhatTheRequestSays(t *testing.T) {
	t.Parallel()
	s := engine(t).Settings()
	req := Request{ID: "abcdefgh23456789", Node: "w2", Arch: "amd64", Profile: "workspace", Network: "egress",
		TTL: 90 * time.Second, CPUMHz: 700, MemoryMB: 300, Image: "busybox:1.37"}
	spec, err := New(s, req, created)
	if err != nil {
		t.Fatal(err)
	}
	if spec.ID != req.ID || spec.Node != req.Node || spec.Arch != req.Arch || spec.Profile != render.ProfileWorkspace ||
		spec.Network != render.NetworkEgress || spec.TTL != req.TTL || spec.CPUMHz != req.CPUMHz ||
		spec.MemoryMB != req.MemoryMB || spec.Image != req.Image {
		t.Fatalf("spec %+v does not keep request %+v", spec, req)
	}
}

func TestNewRefusesUnusablePolicyDataNamingIt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, names string
		edit        func(s *policies.Settings)
	}{
		{"nofile", "docker.ulimit_default.nofile", func(s *policies.Settings) {
			s.Docker.UlimitDefault = map[string]string{"nofile": "1024", "nproc": "512:512"}
		}},
		{"nproc", "docker.ulimit_default.nproc", func(s *policies.Settings) {
			s.Docker.UlimitDefault = map[string]string{"nofile": "1024:1024", "nproc": "x:512"}
		}},
		{"no ulimits", "docker.ulimit_default.nofile", func(s *policies.Settings) { s.Docker.UlimitDefault = nil }},
		{"no os", "placement", func(s *policies.Settings) { s.Placement.AllowedOS = nil }},
		{"no arches", "placement", func(s *policies.Settings) { s.Placement.AllowedArchitectures = nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := engine(t).Settings()
			c.edit(&s)
			_, err := New(s, Request{Node: "w1"}, created)
			if err == nil || !strings.Contains(err.Error(), c.names) {
				t.Fatalf("err %v, want one naming %s", err, c.names)
			}
		})
	}
}

func TestParseUlimitReadsSoftColonHard(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]render.Ulimit{"1024:2048": {Soft: 1024, Hard: 2048}, "0:0": {}} {
		if got, err := parseUlimit(in); err != nil || got != want {
			t.Errorf("parseUlimit(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1024", "a:1", "1:b", "1:2:3"} {
		if got, err := parseUlimit(in); err == nil {
			t.Errorf("parseUlimit(%q) = %+v, want an error", in, got)
		}
	}
}

func TestNewSandboxIDIsSixteenBase32Characters(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`^[a-z2-7]{16}$`)
	seen := map[string]bool{}
	for range 100 {
		id := NewSandboxID()
		if !re.MatchString(id) {
			t.Fatalf("id %q", id)
		}
		if seen[id] {
			t.Fatalf("id %q twice", id)
		}
		seen[id] = true
	}
}

func TestRenderSubmitsTheJobItReturnsInTheRequestedNamespace(t *testing.T) {
	t.Parallel()
	s := engine(t).Settings()
	spec, job, jobJSON, err := Render(s, Request{Node: "w1", Namespace: "sandboxes"}, created)
	if err != nil {
		t.Fatal(err)
	}
	if job.ID == nil || *job.ID != spec.JobID() || job.Namespace == nil || *job.Namespace != "sandboxes" {
		t.Fatalf("job id %v namespace %v, want %s in sandboxes", job.ID, job.Namespace, spec.JobID())
	}
	want, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	if string(jobJSON) != string(want) {
		t.Fatal("the JSON is not the job returned")
	}
	_, job, _, err = Render(s, Request{Node: "w1"}, created)
	if err != nil {
		t.Fatal(err)
	}
	if *job.Namespace != render.DefaultConfig().Namespace {
		t.Fatalf("namespace %q without one asked, want the renderer's default", *job.Namespace)
	}
}

func TestRenderNamesTheFieldTheRendererRefuses(t *testing.T) {
	t.Parallel()
	s := engine(t).Settings()
	_, job, _, err := Render(s, Request{Node: "w1", Profile: "root"}, created)
	var fe *render.FieldError
	if !errors.As(err, &fe) || job != nil {
		t.Fatalf("profile root: job %v, err %v; want a *render.FieldError", job, err)
	}
	if fe.Field != "profile" {
		t.Fatalf("field %q, want profile", fe.Field)
	}
}

func TestRenderConfigTakesProfilesAndNetworksFromPolicyData(t *testing.T) {
	t.Parallel()
	s := engine(t).Settings()
	cfg := RenderConfig(s)
	if len(cfg.Profiles) != len(s.Profiles) || len(cfg.NetworkModes) != len(s.Networks) {
		t.Fatalf("%d profiles %d networks, want %d and %d", len(cfg.Profiles), len(cfg.NetworkModes), len(s.Profiles), len(s.Networks))
	}
	for name, p := range s.Profiles {
		got := cfg.Profiles[render.Profile(name)]
		if got.ReadonlyRootfs != p.ReadonlyRootfs || len(got.CapAdd) != len(p.CapAdd) {
			t.Errorf("profile %s: %+v, want %+v", name, got, p)
		}
	}
	for name, n := range s.Networks {
		if cfg.NetworkModes[render.Network(name)] != n.NetworkMode {
			t.Errorf("network %s: mode %q, want %q", name, cfg.NetworkModes[render.Network(name)], n.NetworkMode)
		}
		if len(cfg.DNSServers[render.Network(name)]) != len(n.DNSServers) {
			t.Errorf("network %s: dns %v, want %v", name, cfg.DNSServers[render.Network(name)], n.DNSServers)
		}
	}
}

// A rendered job on WorkerFacts' node, with the default budget and
// Nomad's own mounts, is what the shipped bundle admits: the input the CLI
// prints for a reviewer to replay.
func TestTheShippedBundleAdmitsARenderedJobOnAWorker(t *testing.T) {
	t.Parallel()
	e := engine(t)
	s := e.Settings()
	for _, network := range []string{"none", "egress"} {
		spec, _, jobJSON, err := Render(s, Request{Node: "w1", Network: network}, created)
		if err != nil {
			t.Fatal(err)
		}
		enrollment := "sandbox"
		if network == "egress" {
			enrollment = "sandbox+egress"
		}
		node := WorkerFacts("w1", spec.Arch, enrollment, s)
		in := AdmissionInput(spec, jobJSON, node, policies.Budget{Limits: s.NodeBudgetDefault},
			policies.PrincipalFacts{Sub: "ci", Role: "agent"}, NomadMounts(s))
		if in.Sandbox.ID != spec.ID || in.Sandbox.CeilingAt != spec.CeilingAt().Unix() || in.Now != created.Unix() ||
			in.Sandbox.Principal != "agent:ci" || string(in.Job) != string(jobJSON) {
			t.Fatalf("admission input %+v", in.Sandbox)
		}
		v, err := in.Value()
		if err != nil {
			t.Fatal(err)
		}
		d, err := e.Decide(context.Background(), policies.Admission, v)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allow {
			t.Fatalf("network %s: denied %v", network, d.Violations)
		}
	}
}

func TestNomadMountsIsACopy(t *testing.T) {
	t.Parallel()
	s := engine(t).Settings()
	m := NomadMounts(s)
	if len(m) == 0 {
		t.Fatal("the shipped bundle states no Nomad mounts")
	}
	m[0].Target = "/changed"
	if s.Docker.TaskDirs.Mounts[0].Target == "/changed" {
		t.Fatal("NomadMounts returned the settings' own slice")
	}
}
