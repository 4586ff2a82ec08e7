package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"sandgate/gateway/apitest"
	"sandgate/gateway/mcpserver"
	"sandgate/gateway/token"
)

// mcpPost sends one JSON-RPC message to /mcp with the Authorization value
// auth as it is ("" sends none) and returns the raw answer.
func mcpPost(t *testing.T, h *harness, auth, message string) apitest.Reply {
	t.Helper()
	return h.gw.DoWith(apitest.Request{Method: http.MethodPost, Path: "/mcp", Auth: auth, Body: message,
		Header: map[string]string{"Accept": "application/json, text/event-stream"}})
}

const (
	mcpInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	mcpToolsList  = `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`
)

// bearerSpellings are Authorization values built around a token, and
// whether the gateway takes them. The scheme is case-insensitive (RFC
// 9110 section 11.1); everything else but "Bearer", one space and the
// token is refused. White space around the whole value is not part of it
// over HTTP (net/http strips it, RFC 9110 section 5.5): token.ParseBearer's
// own tests refuse it where it is seen.
func bearerSpellings(tok string) []struct {
	name, value string
	ok          bool
} {
	return []struct {
		name, value string
		ok          bool
	}{
		{"Bearer, one space, the token", "Bearer " + tok, true},
		{"bearer in lower case", "bearer " + tok, true},
		{"BEARER in upper case", "BEARER " + tok, true},
		{"a tab after Bearer", "Bearer\t" + tok, false},
		{"a no-break space after Bearer", "Bearer\u00a0" + tok, false},
		{"two spaces after Bearer", "Bearer  " + tok, false},
		{"a tab and a space after Bearer", "Bearer\t " + tok, false},
		{"no token", "Bearer ", false},
		{"Bearer alone", "Bearer", false},
		{"the token without the scheme", tok, false},
		{"a second word after the token", "Bearer " + tok + " x", false},
		{"a no-break space after the token", "Bearer " + tok + "\u00a0", false},
		{"another scheme", "Token " + tok, false},
	}
}

// One parser reads the bearer token of REST and of /mcp: each spelling is
// taken by both or refused by both, with the same 401 problem document
// and Bearer challenge.
func TestRESTAndMCPTakeTheSameBearerSpellingsOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	agent := h.mint(token.RoleAgent, "spellings")
	for _, tc := range bearerSpellings(agent) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rest := h.gw.DoWith(apitest.Request{Method: http.MethodGet, Path: "/v1/sandboxes", Auth: tc.value})
			mcpInit := mcpPost(t, h, tc.value, mcpInitialize)
			mcpList := mcpPost(t, h, tc.value, mcpToolsList)
			if tc.ok {
				for what, r := range map[string]apitest.Reply{"REST": rest, "/mcp initialize": mcpInit, "/mcp tools/list": mcpList} {
					if r.Status != http.StatusOK {
						t.Errorf("%s: %d %s, want 200", what, r.Status, r.Body)
					}
				}
				return
			}
			checkRefusedUnauthenticated(t, "REST", rest)
			checkRefusedUnauthenticated(t, "/mcp initialize", mcpInit)
			checkRefusedUnauthenticated(t, "/mcp tools/list", mcpList)
			if p := apitest.ExpectProblem(t, mcpInit, http.StatusUnauthorized, "unauthenticated"); !strings.Contains(p["detail"].(string), "one space") {
				t.Errorf("the refusal does not say the rule: %v", p["detail"])
			}
		})
	}
}

// A revoked agent token opens no MCP session in any spelling: before, a
// tab or a no-break space after Bearer slipped past /mcp's revocation
// check (its own parser found no token) while the SDK's parser (split on
// any white space) found one, so initialize and tools/list answered 200.
func TestMCPRefusesARevokedTokenInEverySpelling(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	raw, jti := h.gw.MintWith(token.MintRequest{Role: token.RoleAgent, Subject: "revoked-spelling",
		Scopes: h.engine.Settings().RoleScopes("agent"), TTL: time.Hour}, 0)
	if r := h.gw.Do(http.MethodDelete, "/v1/tokens/"+jti, h.operator, nil); r.Status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	for _, tc := range bearerSpellings(raw) {
		for what, msg := range map[string]string{"initialize": mcpInitialize, "tools/list": mcpToolsList} {
			r := mcpPost(t, h, tc.value, msg)
			checkRefusedUnauthenticated(t, tc.name+": "+what, r)
		}
	}
}

// toolNames lists the tools /mcp offers the token.
func toolNames(t *testing.T, h *harness, tok string) []string {
	t.Helper()
	list, err := mcpSession(t, h, tok).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// tools/list offers a token the tools whose route the route table of the
// bundle in force lets its role and scopes call, and no other: a session
// token is not offered create_sandbox (T2 refuses it every time), a
// reviewer none. A bundle that takes logs from session tokens takes the
// logs tool from their list too: the list follows the policy's data.
func TestMCPOffersEachTokenTheToolsItsRoleMayUse(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	agent := h.mint(token.RoleAgent, "tools-agent")
	session := h.gw.Create(agent, nil).Token
	narrow, _ := h.gw.MintWith(token.MintRequest{Role: token.RoleAgent, Subject: "narrow", Scopes: []string{"status", "exec"}, TTL: time.Hour}, 0)
	all := "create_sandbox destroy_sandbox exec list_files logs read_file sandbox_status write_file"
	for _, tc := range []struct{ name, tok, want string }{
		{"an operator gets every tool", h.operator, all},
		{"an agent gets every tool", agent, all},
		{"a session token gets all but create_sandbox", session, "destroy_sandbox exec list_files logs read_file sandbox_status write_file"},
		{"a reviewer gets none", h.mint(token.RoleReviewer, "rev"), ""},
		{"an agent token minted with two scopes gets their tools", narrow, "exec sandbox_status"},
	} {
		if got := strings.Join(toolNames(t, h, tc.tok), " "); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	// A tool not offered cannot be called either.
	cs := mcpSession(t, h, session)
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_sandbox"}); err == nil || !strings.Contains(err.Error(), "create_sandbox") {
		t.Errorf("a session token called create_sandbox: %v", err)
	}

	dir := copyBundle(t, func(path string, data []byte) ([]byte, error) {
		if path != "data.json" {
			return data, nil
		}
		var doc map[string]any
		if err := json.Unmarshal(data, &doc); err != nil {
			return nil, err
		}
		logs := doc["sandgate"].(map[string]any)["config"].(map[string]any)["routes"].(map[string]any)["GET"].(map[string]any)["/v1/sandboxes/:id/logs"].(map[string]any)
		logs["roles"] = []string{"operator", "agent"}
		return json.Marshal(doc)
	})
	h2 := newHarness(t, harnessOptions{policyDir: dir})
	session2 := h2.gw.Create(h2.operator, nil).Token
	if got := strings.Join(toolNames(t, h2, session2), " "); got != "destroy_sandbox exec list_files read_file sandbox_status write_file" {
		t.Errorf("a session token under a bundle without logs for sessions: %q", got)
	}
}

// An MCP answer that carries a session token, and a streamed exec's
// events, say no-store: before, the SDK's "no-cache, no-transform" and
// the stream's "no-cache" replaced the gateway's no-store.
func TestMCPAndStreamAnswersSayNoStore(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	agent := h.mint(token.RoleAgent, "no-store")
	r := mcpPost(t, h, "Bearer "+agent, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"create_sandbox","arguments":{}}}`)
	if r.Status != http.StatusOK || !bytes.Contains(r.Body, []byte(`\"token\":\"ey`)) {
		t.Fatalf("create_sandbox over MCP: %d %s", r.Status, r.Body)
	}
	checkNoStore(t, "an MCP answer holding a session token", r)

	id, session := h.gw.Create(agent, nil).IDToken()
	r = h.gw.DoWith(apitest.Request{Method: http.MethodPost, Path: "/v1/sandboxes/" + id + "/exec", Token: session, Body: `{"argv":["echo","hi"]}`,
		Header: map[string]string{"Accept": "text/event-stream"}})
	if r.Header.Get("Content-Type") != "text/event-stream" || !strings.Contains(string(r.Body), "event: exit") {
		t.Fatalf("the streamed exec: %d %s %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	checkNoStore(t, "a streamed exec", r)
}

// Each MCP tool names the REST route its calls make, and tools/list
// offers it by that route's entry in the route table: a tool whose route
// the gateway does not serve, or the policy does not list, would be
// offered to nobody or judged by the wrong entry.
func TestEveryMCPToolNamesARouteOfTheGatewayAndOfThePolicy(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{fake: true})
	served := map[string]bool{}
	for _, rt := range h.srv.Echo().Routes() {
		served[rt.Method+" "+rt.Path] = true
	}
	table := h.engine.Settings().Routes
	tools, err := mcpserver.Tools()
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools {
		if !served[tl.Method+" "+tl.Route] {
			t.Errorf("%s: %s %s is not a route of the gateway", tl.Name, tl.Method, tl.Route)
		}
		if _, ok := table[tl.Method][tl.Route]; !ok {
			t.Errorf("%s: %s %s is not in the policy's route table", tl.Name, tl.Method, tl.Route)
		}
	}
}
