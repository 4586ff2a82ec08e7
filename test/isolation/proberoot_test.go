package isolation

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sandgate/render/isolation"
)

// A test that applies the bundle in this host's own network namespace (the
// Docker test) cannot hide this host's listeners from the script: they are
// what /proc/net shows there. It uses the test rendering
// (Plan.ScriptWithProbeRoot) whose control-plane indicators read a fake
// host's facts, built here, instead of this host's.

// procNetHeader is the first line of /proc/net/tcp; udp's differs only in
// its trailing columns, which the script ignores.
const procNetHeader = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"

// procNetLine is a /proc/net/{tcp,udp} socket line for 127.0.0.1:port in
// state st (0A tcp LISTEN, 07 a bound udp socket).
func procNetLine(port int, st string) string {
	return fmt.Sprintf("   0: 0100007F:%04X 00000000:0000 %s 00000000:00000000 00:00000000 00000000     0        0 4711 1 0000000000000000 100 0 0 10 0\n", port, st)
}

// fakeHost is a probe root: a directory laid out like the paths the
// indicators read.
type fakeHost string

// newFakeWorker is a probe root holding an egress worker's facts: host
// name egress-worker-1, a running client agent (`nomad agent -config
// /etc/nomad.d`, pid 4242) whose config dir holds workerHCL, and one
// listener, on Nomad's HTTP port 4646 (which clients open too).
func newFakeWorker(t *testing.T) fakeHost {
	t.Helper()
	dir, err := os.MkdirTemp("", "sandgate-probe-root-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	h := fakeHost(dir)
	h.write(t, "proc/sys/kernel/hostname", "egress-worker-1\n")
	h.write(t, "proc/4242/cmdline", "/usr/bin/nomad\x00agent\x00-config\x00/etc/nomad.d\x00")
	h.write(t, "etc/nomad.d/client.hcl", workerHCL)
	h.write(t, "proc/net/tcp", procNetHeader+procNetLine(4646, "0A"))
	for _, f := range []string{"tcp6", "udp", "udp6"} {
		h.write(t, "proc/net/"+f, procNetHeader)
	}
	return h
}

// write writes file (a path relative to the root) with content.
func (h fakeHost) write(t *testing.T, file, content string) {
	t.Helper()
	path := filepath.Join(string(h), file)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// remove removes file (relative to the root).
func (h fakeHost) remove(t *testing.T, file string) {
	t.Helper()
	if err := os.Remove(filepath.Join(string(h), file)); err != nil {
		t.Fatal(err)
	}
}

// The probe-root rendering skips no indicator: each one reads the root and
// refuses on its fact there, an unreadable fact refuses too, and every run
// says that the host itself was not checked. The fake worker applies.
func TestTheProbeRootRenderingStillRefusesOnEveryIndicator(t *testing.T) {
	requireRootAndTools(t, "ip", "iptables", "iptables-save", "bash", "unshare")
	ns := newNetns(t, "sgr")
	iptIn(t, ns, "-N", "DOCKER-USER")
	serverHCL := "server {\n  enabled = true\n}\n"
	const warning = "TEST RENDERING: every control-plane indicator reads "

	for _, tc := range []struct {
		name      string
		edit      func(t *testing.T, h fakeHost, c *isolation.Config)
		indicator []string // the indicators the script must name; none: must apply
	}{
		{"the fake worker is no control plane", func(*testing.T, fakeHost, *isolation.Config) {}, nil},
		{"a server block in the root's config dir", func(t *testing.T, h fakeHost, _ *isolation.Config) {
			h.write(t, "etc/nomad.d/server.hcl", serverHCL)
		}, []string{"nomad_server_config"}},
		{"a server block in a running agent's relative -config", func(t *testing.T, h fakeHost, _ *isolation.Config) {
			h.write(t, "proc/4243/cmdline", "nomad\x00agent\x00-config=server.hcl\x00")
			h.write(t, "proc/4243/cwd/server.hcl", serverHCL)
		}, []string{"nomad_server_config"}},
		{"a running server agent in the root's proc", func(t *testing.T, h fakeHost, _ *isolation.Config) {
			h.write(t, "proc/4243/cmdline", "/opt/nomad\x00agent\x00-server\x00")
		}, []string{"nomad_server_process"}},
		{"a tcp listener on the RPC port in the root's proc/net/tcp6", func(t *testing.T, h fakeHost, _ *isolation.Config) {
			h.write(t, "proc/net/tcp6", procNetHeader+procNetLine(4647, "0A"))
		}, []string{"nomad_rpc_listener"}},
		{"a udp socket on the Serf port in the root's proc/net/udp", func(t *testing.T, h fakeHost, _ *isolation.Config) {
			h.write(t, "proc/net/udp", procNetHeader+procNetLine(4648, "07"))
		}, []string{"nomad_rpc_listener"}},
		{"no listener table in the root", func(t *testing.T, h fakeHost, _ *isolation.Config) {
			for _, f := range []string{"tcp", "tcp6", "udp", "udp6"} {
				h.remove(t, "proc/net/"+f)
			}
		}, []string{"nomad_rpc_listener"}},
		{"the root's host name on the control-plane list", func(_ *testing.T, _ fakeHost, c *isolation.Config) {
			c.ControlPlaneNames = []string{"egress-worker-1"}
		}, []string{"node_name_list"}},
		{"no host name in the root", func(t *testing.T, h fakeHost, _ *isolation.Config) {
			h.remove(t, "proc/sys/kernel/hostname")
		}, []string{"node_name_list"}},
		{"control-plane meta in a running agent's -meta", func(t *testing.T, h fakeHost, _ *isolation.Config) {
			h.write(t, "proc/4243/cmdline", "nomad\x00agent\x00-meta\x00sandgate.control_plane=true\x00")
		}, []string{"node_meta"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeWorker(t)
			cfg := isolation.DefaultConfig()
			tc.edit(t, h, &cfg)
			script := writeProbeRootScript(t, cfg, string(h))
			before := filterTable(t, ns)
			r := runScript(t, ns, script, "--apply", "--firewall-only")
			if !strings.Contains(r.stderr, warning+string(h)+", NOT this host") {
				t.Errorf("apply does not warn that the probes read %s:\n%s", h, r)
			}
			if len(tc.indicator) == 0 {
				for _, ind := range []string{"nomad_server_config", "nomad_server_process", "nomad_rpc_listener", "node_name_list", "node_meta"} {
					if !strings.Contains(r.stdout, "clear    control-plane indicator "+ind+"\n") {
						t.Errorf("indicator %s did not run clear on the fake worker:\n%s", ind, r)
					}
				}
				if r.code != 0 {
					t.Fatalf("apply on the fake worker: %s", r)
				}
				if r := runScript(t, ns, script, "--remove", "--firewall-only"); r.code != 0 || filterTable(t, ns) != before {
					t.Fatalf("remove: %s", r)
				}
				return
			}
			if r.code != 3 || strings.Contains(r.stdout, "added") || filterTable(t, ns) != before {
				t.Fatalf("apply on a fake control plane: %s, want exit 3 changing nothing", r)
			}
			for _, id := range tc.indicator {
				if !strings.Contains(r.stderr, "control-plane indicator "+id+": ") && !strings.Contains(r.stderr, "control-plane indicator "+id+" could not be checked") {
					t.Errorf("indicator %s not named:\n%s", id, r)
				}
			}
			t.Logf("refused: %s", strings.TrimSpace(r.stderr))
		})
	}
}
