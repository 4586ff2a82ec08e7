// Package integration drives the sandgate binary over real HTTP: `sandgate
// dev` on the built-in Nomad simulator by default, or on the real Nomad
// agent at NOMAD_ADDR when it is set (then SANDGATE_TEST_NODE names the
// worker to enroll, default the first ready client node, and
// SANDGATE_TEST_POLICY_DIR a bundle whose data allows that node's
// architecture and local images). The end-to-end suite (test/e2e) runs
// this package against its real agent, so the same tests run in both modes.
package integration

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"

	"sandgate/gateway/apitest"
	"sandgate/test/testbin"
)

// gatewayProc is a running `sandgate dev`.
type gatewayProc struct {
	url      string
	operator string
	real     bool // a real Nomad, not the simulator
	node     string
}

// mintAgent mints an agent token offline into data, before the gateway
// holds the store: the same key and store the gateway then uses.
func mintAgent(t *testing.T, bin, data, subject string) string {
	t.Helper()
	cmd := exec.Command(bin, "token", "mint", "--offline", "--role", "agent", "--subject", subject, "--ttl", "1h", "--data", data) //nolint:gosec // G204: the binary this test just built
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("token mint: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

func startGateway(t *testing.T, bin, data string) *gatewayProc {
	t.Helper()
	g := &gatewayProc{}
	var args []string
	if addr := os.Getenv("NOMAD_ADDR"); addr != "" {
		g.real = true
		g.node = os.Getenv("SANDGATE_TEST_NODE")
		if g.node == "" {
			g.node = firstReadyNode(t, addr)
		}
		args = append(args, "--enroll", g.node)
		t.Logf("running against the real Nomad at %s, node %s", addr, g.node)
	}
	if dir := os.Getenv("SANDGATE_TEST_POLICY_DIR"); dir != "" {
		args = append(args, "--policy-dir", dir)
	}
	d := testbin.StartDev(t, bin, testbin.Options{Data: data, Args: args})
	g.url, g.operator = d.URL, d.Operator
	if fi, err := os.Stat(filepath.Join(data, "operator.token")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("operator token file mode: %v %v", fi.Mode(), err)
	}
	if !g.real && !strings.Contains(d.Banner, "SIMULATED NOMAD CLUSTER") {
		t.Fatalf("the simulated start does not say so loudly:\n%s", d.Banner)
	}
	return g
}

func firstReadyNode(t *testing.T, addr string) string {
	t.Helper()
	c, err := api.NewClient(&api.Config{Address: addr, SecretID: os.Getenv("NOMAD_TOKEN")})
	if err != nil {
		t.Fatal(err)
	}
	nodes, _, err := c.Nodes().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Status == "ready" {
			return n.Name
		}
	}
	t.Skip("NOMAD_ADDR is set but the cluster has no ready client node")
	return ""
}

// api is the gateway's API as t speaks it.
func (g *gatewayProc) api(t *testing.T) *apitest.API { return &apitest.API{T: t, URL: g.url} }

// runningSandbox creates a sandbox with the agent's token (on the test
// node when the Nomad is real), requires it running, destroys it at the
// end of the test and returns its id and session token.
func (g *gatewayProc) runningSandbox(t *testing.T, agent string) (string, string) {
	t.Helper()
	body := map[string]any{"ttl_seconds": 600}
	if g.real {
		body["node"] = g.node
	}
	r := g.api(t).Do(http.MethodPost, "/v1/sandboxes", agent, body)
	sb := apitest.ExpectCreated(t, r)
	if sb.State != "running" {
		t.Fatalf("create: %s", r)
	}
	id, session := sb.IDToken()
	t.Cleanup(func() { g.api(t).Do(http.MethodDelete, "/v1/sandboxes/"+id, g.operator, nil) })
	return id, session
}

func TestTheAgentFlowOverHTTP(t *testing.T) {
	bin, data := testbin.Build(t), t.TempDir()
	agent := mintAgent(t, bin, data, "agent-it")
	g := startGateway(t, bin, data)
	if r := g.api(t).Do(http.MethodGet, "/readyz", "", nil); r.Status != http.StatusOK {
		t.Fatalf("readyz: %d %s", r.Status, r.Body)
	}
	caps := g.api(t).Do(http.MethodGet, "/v1/capabilities", "", nil).JSON(t)
	if !strings.Contains(string(mustJSON(caps["capabilities"])), "sandboxes.v1") {
		t.Fatalf("capabilities: %v", caps)
	}
	body := map[string]any{"ttl_seconds": 600}
	if g.real {
		body["node"] = g.node
	}
	r := g.api(t).Do(http.MethodPost, "/v1/sandboxes", agent, body)
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	sb := r.JSON(t)
	id, _ := sb["id"].(string)
	if id != "" {
		t.Cleanup(func() { g.api(t).Do(http.MethodDelete, "/v1/sandboxes/"+id, g.operator, nil) })
	}
	// A sandbox that does not run is a failure, on the simulator and on a
	// real agent alike (a skip here once hid that none could start).
	if sb["state"] != "running" {
		t.Fatalf("the sandbox does not run (node %s): state %v, last_error %v: %s", g.node, sb["state"], sb["last_error"], r.Body)
	}
	session, _ := sb["token"].(string)
	if id == "" || session == "" {
		t.Fatalf("a running sandbox without an id or session token: %s", r.Body)
	}
	r = g.api(t).Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": []string{"echo", "hi"}})
	if r.Status != http.StatusOK || r.JSON(t)["stdout"] != "hi\n" || r.JSON(t)["exit_code"] != float64(0) {
		t.Fatalf("exec: %d %s", r.Status, r.Body)
	}
	r = g.api(t).Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": []string{"sh", "-c", "exit 3"}})
	if r.Status != http.StatusOK || r.JSON(t)["exit_code"] != float64(3) {
		t.Fatalf("exec exit 3: %d %s", r.Status, r.Body)
	}
	// Binary stdin, an env entry and an output cap, as the wrapper runs them.
	r = g.api(t).Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{
		"argv": []string{"cat"}, "stdin_base64": "AAEC/w==", "env": map[string]string{"LANG": "C"}, "max_output_bytes": 2,
	})
	if m := r.JSON(t); r.Status != http.StatusOK || m["exit_code"] != float64(0) || m["stdout_bytes"] != float64(4) || m["stdout_truncated"] != true {
		t.Fatalf("exec with binary stdin and a 2-byte cap: %d %s", r.Status, r.Body)
	}
	r = g.api(t).Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": []string{"env"}, "env": map[string]string{"NOMAD_TOKEN": "x"}})
	if r.Status != http.StatusForbidden || !strings.Contains(string(r.Body), `"rule_ids":["E1"]`) {
		t.Fatalf("a reserved env name: %d %s", r.Status, r.Body)
	}
	if r = g.api(t).Do(http.MethodGet, "/v1/sandboxes/"+id+"/logs?tail_bytes=1024", session, nil); r.Status != http.StatusOK {
		t.Fatalf("logs: %d %s", r.Status, r.Body)
	}
	if r = g.api(t).Do(http.MethodGet, "/v1/sandboxes", session, nil); r.Status != http.StatusForbidden {
		t.Fatalf("session list: %d %s", r.Status, r.Body)
	}
	// the agent sees its sandbox; it may not extend it (operators only, L2)
	if r = g.api(t).Do(http.MethodGet, "/v1/sandboxes", agent, nil); r.Status != http.StatusOK || !bytes.Contains(r.Body, []byte(id)) {
		t.Fatalf("agent list: %d %s", r.Status, r.Body)
	}
	if r = g.api(t).Do(http.MethodPost, "/v1/sandboxes/"+id+"/extend", agent, map[string]any{"ttl_seconds": 900}); r.Status != http.StatusForbidden {
		t.Fatalf("agent extend: %d %s", r.Status, r.Body)
	}
	// an operator's sandbox is not the agent's, nor the session's
	r = g.api(t).Do(http.MethodPost, "/v1/sandboxes", g.operator, body)
	if r.Status != http.StatusCreated {
		t.Fatalf("operator create: %d %s", r.Status, r.Body)
	}
	other, _ := r.JSON(t)["id"].(string)
	t.Cleanup(func() { g.api(t).Do(http.MethodDelete, "/v1/sandboxes/"+other, g.operator, nil) })
	for _, tok := range []string{agent, session} {
		if r = g.api(t).Do(http.MethodGet, "/v1/sandboxes/"+other, tok, nil); r.Status != http.StatusForbidden {
			t.Fatalf("another principal's sandbox: %d %s", r.Status, r.Body)
		}
	}
	if r = g.api(t).Do(http.MethodPost, "/v1/sandboxes/"+id+"/extend", g.operator, map[string]any{"ttl_seconds": 900}); r.Status != http.StatusOK {
		t.Fatalf("extend: %d %s", r.Status, r.Body)
	}
	if r = g.api(t).Do(http.MethodDelete, "/v1/sandboxes/"+id, session, nil); r.Status != http.StatusNoContent {
		t.Fatalf("destroy: %d %s", r.Status, r.Body)
	}
	if r = g.api(t).Do(http.MethodGet, "/v1/sandboxes/"+id, session, nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("session token after destroy: %d %s", r.Status, r.Body)
	}
	r = g.api(t).Do(http.MethodGet, "/v1/sandboxes/"+id, g.operator, nil)
	if r.JSON(t)["state"] != "ended" {
		t.Fatalf("after destroy: %s", r.Body)
	}
	m := g.api(t).Do(http.MethodGet, "/metrics", "", nil)
	for _, series := range []string{"sandgate_policy_decisions_total", "sandgate_http_request_duration_seconds", "sandgate_nomad_request_duration_seconds", "sandgate_sandboxes"} {
		if !bytes.Contains(m.Body, []byte(series)) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }
