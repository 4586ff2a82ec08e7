package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"sandgate/gateway/token"
)

// bearer adds the caller's token to every request of an MCP client.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// mcpSession connects the SDK's own client to the gateway's /mcp with tok.
func mcpSession(t *testing.T, h *harness, tok string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "sandgate-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:   h.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: tok, next: http.DefaultTransport}},
		MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatalf("MCP connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// callTool calls a tool and returns its result and the JSON object it holds.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d content items", name, len(res.Content))
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("%s: content %T", name, res.Content[0])
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(text.Text), &obj); err != nil {
		t.Fatalf("%s: not a JSON answer: %s", name, text.Text)
	}
	return res, obj
}

func ruleIDs(obj map[string]any) []string {
	var ids []string
	for _, v := range asSlice(obj["rule_ids"]) {
		ids = append(ids, v.(string))
	}
	return ids
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

// MCP authenticates with the gateway's bearer token, and every tool call
// is the REST route's own policy decision: an agent creates, a session
// token execs in its own sandbox and is refused another one and create,
// with the rule ids.
func TestMCPToolsAreTheRESTRoutesUnderTheSameToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})

	// No token, or a forged one: no MCP session at all.
	for _, auth := range []string{"", "Bearer not-a-token"} {
		req, _ := http.NewRequest(http.MethodPost, h.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("/mcp with %q: %d, want 401", auth, resp.StatusCode)
		}
	}

	agent := mcpSession(t, h, h.mint(token.RoleAgent, "mcp-agent"))
	list, err := agent.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if strings.Join(names, " ") != "create_sandbox destroy_sandbox exec logs sandbox_status" {
		t.Fatalf("tools: %v", names)
	}
	res, sbx := callTool(t, agent, "create_sandbox", map[string]any{"labels": map[string]string{"via": "mcp"}})
	if res.IsError || sbx["state"] != "running" || sbx["principal"] != "agent:mcp-agent" {
		t.Fatalf("create_sandbox: %v", sbx)
	}
	id, session := sbx["id"].(string), sbx["token"].(string)
	_, other := callTool(t, agent, "create_sandbox", nil)
	otherID := other["id"].(string)

	s := mcpSession(t, h, session)
	res, out := callTool(t, s, "exec", map[string]any{"id": id, "argv": []string{"echo", "hi"}})
	if res.IsError || out["exit_code"] != float64(0) || out["stdout"] != "hi\n" {
		t.Fatalf("exec in its own sandbox: %v", out)
	}
	t.Logf("an MCP exec result: %s", res.Content[0].(*mcp.TextContent).Text)
	res, out = callTool(t, s, "exec", map[string]any{"id": id, "argv": []string{"yes"}, "max_output_bytes": 16})
	if res.IsError || out["stdout_truncated"] != true || len(out["stdout"].(string)) != 16 {
		t.Fatalf("a bounded exec says it was cut: %v", out)
	}
	res, out = callTool(t, s, "exec", map[string]any{"id": otherID, "argv": []string{"echo", "hi"}})
	if !res.IsError || out["code"] != "policy_denied" || !slices.Contains(ruleIDs(out), "T2") {
		t.Fatalf("exec in another sandbox: %v", out)
	}
	t.Logf("an MCP refusal: %s", res.Content[0].(*mcp.TextContent).Text)
	res, out = callTool(t, s, "create_sandbox", nil)
	if !res.IsError || !slices.Contains(ruleIDs(out), "T2") {
		t.Fatalf("a session token's create: %v", out)
	}
	res, out = callTool(t, s, "exec", map[string]any{"id": id, "argv": []string{"-rf"}})
	if !res.IsError || !slices.Contains(ruleIDs(out), "E1") {
		t.Fatalf("an option as the program: %v", out)
	}
	res, out = callTool(t, s, "sandbox_status", map[string]any{"id": id})
	if res.IsError || out["id"] != id {
		t.Fatalf("sandbox_status: %v", out)
	}
	logs, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "logs", Arguments: map[string]any{"id": id, "tail_bytes": 1024}})
	if err != nil || logs.IsError || len(logs.Content) != 1 {
		t.Fatalf("logs: %v %v", logs, err)
	}
	// An id that is a path is judged as the id it is (H9), never followed.
	res, out = callTool(t, s, "sandbox_status", map[string]any{"id": "../tokens"})
	if !res.IsError || out["status"] == float64(http.StatusOK) {
		t.Fatalf("a path as the id: %v", out)
	}
	if res, out = callTool(t, s, "destroy_sandbox", map[string]any{"id": id}); res.IsError || out["status"] != float64(http.StatusNoContent) {
		t.Fatalf("destroy_sandbox: %v", out)
	}
	// The session token ended with its sandbox: the MCP session still
	// verifies its signature, and the REST route refuses every call.
	if res, out = callTool(t, s, "sandbox_status", map[string]any{"id": id}); !res.IsError || out["status"] != float64(http.StatusUnauthorized) {
		t.Fatalf("after destroy: %v", out)
	}
	// The calls are decisions of the log like any REST request's.
	got := h.do(http.MethodGet, "/v1/decisions?principal=agent:mcp-agent&entrypoint=admission", h.operator, nil).json(t)
	if ds := asSlice(got["decisions"]); len(ds) != 2 {
		t.Fatalf("the two creates' admission decisions: %v", got)
	}
}
