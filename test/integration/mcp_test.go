package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"sandgate/test/testbin"
)

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// An agent drives a sandbox over MCP with the SDK's own client, against
// the binary (on the simulator, and through test/e2e on the real agent):
// create, exec, a refusal with its rule id, destroy.
func TestAnAgentDrivesASandboxOverMCP(t *testing.T) {
	bin, data := testbin.Build(t), t.TempDir()
	agent := mintAgent(t, bin, data, "agent-mcp")
	g := startGateway(t, bin, data)
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "sandgate-integration", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: g.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{agent, http.DefaultTransport}}, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(name string, args map[string]any) (bool, map[string]any, string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || len(res.Content) != 1 {
			t.Fatalf("%s: %v %v", name, res, err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		var obj map[string]any
		_ = json.Unmarshal([]byte(text), &obj)
		return res.IsError, obj, text
	}
	args := map[string]any{"ttl_seconds": 600}
	isErr, sbx, text := call("create_sandbox", args)
	if isErr || sbx["state"] != "running" {
		t.Fatalf("create_sandbox: %s", text)
	}
	id := sbx["id"].(string)
	t.Cleanup(func() { g.call(t, http.MethodDelete, "/v1/sandboxes/"+id, g.operator, nil) })
	isErr, out, text := call("exec", map[string]any{"id": id, "argv": []string{"sh", "-c", "echo over-mcp"}})
	if isErr || out["exit_code"] != float64(0) || out["stdout"] != "over-mcp\n" {
		t.Fatalf("exec: %s", text)
	}
	t.Logf("MCP exec result: %s", text)
	isErr, out, text = call("exec", map[string]any{"id": id, "argv": []string{"true"}, "timeout_seconds": 900})
	if !isErr || out["code"] != "policy_denied" || len(out["rule_ids"].([]any)) != 1 || out["rule_ids"].([]any)[0] != "E2" {
		t.Fatalf("a timeout past the bound: %s", text)
	}
	if isErr, out, text = call("destroy_sandbox", map[string]any{"id": id}); isErr || out["status"] != float64(http.StatusNoContent) {
		t.Fatalf("destroy_sandbox: %s", text)
	}
}
