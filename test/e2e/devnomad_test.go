package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sandgate/test/testbin"
)

// `sandgate dev --nomad-agent` (make run-nomad) brings up a real local
// Nomad of its own, fits the bundle to it, runs a sandbox on it, and on
// Ctrl-C leaves nothing behind: no agent, no container, no mount, no
// directory.
func TestDevNomadAgentRunsASandboxAndCleansUp(t *testing.T) {
	need(t)
	data := filepath.Join(suite.dir, "dev-nomad")
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NOMAD_") {
			env = append(env, kv)
		}
	}
	d := testbin.StartDev(t, suite.gateway, testbin.Options{Data: data, Env: env, Wait: 4 * time.Minute,
		Args: []string{"--nomad-agent", suite.nomadBin, "--image", imageBusybox}})
	for _, want := range []string{"starting a local Nomad", `"allowed_architectures"`, `"` + imageBusybox + `"`} {
		if !strings.Contains(d.Banner, want) {
			t.Errorf("the start does not print %q:\n%s", want, d.Banner)
		}
	}
	if strings.Contains(d.Banner, "SIMULATED") {
		t.Fatalf("--nomad-agent ran on the simulator:\n%s", d.Banner)
	}
	g := &gw{t: t, url: d.URL, operator: d.Operator}
	ready := g.api(t).Do(http.MethodGet, "/readyz", "", nil).JSON(t)
	if ready["ready"] != true || ready["simulated"] != false {
		t.Fatalf("readyz on the local Nomad: %v", ready)
	}
	// The defaults of the fitted bundle: the local image, the local node.
	sb := g.create(t, d.Operator, map[string]any{"wait_seconds": 120})
	if sb.Body["image"] != imageBusybox || sb.Body["node"] != sharedNode {
		t.Errorf("the sandbox is not the local image on the local node: %v", sb.Body)
	}
	if out := g.sh(t, sb.ID, sb.Token, "echo hello from $(uname -s)"); out != "hello from Linux\n" {
		t.Errorf("exec in the local sandbox: %q", out)
	}
	cluster := filepath.Join(data, "nomad")
	agents := processesWith(t, cluster)
	if len(agents) < 2 {
		t.Fatalf("want the server and the client agent running below %s, found %v", cluster, agents)
	}

	if err := d.Stop(); err != nil {
		t.Errorf("Ctrl-C: the dev gateway exited with %v\n%s", err, d.Output())
	}
	if !strings.Contains(d.Output(), "stopping the local Nomad") {
		t.Errorf("the stop says nothing of the local Nomad:\n%s", d.Output())
	}
	if left := processesWith(t, cluster); len(left) > 0 {
		t.Errorf("agents left running: %v", left)
	}
	if _, err := os.Stat(cluster); !os.IsNotExist(err) {
		t.Errorf("%s is left behind (%v)", cluster, err)
	}
	if b, err := os.ReadFile("/proc/self/mounts"); err == nil && strings.Contains(string(b), cluster) {
		t.Errorf("mounts left below %s", cluster)
	}
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=com.hashicorp.nomad.alloc_id").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range strings.Fields(string(out)) {
		src, _ := exec.Command("docker", "inspect", "--format", "{{range .Mounts}}{{.Source}} {{end}}", id).Output() //nolint:gosec // G204: ids docker listed
		if strings.Contains(string(src), cluster) {
			t.Errorf("container %s of the local Nomad is left: %s", id, src)
		}
	}
}

// processesWith lists the command lines of running processes that name
// dir, as the local Nomad's agents name their config below it.
func processesWith(t *testing.T, dir string) []string {
	t.Helper()
	pids, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, p := range pids {
		b, err := os.ReadFile(p) //nolint:gosec // G304: /proc
		if err != nil {
			continue
		}
		if cmd := strings.ReplaceAll(string(b), "\x00", " "); strings.Contains(cmd, dir+"/") && strings.Contains(cmd, " agent ") {
			found = append(found, cmd)
		}
	}
	return found
}
