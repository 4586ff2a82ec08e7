package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sandgate/render/isolation"
)

// policyDirWith copies the bundle to a temporary directory and applies edit
// to its data.sandgate.config.
func policyDirWith(t *testing.T, edit func(cfg map[string]any)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "policies")
	if err := os.CopyFS(dir, os.DirFS("../../policies")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "data.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]map[string]map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	edit(data["sandgate"]["config"])
	raw, err = json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestIsolationRenderPrintsTheScriptOfTheDefaults(t *testing.T) {
	t.Parallel()
	code, out, stderr := runCLI(t, "", "isolation", "render")
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	_, want, err := isolation.Render(isolation.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Fatalf("the CLI printed another script than isolation.Render(DefaultConfig()):\n%s", out)
	}
}

func TestIsolationRenderPassesEveryFlagToTheScript(t *testing.T) {
	t.Parallel()
	code, out, stderr := runCLI(t, "", "isolation", "render",
		"--subnet", "172.30.9.0/24", "--overlay", "10.8.0.0/24", "--overlay", "100.70.0.0/16",
		"--nomad-ports", "14646,14647,14648", "--ssh-ports", "22,2222", "--resolver", "9.9.9.9",
		"--control-plane-name", "cp-1", "--control-plane-name", "cp-2", "--nomad-config-dir", "/opt/nomad/etc")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{
		"--subnet '172.30.9.0/24' --gateway '172.30.9.1'",
		"ensure_rule SANDGATE-ISOLATION append -d 10.8.0.0/24 ",
		"ensure_rule SANDGATE-ISOLATION append -d 100.70.0.0/16 ",
		"ensure_rule SANDGATE-ISOLATION append -p udp -m udp --dport 14648 ",
		"ensure_rule SANDGATE-ISOLATION append -p tcp -m tcp --dport 2222 ",
		"readonly SERVER_PORTS=(14647 14648)",
		"readonly CONTROL_PLANE_NAMES=('cp-1' 'cp-2')",
		"readonly NOMAD_CONFIG_DIR='/opt/nomad/etc'",
		"sandgate.resolvers=9.9.9.9",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the script lacks %q", want)
		}
	}
}

func TestIsolationRenderRefusesBadFlagsNamingThem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a subnet that is not a CIDR", []string{"--subnet", "172.31.250.0"}, `--subnet "172.31.250.0": not a CIDR`},
		{"a Nomad port out of range", []string{"--nomad-ports", "4646,4647,70000"}, `--nomad-ports "70000": port out of range`},
		{"a port that is not a number", []string{"--ssh-ports", "ssh"}, `--ssh-ports`},
		{"overlapping overlays", []string{"--overlay", "10.8.0.0/16", "--overlay", "10.8.1.0/24"}, `--overlay "10.8.1.0/24": overlaps 10.8.0.0/16`},
		{"a private resolver", []string{"--resolver", "10.0.0.2"}, `--resolver "10.0.0.2": inside 10.0.0.0/8`},
		{"a bridge other than the jobs' network", []string{"--bridge", "br-egress"}, `networks.egress.network_mode = "sandgate-egress"`},
		{"a relative Nomad config dir", []string{"--nomad-config-dir", "nomad.d"}, `--nomad-config-dir "nomad.d"`},
		{"an argument", []string{"extra"}, `unknown command "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, out, stderr := runCLI(t, "", append([]string{"isolation", "render"}, tc.args...)...)
			if code != exitError || out != "" || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stdout %d bytes, stderr %q; want exit 1, no stdout, %q", code, len(out), stderr, tc.want)
			}
		})
	}
}

// A bundle whose egress network is another name needs --bridge to match it,
// and the default is then refused.
func TestIsolationRenderFollowsTheBundlesEgressNetwork(t *testing.T) {
	t.Parallel()
	dir := policyDirWith(t, func(cfg map[string]any) {
		cfg["networks"].(map[string]any)["egress"].(map[string]any)["network_mode"] = "sg-egress-2"
	})
	if code, _, stderr := runCLI(t, "", "isolation", "render", "--policy-dir", dir); code != exitError ||
		!strings.Contains(stderr, `--bridge "sandgate-egress" is not the docker network the egress jobs use`) {
		t.Fatalf("default bridge against the bundle's sg-egress-2: exit %d %q", code, stderr)
	}
	code, out, stderr := runCLI(t, "", "isolation", "render", "--policy-dir", dir, "--bridge", "sg-egress-2")
	if code != exitOK || !strings.Contains(out, "readonly NETWORK='sg-egress-2'") {
		t.Fatalf("exit %d %q", code, stderr)
	}
}

// A deny prints the violations on stderr, nothing on stdout, and exits 3:
// here the bundle requires a range the renderer does not drop (I2).
func TestIsolationRenderPrintsNothingWhenThePolicyDenies(t *testing.T) {
	t.Parallel()
	dir := policyDirWith(t, func(cfg map[string]any) {
		iso := cfg["isolation"].(map[string]any)
		iso["required_drop_cidrs"] = append(iso["required_drop_cidrs"].([]any), "203.0.113.0/24")
	})
	code, out, stderr := runCLI(t, "", "isolation", "render", "--policy-dir", dir)
	if code != exitDenied || out != "" {
		t.Fatalf("exit %d, stdout %q; want 3 and nothing", code, out)
	}
	if !strings.Contains(stderr, "the isolation policy denied this plan") || !strings.Contains(stderr, "I2") ||
		!strings.Contains(stderr, "203.0.113.0/24") {
		t.Fatalf("stderr %q", stderr)
	}
}

// The control-plane names and meta of the policy data are checked by the
// script too (I4, P2), with the names given on the command line.
func TestIsolationRenderChecksThePolicysControlPlaneIndicators(t *testing.T) {
	t.Parallel()
	dir := policyDirWith(t, func(cfg map[string]any) {
		cp := cfg["placement"].(map[string]any)["control_plane"].(map[string]any)
		cp["node_names"] = []string{"nomad-server-9"}
		cp["meta"] = map[string]any{"role": []string{"nomad-server"}}
	})
	code, out, stderr := runCLI(t, "", "isolation", "render", "--policy-dir", dir, "--control-plane-name", "ctl-2", "--control-plane-name", "nomad-server-9")
	if code != exitOK {
		t.Fatalf("exit %d %q", code, stderr)
	}
	for _, want := range []string{"readonly CONTROL_PLANE_NAMES=('nomad-server-9' 'ctl-2')", "readonly CONTROL_PLANE_META=('role=nomad-server')"} {
		if !strings.Contains(out, want) {
			t.Errorf("the script lacks %s", want)
		}
	}
}

// --policy-input prints the decision's input; replayed it is allowed, and
// tampered (the DOCKER-USER jump appended instead of first) denied by I2.
func TestIsolationPolicyInputReplaysAsAllowedAndTamperedAsDenied(t *testing.T) {
	t.Parallel()
	code, doc, stderr := runCLI(t, "", "isolation", "render", "--overlay", "10.8.0.0/24", "--policy-input")
	if code != exitOK {
		t.Fatalf("exit %d %s", code, stderr)
	}
	if code, out, stderr := runCLI(t, doc, "policy", "eval", "--entrypoint", "isolation", "--input", "-"); code != exitOK {
		t.Fatalf("replay: exit %d\n%s%s", code, out, stderr)
	}
	var in struct {
		Plan isolation.Plan `json:"plan"`
	}
	if err := json.Unmarshal([]byte(doc), &in); err != nil {
		t.Fatal(err)
	}
	for i, r := range in.Plan.Rules {
		if r.Chain == "DOCKER-USER" {
			in.Plan.Rules[i].Position = "append"
		}
	}
	tampered, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI(t, string(tampered), "policy", "eval", "--entrypoint", "isolation", "--input", "-")
	var got evalOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if code != exitDenied || got.Allow || len(got.Violations) != 1 || got.Violations[0].Rule != "I2" {
		t.Fatalf("tampered: exit %d %+v", code, got)
	}
}

// The policy fixture of the default plan is what the CLI renders today, so
// the fixture tests judge the real plan.
func TestTheDefaultIsolationFixtureIsTheRenderedPlan(t *testing.T) {
	t.Parallel()
	code, doc, stderr := runCLI(t, "", "isolation", "render", "--policy-input")
	if code != exitOK {
		t.Fatalf("exit %d %s", code, stderr)
	}
	raw, err := os.ReadFile("../../test/testdata/policy/isolation-default-allowed.json")
	if err != nil {
		t.Fatal(err)
	}
	var fixture struct {
		Input any `json:"input"`
	}
	var rendered any
	if err := json.Unmarshal(raw, &fixture); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(doc), &rendered); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fixture.Input, rendered) {
		t.Fatalf("test/testdata/policy/isolation-default-allowed.json is stale; its input must be:\n%s", doc)
	}
}

// The resolvers the script lets through default to the egress jobs' own
// dns_servers (policy data), so the sandbox's DNS and the firewall agree.
func TestIsolationRenderTakesTheResolversOfTheEgressJobs(t *testing.T) {
	t.Parallel()
	dir := policyDirWith(t, func(cfg map[string]any) {
		cfg["networks"].(map[string]any)["egress"].(map[string]any)["dns_servers"] = []string{"8.8.8.8"}
	})
	code, out, stderr := runCLI(t, "", "isolation", "render", "--policy-dir", dir)
	if code != exitOK || !strings.Contains(out, "sandgate.resolvers=8.8.8.8") {
		t.Fatalf("exit %d %q; the script does not carry the bundle's resolvers", code, stderr)
	}
	code, out, _ = runCLI(t, "", "isolation", "render", "--policy-dir", dir, "--resolver", "9.9.9.9")
	if code != exitOK || !strings.Contains(out, "sandgate.resolvers=9.9.9.9") {
		t.Fatalf("--resolver does not override: exit %d", code)
	}
}
