package isolation

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current renderer")

// overlayConfig is the default config with overlays, extra ports and a
// control-plane name: every list of the template has more than one entry.
func overlayConfig() Config {
	c := DefaultConfig()
	c.Overlays = []string{"10.8.0.0/24", "198.51.100.128/25"}
	c.NomadPorts = []int{4646, 4647, 4648, 4649}
	c.SSHPorts = []int{22, 2222}
	c.Resolvers = []string{"9.9.9.9"}
	c.ControlPlaneNames = []string{"nomad-server-1", "nomad-server-2.example.org"}
	return c
}

func TestTheScriptMatchesItsGoldenFile(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]Config{
		"default.sh":  DefaultConfig(),
		"overlays.sh": overlayConfig(),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, got, err := Render(cfg)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil { //nolint:gosec // a test golden file, read by people
					t.Fatalf("update golden: %v", err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden (run with -update to create): %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the rendered script (review, then run with -update):\n%s", path, got)
			}
		})
	}
}

// The script is rendered from the plan alone: every rule is added, deleted
// and checked with exactly its arguments, and nothing else is.
func TestTheScriptCarriesOutExactlyThePlan(t *testing.T) {
	t.Parallel()
	p, script, err := Render(overlayConfig())
	if err != nil {
		t.Fatal(err)
	}
	s := string(script)
	for _, action := range []string{"ensure", "delete", "check"} {
		calls := regexp.MustCompile(`(?m)^\t`+action+`_rule .*$`).FindAllString(s, -1)
		if len(calls) != len(p.Rules) {
			t.Errorf("%d %s_rule calls, want one per rule (%d)", len(calls), action, len(p.Rules))
		}
		for _, r := range p.Rules {
			if line := "\t" + ruleCall(action, r) + "\n"; !strings.Contains(s, line) {
				t.Errorf("no %q in the script", line)
			}
		}
	}
	for _, fn := range []string{"ensure_chain", "delete_chain"} {
		if n := strings.Count(s, "\t"+fn+" "+p.Chain+"\n"); n != 1 {
			t.Errorf("%s %s appears %d times, want 1", fn, p.Chain, n)
		}
	}
	for _, ind := range p.ControlPlane.Indicators {
		if !strings.Contains(s, "\nindicator_"+ind.ID+"() {") {
			t.Errorf("indicator %s has no check function", ind.ID)
		}
	}
	for _, want := range []string{
		"readonly CONTROL_PLANE_NAMES=('nomad-server-1' 'nomad-server-2.example.org')\n",
		"readonly SERVER_PORTS=(4647 4648)\n",
		"--opt com.docker.network.bridge.enable_icc=false",
		"--label 'sandgate.resolvers=9.9.9.9'",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the script lacks %q", want)
		}
	}
}

func TestApplyAddsTheFirewallBeforeTheNetworkAndRemoveGoesInReverse(t *testing.T) {
	t.Parallel()
	p, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Apply) != len(p.Rules)+2 || len(p.Remove) != len(p.Apply) {
		t.Fatalf("%d apply and %d remove steps for %d rules", len(p.Apply), len(p.Remove), len(p.Rules))
	}
	if first, last := p.Apply[0], p.Apply[len(p.Apply)-1]; first.Kind != "chain" || last.Kind != "network" {
		t.Errorf("apply starts with %s and ends with %s", first.Kind, last.Kind)
	}
	for i, s := range p.Remove {
		a := p.Apply[len(p.Apply)-1-i]
		if s.Kind != a.Kind || s.Name != a.Name || s.Guard != a.Guard || s.Action != "delete" || a.Action != "ensure" {
			t.Errorf("remove step %d %+v is not the reverse of apply step %+v", i, s, a)
		}
	}
	jump, ok := p.Rule("jump-docker-user")
	if !ok || jump.Chain != "DOCKER-USER" || jump.Position != "first" || jump.InInterface != DefaultBridge || jump.Target != DefaultChain {
		t.Errorf("jump %+v", jump)
	}
	in, ok := p.Rule("drop-input-bridge")
	if !ok || in.Chain != "INPUT" || in.Position != "first" || in.InInterface != DefaultBridge || in.Target != "DROP" {
		t.Errorf("input rule %+v", in)
	}
	for _, r := range p.Rules {
		if !strings.HasPrefix(r.Comment, DefaultCommentTag+" ") || r.Table != "filter" {
			t.Errorf("rule %s: table %s, comment %q", r.ID, r.Table, r.Comment)
		}
	}
}

// The control-plane indicators of the script the CLI prints read this host
// itself, with no override; only ScriptWithProbeRoot's test rendering reads
// a probe root, for every host path an indicator reads, and says so.
func TestOnlyTheTestRenderingReadsAProbeRoot(t *testing.T) {
	t.Parallel()
	p, err := New(overlayConfig())
	if err != nil {
		t.Fatal(err)
	}
	prod, err := p.Script()
	if err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{"PROBE_ROOT", "TEST RENDERING", "probe_root"} {
		if strings.Contains(string(prod), absent) {
			t.Errorf("the script the CLI prints contains %q", absent)
		}
	}
	const root = "/tmp/probe-root"
	test, err := p.ScriptWithProbeRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	s := string(test)
	for _, want := range []string{
		"\n# !!! TEST RENDERING (isolation.Plan.ScriptWithProbeRoot), NOT FOR ANY REAL HOST !!!\n",
		"\nreadonly PROBE_ROOT='" + root + "'\n",
		"\n\t\tp=$PROBE_ROOT$p\n", // config_files: the config dir and every -config
		"host=$(<\"$PROBE_ROOT\"/proc/sys/kernel/hostname) || return 2\n",
		"\ncontrol_plane_clear() {\n\tlocal id evidence rc present=0\n\tprobe_root_warning\n",
		"\nprobe_root_warning\npreconditions\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the test rendering lacks %q", want)
		}
	}
	// Outside comments, every /proc path is under the probe root, except the
	// agent's cwd that agent_config records (config_files prefixes it), and
	// uname -n is gone.
	for i, line := range strings.Split(s, "\n") {
		code := strings.TrimSpace(line)
		if strings.HasPrefix(code, "#") || code == `*) AGENT_CONFIGS+=("/proc/$1/cwd/$2") ;;` {
			continue
		}
		if strings.Contains(code, "uname") {
			t.Errorf("line %d of the test rendering reads uname: %s", i+1, code)
		}
		if n, under := strings.Count(code, "/proc/"), strings.Count(code, `"$PROBE_ROOT"/proc/`); n != under {
			t.Errorf("line %d of the test rendering reads /proc outside the probe root: %s", i+1, code)
		}
	}
	for _, bad := range []string{"", "/", "relative/dir", "/tmp/../etc", "/tmp/probe root", "/tmp/x/", "/tmp/$(id)"} {
		if _, err := p.ScriptWithProbeRoot(bad); err == nil {
			t.Errorf("probe root %q was accepted", bad)
		}
	}
}
