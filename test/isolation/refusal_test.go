package isolation

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sandgate/render/isolation"
)

// configDir writes one Nomad configuration file into a new directory.
func configDir(t *testing.T, file, content string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// fakeAgent runs this test binary under the name nomad with args, in
// directory dir, in the pid namespace host, standing in for a Nomad agent
// process there until the test ends.
func fakeAgent(t *testing.T, host *pidNS, dir string, args ...string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "nomad")
	if err := os.Symlink(self, link); err != nil {
		t.Fatal(err)
	}
	host.start(t, dir, []string{fakeNomadEnv + "=1"}, append([]string{link}, args...)...)
}

// On a host that shows any control-plane indicator, --apply exits 3 and
// changes nothing, and --verify fails; a worker's configuration is accepted.
// Each case is a host of its own: a pid namespace (with its own /proc)
// inside the test's netns, so that the script sees the case's processes
// and listeners and none of this host's (see pidNS); it is the script
// `sandgate isolation render` prints, reading /proc as on a real host.
func TestApplyRefusesOnAControlPlane(t *testing.T) {
	requireRootAndTools(t, "ip", "iptables", "iptables-save", "bash", "unshare", "nsenter")
	ns := newNetns(t, "sgc")
	iptIn(t, ns, "-N", "DOCKER-USER")
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	serverHCL := "server {\n  enabled          = true\n  bootstrap_expect = 3\n}\n"

	for _, tc := range []struct {
		name      string
		edit      func(t *testing.T, c *isolation.Config, host *pidNS)
		indicator []string // every indicator the script must name; none: must apply
	}{
		{"a worker's configuration is no control plane", func(t *testing.T, c *isolation.Config, _ *pidNS) {
			c.NomadConfigDir = workerConfigDir(t)
			c.ControlPlaneNames = []string{"nomad-server-1"}
		}, nil},
		{"a server block in the config dir", func(t *testing.T, c *isolation.Config, _ *pidNS) {
			c.NomadConfigDir = configDir(t, "server.hcl", serverHCL)
		}, []string{"nomad_server_config"}},
		{"a server block in JSON", func(t *testing.T, c *isolation.Config, _ *pidNS) {
			c.NomadConfigDir = configDir(t, "nomad.json", `{"datacenter": "dc1", "server": {"enabled": true}}`)
		}, []string{"nomad_server_config"}},
		{"control-plane meta in the client config", func(t *testing.T, c *isolation.Config, _ *pidNS) {
			c.NomadConfigDir = configDir(t, "client.hcl", "client {\n  enabled = true\n  meta {\n    \"node-role\" = \"server\"\n  }\n}\n")
		}, []string{"node_meta"}},
		{"this host's name on the control-plane list", func(t *testing.T, c *isolation.Config, _ *pidNS) {
			c.NomadConfigDir = t.TempDir()
			c.ControlPlaneNames = []string{"nomad-server-1", hostname}
		}, []string{"node_name_list"}},
		{"the Nomad name on the control-plane list", func(t *testing.T, c *isolation.Config, _ *pidNS) {
			c.NomadConfigDir = configDir(t, "base.hcl", "name = \"nomad-server-1\"\n")
			c.ControlPlaneNames = []string{"nomad-server-1"}
		}, []string{"node_name_list"}},
		{"a listener on Nomad's RPC port", func(t *testing.T, c *isolation.Config, _ *pidNS) {
			c.NomadConfigDir = t.TempDir()
			var ln net.Listener
			if err := inNetns(ns, func() (err error) { ln, err = net.Listen("tcp", "127.0.0.1:4647"); return err }); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ln.Close() })
		}, []string{"nomad_rpc_listener"}},
		{"a running server agent", func(t *testing.T, c *isolation.Config, host *pidNS) {
			c.NomadConfigDir = t.TempDir()
			fakeAgent(t, host, "/", "agent", "-server", "-data-dir=/nonexistent")
		}, []string{"nomad_server_process"}},
		{"a running agent whose -config holds a server block and whose -meta marks a control plane", func(t *testing.T, c *isolation.Config, host *pidNS) {
			c.NomadConfigDir = t.TempDir()
			fakeAgent(t, host, "/", "agent", "-config="+configDir(t, "server.hcl", serverHCL), "-meta", "node-role=control-plane")
		}, []string{"nomad_server_config", "node_meta"}},
		{"a running agent whose relative -config holds a server block", func(t *testing.T, c *isolation.Config, host *pidNS) {
			c.NomadConfigDir = t.TempDir()
			fakeAgent(t, host, configDir(t, "server.hcl", serverHCL), "agent", "-config", "server.hcl")
		}, []string{"nomad_server_config"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := newPidNS(t, ns)
			cfg := isolation.DefaultConfig()
			tc.edit(t, &cfg, host)
			script := writeScript(t, cfg)
			before := filterTable(t, ns)
			r := host.runScript(t, script, "--apply", "--firewall-only")
			if len(tc.indicator) == 0 {
				if r.code != 0 {
					t.Fatalf("apply on a worker: %s", r)
				}
				if r := host.runScript(t, script, "--remove", "--firewall-only"); r.code != 0 || filterTable(t, ns) != before {
					t.Fatalf("remove: %s", r)
				}
				return
			}
			if r.code != 3 || strings.Contains(r.stdout, "added") {
				t.Fatalf("apply on a control plane: %s, want exit 3 adding nothing", r)
			}
			if after := filterTable(t, ns); after != before {
				t.Fatalf("a refused apply changed the filter table:\n%s", after)
			}
			v := host.runScript(t, script, "--verify", "--firewall-only")
			for _, id := range tc.indicator {
				if !strings.Contains(r.stderr, "control-plane indicator "+id+": ") || !strings.Contains(v.stderr, "control-plane indicator "+id+": ") {
					t.Errorf("indicator %s not named:\napply %s\nverify %s", id, r, v)
				}
			}
			if v.code != 1 {
				t.Errorf("verify on a control plane: %s, want exit 1", v)
			}
			t.Logf("refused: %s", strings.TrimSpace(r.stderr))
		})
	}
}

// The script's own usage errors.
func TestTheScriptRefusesBadUsage(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	script := writeScript(t, isolation.DefaultConfig())
	for _, tc := range []struct {
		args []string
		code int
	}{
		{nil, 2}, {[]string{"--apply", "--remove"}, 2}, {[]string{"--appyl"}, 2}, {[]string{"--help"}, 0},
	} {
		if r := runScript(t, "", script, tc.args...); r.code != tc.code || (tc.code == 0) != strings.Contains(r.stdout, "usage:") {
			t.Errorf("%v: %s, want exit %d", tc.args, r, tc.code)
		}
	}
}
