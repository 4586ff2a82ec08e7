package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current renderer")

// createdAt is fixed so rendered jobs are deterministic (2025-11-29T09:00:00Z).
var createdAt = time.Unix(1764406800, 0).UTC()

// validSpec returns a spec with the policy-data defaults that renders cleanly.
func validSpec(p Profile, n Network) SandboxSpec {
	return SandboxSpec{
		ID:              "k7x2m9p4q8r5t1v6",
		Prefix:          "sandgate-sbx-",
		Node:            "w1",
		OS:              "linux",
		Arch:            "arm64",
		Profile:         p,
		Network:         n,
		LifetimeCeiling: 4 * time.Hour,
		TTL:             time.Hour,
		CreatedAt:       createdAt,
		CPUMHz:          500,
		MemoryMB:        512,
		Image:           "ubuntu:24.04",
		Priority:        10,
		WorkspaceMB:     256,
		TmpMB:           64,
		PidsLimit:       256,
		Ulimits: Ulimits{
			NoFile: Ulimit{Soft: 1024, Hard: 1024},
			NProc:  Ulimit{Soft: 512, Hard: 512},
		},
		Runtime: "runc",
		DiskMB:  64,
	}
}

func newRenderer(tb testing.TB) *Renderer {
	tb.Helper()
	r, err := New(DefaultConfig())
	if err != nil {
		tb.Fatalf("New(DefaultConfig()): %v", err)
	}
	return r
}

func mustJob(tb testing.TB, spec SandboxSpec) *api.Job {
	tb.Helper()
	job, err := newRenderer(tb).Job(spec)
	if err != nil {
		tb.Fatalf("Job: %v", err)
	}
	return job
}

func dockerConfig(tb testing.TB, job *api.Job) map[string]any {
	tb.Helper()
	if len(job.TaskGroups) != 1 || len(job.TaskGroups[0].Tasks) != 1 {
		tb.Fatalf("want one group with one task, got %+v", job.TaskGroups)
	}
	return job.TaskGroups[0].Tasks[0].Config
}

func TestJobMatchesGoldenFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		golden  string
		profile Profile
		network Network
	}{
		{"strict-none", ProfileStrict, NetworkNone},
		{"workspace-none", ProfileWorkspace, NetworkNone},
		{"strict-egress", ProfileStrict, NetworkEgress},
		{"workspace-egress", ProfileWorkspace, NetworkEgress},
	} {
		t.Run("a "+tc.golden+" sandbox renders exactly its golden job", func(t *testing.T) {
			t.Parallel()
			got, err := json.MarshalIndent(mustJob(t, validSpec(tc.profile, tc.network)), "", "  ")
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", tc.golden+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o600); err != nil {
					t.Fatalf("update golden: %v", err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden (run with -update to create): %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the rendered job (run with -update after review):\n%s", path, got)
			}
		})
	}
}

func TestJobAppliesProfileAndNetwork(t *testing.T) {
	t.Parallel()
	wantWorkspaceCaps := []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETFCAP"}
	for _, tc := range []struct {
		name        string
		profile     Profile
		network     Network
		wantCaps    []string // nil: no cap_add key at all
		wantRO      bool
		wantNetMode string
	}{
		{"strict without network adds no capability and mounts root read-only",
			ProfileStrict, NetworkNone, nil, true, "none"},
		{"workspace without network adds the eight workspace capabilities on a writable root",
			ProfileWorkspace, NetworkNone, wantWorkspaceCaps, false, "none"},
		{"strict with egress joins the egress bridge",
			ProfileStrict, NetworkEgress, nil, true, "sandgate-egress"},
		{"workspace with egress joins the egress bridge with the workspace capabilities",
			ProfileWorkspace, NetworkEgress, wantWorkspaceCaps, false, "sandgate-egress"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			job := mustJob(t, validSpec(tc.profile, tc.network))
			cfg := dockerConfig(t, job)
			caps, has := cfg["cap_add"]
			switch {
			case tc.wantCaps == nil && has:
				t.Errorf("cap_add = %v, want the key absent", caps)
			case tc.wantCaps != nil && !slices.Equal(asStrings(t, caps), tc.wantCaps):
				t.Errorf("cap_add = %v, want %v", caps, tc.wantCaps)
			}
			if cfg["readonly_rootfs"] != tc.wantRO {
				t.Errorf("readonly_rootfs = %v, want %v", cfg["readonly_rootfs"], tc.wantRO)
			}
			if cfg["network_mode"] != tc.wantNetMode {
				t.Errorf("network_mode = %v, want %q", cfg["network_mode"], tc.wantNetMode)
			}
			if !slices.Equal(asStrings(t, cfg["cap_drop"]), []string{"ALL"}) || cfg["privileged"] != false {
				t.Errorf("cap_drop = %v, privileged = %v, want [ALL] and false", cfg["cap_drop"], cfg["privileged"])
			}
			if job.Meta[MetaProfile] != string(tc.profile) || job.Meta[MetaNetwork] != string(tc.network) {
				t.Errorf("Meta = %v, want profile %q and network %q", job.Meta, tc.profile, tc.network)
			}
		})
	}
}

func TestJobSleepsUntilTheLifetimeCeiling(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		ceiling   time.Duration
		wantArgs  string
		wantMetaC string
	}{
		{"the default four hour ceiling sleeps 14400 seconds", 4 * time.Hour, "14400", "1764421200"},
		{"a ten minute ceiling sleeps 600 seconds", 10 * time.Minute, "600", "1764407400"},
		{"a ceiling equal to the minimum ttl sleeps 60 seconds", time.Minute, "60", "1764406860"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := validSpec(ProfileStrict, NetworkNone)
			spec.LifetimeCeiling, spec.TTL = tc.ceiling, time.Minute
			job := mustJob(t, spec)
			cfg := dockerConfig(t, job)
			if cfg["command"] != "sleep" || !slices.Equal(asStrings(t, cfg["args"]), []string{tc.wantArgs}) {
				t.Errorf("command %v args %v, want sleep [%s]", cfg["command"], cfg["args"], tc.wantArgs)
			}
			if got := job.Meta[MetaCeilingAt]; got != tc.wantMetaC {
				t.Errorf("Meta[%s] = %q, want %q", MetaCeilingAt, got, tc.wantMetaC)
			}
			if got := spec.CeilingAt().Unix(); got != createdAt.Add(tc.ceiling).Unix() {
				t.Errorf("CeilingAt = %d, want %d", got, createdAt.Add(tc.ceiling).Unix())
			}
		})
	}
}

func TestJobPinsPlacementToTheSpecNode(t *testing.T) {
	t.Parallel()
	spec := validSpec(ProfileStrict, NetworkNone)
	spec.Node, spec.Arch = "worker-7.example", "amd64"
	job := mustJob(t, spec)
	want := []api.Constraint{
		{LTarget: "${attr.kernel.name}", RTarget: "linux", Operand: "="},
		{LTarget: "${attr.cpu.arch}", RTarget: "amd64", Operand: "="},
		{LTarget: "${node.unique.name}", RTarget: "worker-7.example", Operand: "="},
	}
	if len(job.Constraints) != len(want) {
		t.Fatalf("got %d constraints, want %d", len(job.Constraints), len(want))
	}
	for i, c := range job.Constraints {
		if *c != want[i] {
			t.Errorf("constraint %d = %+v, want %+v", i, *c, want[i])
		}
	}
	if *job.ID != "sandgate-sbx-k7x2m9p4q8r5t1v6" || *job.Name != *job.ID || spec.JobID() != *job.ID {
		t.Errorf("ID %q Name %q JobID %q, want all sandgate-sbx-k7x2m9p4q8r5t1v6", *job.ID, *job.Name, spec.JobID())
	}
}

func TestJobConfigHasExactlyTheContractKeys(t *testing.T) {
	t.Parallel()
	base := []string{"image", "command", "args", "privileged", "cap_drop", "security_opt", "pids_limit",
		"ulimit", "init", "ipc_mode", "cpu_hard_limit", "readonly_rootfs", "mount", "network_mode", "runtime", "labels"}
	for _, tc := range []struct {
		name    string
		profile Profile
		network Network
		want    []string
	}{
		{"a strict job carries the base keys only", ProfileStrict, NetworkNone, base},
		{"a workspace job carries the base keys and cap_add", ProfileWorkspace, NetworkNone, append(slices.Clone(base), "cap_add")},
		{"an egress job carries the base keys and its resolvers", ProfileStrict, NetworkEgress, append(slices.Clone(base), "dns_servers")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := dockerConfig(t, mustJob(t, validSpec(tc.profile, tc.network)))
			got := make([]string, 0, len(cfg))
			for k := range cfg {
				got = append(got, k)
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.want))
			if !slices.Equal(got, want) {
				t.Errorf("config keys = %v, want %v", got, want)
			}
		})
	}
}

// The docker driver's schema types ulimit and labels as list(map(string)):
// Nomad registers an object there and the task then fails at start ("list of
// map of string required"), and it merges the maps of a longer list.
func TestJobRendersUlimitAndLabelsAsAListOfExactlyOneMap(t *testing.T) {
	t.Parallel()
	spec := validSpec(ProfileStrict, NetworkNone)
	spec.Ulimits = Ulimits{NoFile: Ulimit{Soft: 512, Hard: 2048}, NProc: Ulimit{Soft: 256, Hard: 512}}
	b, err := json.Marshal(dockerConfig(t, mustJob(t, spec)))
	if err != nil {
		t.Fatalf("marshal config: %v", err)
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("unmarshal config: %v", err)
	}
	for _, tc := range []struct {
		key  string
		want map[string]string
	}{
		{"ulimit", map[string]string{"nofile": "512:2048", "nproc": "256:512"}},
		{"labels", map[string]string{LabelSandboxID: spec.ID}},
	} {
		var got []map[string]string
		if err := json.Unmarshal(cfg[tc.key], &got); err != nil {
			t.Errorf("%s = %s, want a list of one map of strings: %v", tc.key, cfg[tc.key], err)
			continue
		}
		if len(got) != 1 || !maps.Equal(got[0], tc.want) {
			t.Errorf("%s = %s, want [%v]", tc.key, cfg[tc.key], tc.want)
		}
	}
}

func TestJobsShareNoMutableState(t *testing.T) {
	t.Parallel()
	r := newRenderer(t)
	spec := validSpec(ProfileWorkspace, NetworkNone)
	first, err := r.Job(spec)
	if err != nil {
		t.Fatalf("Job: %v", err)
	}
	first.TaskGroups[0].Tasks[0].Config["cap_add"].([]string)[0] = "SYS_ADMIN"
	first.Datacenters[0] = "dc-evil"
	second, err := r.Job(spec)
	if err != nil {
		t.Fatalf("Job: %v", err)
	}
	if got := asStrings(t, dockerConfig(t, second)["cap_add"])[0]; got != "CHOWN" {
		t.Errorf("second job's first cap = %q, want CHOWN", got)
	}
	if second.Datacenters[0] != "*" {
		t.Errorf("second job's datacenters = %v, want [*]", second.Datacenters)
	}
}

func TestNewKeepsItsOwnCopyOfTheConfig(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	cfg.NetworkModes[NetworkNone] = "host"
	cfg.Profiles[ProfileStrict] = ProfileConfig{CapAdd: []string{"SYS_ADMIN"}}
	job, err := r.Job(validSpec(ProfileStrict, NetworkNone))
	if err != nil {
		t.Fatalf("Job: %v", err)
	}
	cfgOut := dockerConfig(t, job)
	if cfgOut["network_mode"] != "none" || cfgOut["cap_add"] != nil {
		t.Errorf("renderer saw the caller's later edits: network_mode %v cap_add %v", cfgOut["network_mode"], cfgOut["cap_add"])
	}
}

func asStrings(tb testing.TB, v any) []string {
	tb.Helper()
	s, ok := v.([]string)
	if !ok {
		tb.Fatalf("%#v is not a []string", v)
	}
	return s
}

// errorsAsField unwraps err to a *FieldError.
func errorsAsField(err error) (*FieldError, bool) {
	var fe *FieldError
	ok := errors.As(err, &fe)
	return fe, ok
}
