package gateway_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
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
	if strings.Join(names, " ") != "create_sandbox destroy_sandbox exec list_files logs read_file sandbox_status write_file" {
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
	// A session token is not offered create_sandbox (T2 would refuse it
	// every time): the call names the unknown tool.
	if _, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_sandbox"}); err == nil || !strings.Contains(err.Error(), `unknown tool "create_sandbox"`) {
		t.Fatalf("a session token's create: %v", err)
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
	// The session token ended with its sandbox: /mcp itself refuses it
	// now (401), so the call fails in the transport, not as a tool result.
	if _, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "sandbox_status", Arguments: map[string]any{"id": id}}); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("after destroy: %v", err)
	}
	// The calls are decisions of the log like any REST request's.
	got := h.gw.Do(http.MethodGet, "/v1/decisions?principal=agent:mcp-agent&entrypoint=admission", h.operator, nil).JSON(t)
	if ds := asSlice(got["decisions"]); len(ds) != 2 {
		t.Fatalf("the two creates' admission decisions: %v", got)
	}
}

// The file tools are the files route under the caller's token: a session
// token writes, reads and lists in its own sandbox, and is refused another
// one (T2), a path outside the roots (F1) and a mode beyond 0777 (F2).
// read_file returns text or base64, a bounded window with the offset that
// reads on.
func TestMCPFileToolsWriteReadAndList(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id, session := h.gw.Create(h.operator, nil).IDToken()
	otherID := h.gw.Create(h.operator, nil).ID
	s := mcpSession(t, h, session)

	res, out := callTool(t, s, "write_file", map[string]any{"id": id, "path": "/workspace/notes/hello.txt", "content": "héllo\n"})
	if res.IsError || out["path"] != "/workspace/notes/hello.txt" || out["size"] != float64(7) || out["mode"] != "0644" || out["type"] != "file" {
		t.Fatalf("write_file: %v", out)
	}
	t.Logf("an MCP write_file result: %s", res.Content[0].(*mcp.TextContent).Text)
	res, out = callTool(t, s, "read_file", map[string]any{"id": id, "path": "/workspace/notes/hello.txt"})
	if res.IsError || out["encoding"] != "utf-8" || out["content"] != "héllo\n" || out["truncated"] != false || out["size"] != float64(7) || out["next_offset"] != nil {
		t.Fatalf("read_file: %v", out)
	}
	t.Logf("an MCP read_file result: %s", res.Content[0].(*mcp.TextContent).Text)

	// Bytes that are not text go both ways as base64, with a mode.
	bin := base64.StdEncoding.EncodeToString([]byte("\x00\x01\xfe\xffbin"))
	if res, out = callTool(t, s, "write_file", map[string]any{"id": id, "path": "/tmp/b.bin", "content": bin, "encoding": "base64", "mode": "0755"}); res.IsError || out["mode"] != "0755" || out["size"] != float64(7) {
		t.Fatalf("write_file base64: %v", out)
	}
	if res, out = callTool(t, s, "read_file", map[string]any{"id": id, "path": "/tmp/b.bin"}); res.IsError || out["encoding"] != "base64" || out["content"] != bin || out["mode"] != "0755" {
		t.Fatalf("read_file of binary: %v", out)
	}

	// A window: max_bytes cuts before a character, never inside it, and
	// next_offset reads on.
	res, out = callTool(t, s, "read_file", map[string]any{"id": id, "path": "/workspace/notes/hello.txt", "max_bytes": 2})
	if res.IsError || out["content"] != "h" || out["returned_bytes"] != float64(1) || out["truncated"] != true || out["next_offset"] != float64(1) ||
		!strings.Contains(out["note"].(string), "Call read_file again with offset 1") {
		t.Fatalf("read_file of 2 bytes: %v", out)
	}
	t.Logf("an MCP read_file result that was cut: %s", res.Content[0].(*mcp.TextContent).Text)
	res, out = callTool(t, s, "read_file", map[string]any{"id": id, "path": "/workspace/notes/hello.txt", "offset": 1, "max_bytes": 100})
	if res.IsError || out["content"] != "éllo\n" || out["truncated"] != false || out["offset"] != float64(1) {
		t.Fatalf("read_file from offset 1: %v", out)
	}
	// More than one result carries: lowered to MaxReadBytes, and said.
	big := bytes.Repeat([]byte("0123456789abcdef"), 40<<10) // 640 KiB
	if r := h.gw.Do(http.MethodPut, filesPath(id, "/workspace/big.txt"), session, big); r.Status != http.StatusOK {
		t.Fatalf("put: %d %s", r.Status, r.Body)
	}
	res, out = callTool(t, s, "read_file", map[string]any{"id": id, "path": "/workspace/big.txt", "max_bytes": 4 << 20})
	if res.IsError || out["returned_bytes"] != float64(512<<10) || out["truncated"] != true || out["size"] != float64(len(big)) ||
		!strings.HasPrefix(out["note"].(string), "max_bytes was lowered to 524288, the most one read_file result carries; the file is 655360 bytes") {
		t.Fatalf("read_file past the ceiling: %v", out["note"])
	}

	res, out = callTool(t, s, "list_files", map[string]any{"id": id, "path": "/workspace"})
	if res.IsError || out["total"] != float64(2) || out["truncated"] != false || len(asSlice(out["entries"])) != 2 {
		t.Fatalf("list_files: %v", out)
	}
	t.Logf("an MCP list_files result: %s", res.Content[0].(*mcp.TextContent).Text)

	// A directory is not read, a file is not listed.
	if res, out = callTool(t, s, "read_file", map[string]any{"id": id, "path": "/workspace/notes"}); !res.IsError || out["code"] != "is_a_directory" {
		t.Fatalf("read_file of a directory: %v", out)
	}
	if res, out = callTool(t, s, "list_files", map[string]any{"id": id, "path": "/workspace/big.txt"}); !res.IsError || out["code"] != "not_a_directory" ||
		!strings.Contains(out["detail"].(string), "655360 bytes") {
		t.Fatalf("list_files of a file: %v", out)
	}

	for _, c := range []struct {
		tool string
		args map[string]any
		rule string
	}{
		{"read_file", map[string]any{"id": otherID, "path": "/workspace/notes/hello.txt"}, "T2"},
		{"write_file", map[string]any{"id": otherID, "path": "/workspace/x", "content": "x"}, "T2"},
		{"list_files", map[string]any{"id": otherID, "path": "/workspace"}, "T2"},
		{"read_file", map[string]any{"id": id, "path": "/etc/passwd"}, "F1"},
		{"write_file", map[string]any{"id": id, "path": "/workspace/../etc/x", "content": "x"}, "F1"},
		{"list_files", map[string]any{"id": id, "path": "/"}, "F1"},
		{"write_file", map[string]any{"id": id, "path": "/workspace/x", "content": "x", "mode": "4755"}, "F2"},
	} {
		res, out := callTool(t, s, c.tool, c.args)
		if !res.IsError || out["code"] != "policy_denied" || !slices.Equal(ruleIDs(out), []string{c.rule}) {
			t.Errorf("%s %v: %v", c.tool, c.args, out)
		}
	}
	if res, out = callTool(t, s, "write_file", map[string]any{"id": id, "path": "/workspace/x", "content": "x", "encoding": "utf-16"}); !res.IsError || out["field"] != "encoding" {
		t.Fatalf("an unknown encoding: %v", out)
	}
	if res, out = callTool(t, s, "write_file", map[string]any{"id": id, "path": "/workspace/x", "content": "not base64!", "encoding": "base64"}); !res.IsError || out["field"] != "content" {
		t.Fatalf("bad base64: %v", out)
	}
	if res, out = callTool(t, s, "read_file", map[string]any{"id": id, "path": "/workspace/missing"}); !res.IsError || out["code"] != "file_not_found" {
		t.Fatalf("a missing file: %v", out)
	}
}

// A revoked token, and the session token of a destroyed sandbox, open no
// MCP session: they are refused at /mcp with the 401 every route gives
// them, not let in to fail on every tool call.
func TestMCPRefusesARevokedTokenAtTheDoor(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	agent := h.mint(token.RoleAgent, "mcp-revoked")
	id, session := h.gw.Create(agent, nil).IDToken()
	_ = mcpSession(t, h, agent) // active: the session opens
	jti := ""
	for _, tok := range h.gw.Do(http.MethodGet, "/v1/tokens", h.operator, nil).JSON(t)["tokens"].([]any) {
		if m := tok.(map[string]any); m["subject"] == "mcp-revoked" {
			jti, _ = m["id"].(string)
		}
	}
	if r := h.gw.Do(http.MethodDelete, "/v1/tokens/"+jti, h.operator, nil); r.Status != http.StatusNoContent {
		t.Fatalf("revoke %q: %d %s", jti, r.Status, r.Body)
	}
	if r := h.gw.Do(http.MethodDelete, "/v1/sandboxes/"+id, h.operator, nil); r.Status != http.StatusNoContent {
		t.Fatalf("destroy: %d %s", r.Status, r.Body)
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for name, tok := range map[string]string{"a revoked agent token": agent, "the session token of a destroyed sandbox": session} {
		req, _ := http.NewRequest(http.MethodPost, h.url+"/mcp", strings.NewReader(initialize))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "revoked") || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s %s", name, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
}
