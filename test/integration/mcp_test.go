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
// create, exec, a refusal with its rule id, files written, read and
// listed with the session token (and refused on another sandbox), destroy.
func TestAnAgentDrivesASandboxOverMCP(t *testing.T) {
	bin, data := testbin.Build(t), t.TempDir()
	agent := mintAgent(t, bin, data, "agent-mcp")
	g := startGateway(t, bin, data)
	call := mcpCaller(t, g.url, agent)
	args := map[string]any{"ttl_seconds": 600}
	isErr, sbx, text := call("create_sandbox", args)
	if isErr || sbx["state"] != "running" {
		t.Fatalf("create_sandbox: %s", text)
	}
	id := sbx["id"].(string)
	t.Cleanup(func() { g.api(t).Do(http.MethodDelete, "/v1/sandboxes/"+id, g.operator, nil) })
	isErr, out, text := call("exec", map[string]any{"id": id, "argv": []string{"sh", "-c", "echo over-mcp"}})
	if isErr || out["exit_code"] != float64(0) || out["stdout"] != "over-mcp\n" {
		t.Fatalf("exec: %s", text)
	}
	t.Logf("MCP exec result: %s", text)
	isErr, out, text = call("exec", map[string]any{"id": id, "argv": []string{"true"}, "timeout_seconds": 900})
	if !isErr || out["code"] != "policy_denied" || len(out["rule_ids"].([]any)) != 1 || out["rule_ids"].([]any)[0] != "E2" {
		t.Fatalf("a timeout past the bound: %s", text)
	}

	// The session token's own MCP session writes, reads and lists files in
	// its sandbox, and is refused another sandbox (T2).
	isErr, other, text := call("create_sandbox", args)
	if isErr {
		t.Fatalf("create_sandbox: %s", text)
	}
	otherID := other["id"].(string)
	t.Cleanup(func() { g.api(t).Do(http.MethodDelete, "/v1/sandboxes/"+otherID, g.operator, nil) })
	callAs := mcpCaller(t, g.url, sbx["token"].(string))
	if isErr, out, text = callAs("write_file", map[string]any{"id": id, "path": "/workspace/mcp/note.txt", "content": "written over MCP\n", "mode": "0640"}); isErr || out["size"] != float64(17) || out["mode"] != "0640" {
		t.Fatalf("write_file: %s", text)
	}
	if isErr, out, text = callAs("read_file", map[string]any{"id": id, "path": "/workspace/mcp/note.txt"}); isErr || out["content"] != "written over MCP\n" || out["encoding"] != "utf-8" || out["truncated"] != false {
		t.Fatalf("read_file: %s", text)
	}
	t.Logf("MCP read_file result: %s", text)
	if isErr, out, text = callAs("list_files", map[string]any{"id": id, "path": "/workspace/mcp"}); isErr || out["total"] != float64(1) ||
		out["entries"].([]any)[0].(map[string]any)["name"] != "note.txt" {
		t.Fatalf("list_files: %s", text)
	}
	for _, tool := range []string{"read_file", "write_file", "list_files"} {
		args := map[string]any{"id": otherID, "path": "/workspace/mcp/note.txt"}
		if tool == "write_file" {
			args["content"] = "x"
		}
		isErr, out, text = callAs(tool, args)
		if !isErr || out["code"] != "policy_denied" || len(out["rule_ids"].([]any)) != 1 || out["rule_ids"].([]any)[0] != "T2" {
			t.Fatalf("%s in another sandbox: %s", tool, text)
		}
	}
	if isErr, out, text = call("destroy_sandbox", map[string]any{"id": id}); isErr || out["status"] != float64(http.StatusNoContent) {
		t.Fatalf("destroy_sandbox: %s", text)
	}
}

// mcpCaller connects the SDK's client to url's /mcp with tok (closed at the
// end of the test) and returns a call: whether the tool's result is an
// error, the JSON object its text holds, and the text.
func mcpCaller(t *testing.T, url, tok string) func(name string, args map[string]any) (bool, map[string]any, string) {
	t.Helper()
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "sandgate-integration", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: bearer{tok, http.DefaultTransport}}, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return func(name string, args map[string]any) (bool, map[string]any, string) {
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
}
