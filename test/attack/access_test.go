package attack

import (
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	"sandgate/gateway/apitest"
)

func revokedTokenCases(*testing.T, *world) []attack {
	get := func(path string) apitest.Request { return apitest.Request{Method: http.MethodGet, Path: path} }
	exec := apitest.Request{Method: http.MethodPost, Path: "/v1/sandboxes/{gone}/exec", Body: `{"argv":["true"]}`}
	t4 := []string{"T4"}
	return []attack{
		{name: "a revoked agent lists", req: get("/v1/sandboxes"), as: "gamma", status: 401, code: "unauthenticated", rules: t4},
		{name: "a revoked agent creates", req: apitest.Request{Method: http.MethodPost, Path: "/v1/sandboxes", Body: `{}`}, as: "gamma", status: 401, code: "unauthenticated", rules: t4},
		{name: "a revoked operator mints itself a new operator token", req: apitest.Request{Method: http.MethodPost, Path: "/v1/tokens", Body: `{"role":"operator","ttl_seconds":3600}`}, as: "opOld", status: 401, code: "unauthenticated", rules: t4},
		{name: "a revoked operator destroys a sandbox", req: apitest.Request{Method: http.MethodDelete, Path: "/v1/sandboxes/{a1}"}, as: "opOld", status: 401, code: "unauthenticated", rules: t4},
		{name: "a revoked operator lists tokens", req: get("/v1/tokens"), as: "opOld", status: 401, code: "unauthenticated", rules: t4},
		{name: "a destroyed sandbox's session token reads its status", req: get("/v1/sandboxes/{gone}"), as: "sess:gone", status: 401, code: "unauthenticated", rules: t4},
		{name: "a destroyed sandbox's session token execs", req: exec, as: "sess:gone", status: 401, code: "unauthenticated", rules: t4},
		{name: "a destroyed sandbox's session token reads logs", req: get("/v1/sandboxes/{gone}/logs"), as: "sess:gone", status: 401, code: "unauthenticated", rules: t4},
		{name: "a destroyed sandbox's session token destroys again", req: apitest.Request{Method: http.MethodDelete, Path: "/v1/sandboxes/{gone}"}, as: "sess:gone", status: 401, code: "unauthenticated", rules: t4},
		{name: "a destroyed sandbox's session token turns to a live sandbox", req: get("/v1/sandboxes/{a1}"), as: "sess:gone", status: 401, code: "unauthenticated", rules: t4},
		{name: "an expired sandbox's session token reads its status", req: get("/v1/sandboxes/{expiring}"), as: "sess:expiring", status: 410, code: "sandbox_expired", rules: []string{"T3"}},
		{name: "an expired sandbox's session token execs", req: apitest.Request{Method: http.MethodPost, Path: "/v1/sandboxes/{expiring}/exec", Body: `{"argv":["true"]}`}, as: "sess:expiring", status: 410, code: "sandbox_expired", rules: []string{"T3"}},
		{name: "an expired sandbox's owner execs in it", req: apitest.Request{Method: http.MethodPost, Path: "/v1/sandboxes/{expiring}/exec", Body: `{"argv":["true"]}`}, as: "agentA", status: 410, code: "sandbox_expired", rules: []string{"T3"}},
		{name: "the operator extends an expired sandbox back to life", req: apitest.Request{Method: http.MethodPost, Path: "/v1/sandboxes/{expiring}/extend", Body: `{"ttl_seconds":3600}`}, as: "op", status: 410, code: "sandbox_expired", rules: []string{"T3"}},
		{name: "an expired agent token lists", req: get("/v1/sandboxes"), as: "short", status: 401, code: "token_expired"},
	}
}

// publicPaths are the routes that take no token: the test's own list, so
// a protected route that lost its middleware fails the matrix (it would
// answer without a 403).
var publicPaths = map[string]bool{
	"/healthz": true, "/readyz": true, "/metrics": true, "/v1/capabilities": true, "/llms.txt": true, "/openapi.json": true, "/": true, "/ui/*": true,
	"/mcp": true, // its own bearer check; each tool call is a request to a route of the matrix (gateway TestMCPToolsAreTheRESTRoutesUnderTheSameToken)
}

// matrixTokens is the token each role attacks with: agentA and a1's
// session own the sandbox the routes target, so only the role decides.
var matrixTokens = map[string]string{"operator": "op", "agent": "agentA", "session": "sess:a1"}

// scopelessTokens are recorded tokens of a role holding no scope at all;
// scopelessTargets the sandbox each attacks (the agent's own: d1 belongs to
// its subject), so only the missing scope decides.
var (
	scopelessTokens  = map[string]string{"operator": "opNoScope", "agent": "agentNoScope"}
	scopelessTargets = map[string]string{"operator": "a1", "agent": "d1"}
)

// matrixBodies are bodies the policy would allow on each route (so that
// only the role is refused). A route missing here is sent no body; if it
// needs one, its cases fail with a 400 instead of the 403: add it here.
var matrixBodies = map[string]string{ //nolint:gosec // G101: request bodies keyed by route, no credentials
	"POST /v1/sandboxes":                `{}`,
	"POST /v1/sandboxes/:id/exec":       `{"argv":["true"]}`,
	"POST /v1/sandboxes/:id/extend":     `{"ttl_seconds":600}`,
	"PUT /v1/hosts/:node/enrollment":    `{}`,
	"POST /v1/hosts/:node/state":        `{"state":"frozen"}`,
	"POST /v1/tokens":                   `{"role":"operator","ttl_seconds":3600}`,
	"POST /v1/policy/evaluate":          `{}`,
	"DELETE /v1/hosts/:node/enrollment": ``,
}

// routePath fills a route template's parameters with real targets: the
// named sandbox, the node worker-1, agentB's token.
func routePath(tpl, sandbox string) string {
	parts := strings.Split(tpl, "/")
	for i, p := range parts {
		switch {
		case p == ":id":
			parts[i] = "{" + sandbox + "}"
		case p == ":node":
			parts[i] = "worker-1"
		case p == ":jti":
			parts[i] = "{jti:agentB}"
		case strings.HasPrefix(p, ":"):
			parts[i] = "x"
		case p == "*":
			parts[i] = "app.js"
		}
	}
	return strings.Join(parts, "/")
}

// matrixCases: every role against every route of the gateway's own table
// that the policy data does not grant it (403 T2), every role's scope-less
// token against the routes the role may use (403 T2), and every route the
// policy data lists but the gateway does not serve (404 or 405, no
// decision).
func matrixCases(t *testing.T, w *world) []attack {
	granted := policyRoutes(t)
	served := map[string]bool{}
	paths := map[string]bool{}
	var keys []string
	for _, rt := range w.srv.Echo().Routes() {
		key := rt.Method + " " + rt.Path
		if served[key] {
			continue
		}
		served[key], paths[rt.Path] = true, true
		if !publicPaths[rt.Path] {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	if len(keys) < 12 {
		t.Fatalf("only %d protected routes in the gateway's table", len(keys))
	}
	var out []attack
	for _, key := range keys {
		method, path, _ := strings.Cut(key, " ")
		roles := []string{"operator", "agent", "session"}
		why := "role may not call " + key
		if _, listed := granted[key]; !listed { // a route the policy data forgot: refused for everyone
			why = "route " + key + " is not in the route table"
		}
		for _, role := range roles {
			if slices.Contains(granted[key], role) {
				continue
			}
			out = append(out, attack{
				name: role + " may not call " + key, as: matrixTokens[role],
				req:    apitest.Request{Method: method, Path: routePath(path, "a1"), Body: matrixBodies[key]},
				status: 403, code: "policy_denied", rules: []string{"T2"}, msg: why,
			})
		}
		for _, role := range roles {
			tok, ok := scopelessTokens[role]
			if !ok || !slices.Contains(granted[key], role) {
				continue
			}
			out = append(out, attack{
				name: role + " without scopes may not call " + key, as: tok,
				req:    apitest.Request{Method: method, Path: routePath(path, scopelessTargets[role]), Body: matrixBodies[key]},
				status: 403, code: "policy_denied", rules: []string{"T2"}, msg: "token lacks the scope of " + key,
			})
		}
	}
	var unserved []string
	for key := range granted {
		if !served[key] {
			unserved = append(unserved, key)
		}
	}
	sort.Strings(unserved)
	for _, key := range unserved {
		method, path, _ := strings.Cut(key, " ")
		status, code := 404, "not_found"
		if paths[path] {
			status, code = 405, "method_not_allowed"
		}
		out = append(out, attack{
			name: "the operator calls " + key + " which the gateway does not serve",
			req:  apitest.Request{Method: method, Path: routePath(path, "a1"), Body: matrixBodies[key]}, as: "op",
			status: status, code: code,
		})
	}
	return out
}

// listed checks that a listing holds exactly the named sandboxes.
func listed(names ...string) func(t *testing.T, w *world, r apitest.Reply) {
	return func(t *testing.T, w *world, r apitest.Reply) {
		var want []string
		for _, n := range names {
			want = append(want, w.ids[n])
		}
		sbx, _ := r.JSON(t)["sandboxes"].([]any)
		var got []string
		for _, s := range sbx {
			m, _ := s.(map[string]any)
			id, _ := m["id"].(string)
			got = append(got, id)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("listed %v, want %v", got, want)
		}
	}
}

// otherPrincipalCases: agents and session tokens on sandboxes that are not
// theirs are refused by T2 for that reason.
func otherPrincipalCases(t *testing.T, w *world) []attack {
	cases := otherPrincipalTable()
	for i, c := range cases {
		switch {
		case c.status != 403:
		case strings.HasPrefix(c.as, "sess:"):
			cases[i].msg = "session token is bound to another sandbox"
		default:
			cases[i].msg = "sandbox belongs to another principal"
		}
	}
	return cases
}

func otherPrincipalTable() []attack {
	t2 := []string{"T2"}
	exec := func(id string) apitest.Request {
		return apitest.Request{Method: http.MethodPost, Path: "/v1/sandboxes/{" + id + "}/exec", Body: `{"argv":["echo","pwned"]}`}
	}
	get := func(p string) apitest.Request { return apitest.Request{Method: http.MethodGet, Path: p} }
	del := func(id string) apitest.Request {
		return apitest.Request{Method: http.MethodDelete, Path: "/v1/sandboxes/{" + id + "}"}
	}
	return []attack{
		{name: "an agent reads another agent's sandbox", req: get("/v1/sandboxes/{a1}"), as: "agentB", status: 403, code: "policy_denied", rules: t2},
		{name: "an agent execs in another agent's sandbox", req: exec("a1"), as: "agentB", status: 403, code: "policy_denied", rules: t2},
		{name: "an agent reads another agent's logs", req: get("/v1/sandboxes/{a1}/logs"), as: "agentB", status: 403, code: "policy_denied", rules: t2},
		{name: "an agent destroys another agent's sandbox", req: del("a1"), as: "agentB", status: 403, code: "policy_denied", rules: t2},
		{name: "an agent destroys the operator's sandbox", req: del("o1"), as: "agentB", status: 403, code: "policy_denied", rules: t2},
		{name: "an agent execs in the operator's sandbox", req: exec("o1"), as: "agentA", status: 403, code: "policy_denied", rules: t2},
		{name: "an agent destroys another agent's ended sandbox", req: del("gone"), as: "agentB", status: 403, code: "policy_denied", rules: t2},
		{name: "a session token reads another sandbox", req: get("/v1/sandboxes/{b1}"), as: "sess:a1", status: 403, code: "policy_denied", rules: t2},
		{name: "a session token reads a sibling sandbox of the same agent", req: get("/v1/sandboxes/{a2}"), as: "sess:a1", status: 403, code: "policy_denied", rules: t2},
		{name: "a session token execs in another sandbox", req: exec("b1"), as: "sess:a1", status: 403, code: "policy_denied", rules: t2},
		{name: "a session token reads another sandbox's logs", req: get("/v1/sandboxes/{b1}/logs"), as: "sess:a1", status: 403, code: "policy_denied", rules: t2},
		{name: "a session token destroys another sandbox", req: del("o1"), as: "sess:a1", status: 403, code: "policy_denied", rules: t2},
		{name: "an agent probes a sandbox id that does not exist", req: get("/v1/sandboxes/abcdefgh12345678"), as: "agentB", status: 404, code: "sandbox_not_found", rules: t2},
		{name: "an agent lists only its own sandboxes", req: get("/v1/sandboxes"), as: "agentB", status: 200, check: listed("b1")},
		{name: "an agent lists with all=true and still sees only its own", req: get("/v1/sandboxes?all=true"), as: "agentB", status: 200, check: listed("b1")},
		{name: "an agent asks for another principal's listing", req: get("/v1/sandboxes?principal=agent:alpha"), as: "agentB", status: 400, code: "invalid_request"},
		{name: "an agent smuggles owner and sub filters into its listing", req: get("/v1/sandboxes?owner=alpha&sub=alpha"), as: "agentB", status: 400, code: "invalid_request"},
		{name: "an agent lists with a forged X-Forwarded-User", req: apitest.Request{Method: http.MethodGet, Path: "/v1/sandboxes", Header: map[string]string{"X-Forwarded-User": "alpha", "X-Sandgate-Principal": "operator:ops"}}, as: "agentB", status: 200, check: listed("b1")},
	}
}

func pathCases(*testing.T, *world) []attack {
	get := func(p string) apitest.Request { return apitest.Request{Method: http.MethodGet, Path: p} }
	h9 := []string{"H9"}
	return []attack{
		{name: "a session token climbs out with an encoded ../ to another sandbox", req: get("/v1/sandboxes/{a1}%2F..%2F{b1}"), as: "sess:a1", status: 404, code: "sandbox_not_found", rules: h9},
		{name: "a session token reaches another sandbox through dot segments", req: get("/v1/sandboxes/{a1}/../{b1}"), as: "sess:a1", status: 404, code: "not_found"},
		{name: "an agent reaches the hosts through dot segments", req: get("/v1/sandboxes/../hosts"), as: "agentA", status: 404, code: "not_found"},
		{name: "an agent reaches the tokens through encoded dot segments", req: get("/v1/sandboxes/%2E%2E%2Ftokens"), as: "agentA", status: 404, code: "sandbox_not_found", rules: h9},
		{name: "an agent reaches another sandbox through a double-encoded slash", req: get("/v1/sandboxes/{a1}%252F..%252F{b1}"), as: "agentA", status: 404, code: "sandbox_not_found", rules: h9},
		{name: "a session token names its sandbox in upper case", req: get("/v1/sandboxes/{a1}X"), as: "sess:a1", status: 404, code: "sandbox_not_found", rules: h9},
		{name: "the operator names a Nomad job instead of a sandbox", req: apitest.Request{Method: http.MethodDelete, Path: "/v1/sandboxes/sandgate-sbx-{a1}"}, as: "op", status: 404, code: "sandbox_not_found", rules: h9},
		{name: "the operator names another Nomad job by a percent-encoded id", req: apitest.Request{Method: http.MethodDelete, Path: "/v1/sandboxes/%6e%6f%6d%61%64%2d%63%6f%72%65"}, as: "op", status: 404, code: "sandbox_not_found", rules: h9},
		{name: "the operator execs in a NUL-suffixed id", req: apitest.Request{Method: http.MethodPost, Path: "/v1/sandboxes/{a1}%00/exec", Body: `{"argv":["true"]}`}, as: "op", status: 404, code: "sandbox_not_found", rules: h9},
		{name: "a session token adds a trailing slash", req: get("/v1/sandboxes/{b1}/"), as: "sess:a1", status: 404, code: "not_found"},
		{name: "an agent doubles the leading slash", req: get("//v1/hosts"), as: "agentA", status: 404, code: "not_found"},
		{name: "an agent uses a dot segment before the hosts", req: get("/v1/./hosts"), as: "agentA", status: 404, code: "not_found"},
		{name: "an agent encodes the slash of the hosts route", req: get("/v1%2Fhosts"), as: "agentA", status: 404, code: "not_found"},
		{name: "the operator enrolls a node named with an encoded ../", req: apitest.Request{Method: http.MethodPut, Path: "/v1/hosts/worker-1%2F..%2Fcontrol-1/enrollment", Body: `{}`}, as: "op", status: 404, code: "host_not_found", nomad: true},
		{name: "the operator revokes a token named with an encoded ../", req: apitest.Request{Method: http.MethodDelete, Path: "/v1/tokens/..%2F..%2F{jti:agentA}"}, as: "op", status: 404, code: "token_not_found", rules: nil},
	}
}

func methodCases(*testing.T, *world) []attack {
	unchanged := func(t *testing.T, _ *world, r apitest.Reply) {
		if m := r.JSON(t); m["state"] != "running" {
			t.Errorf("state %v after the override, want running", m["state"])
		}
	}
	override := func(name, value string) map[string]string { return map[string]string{name: value} }
	return []attack{
		{name: "X-HTTP-Method-Override DELETE on a status read", req: apitest.Request{Method: http.MethodGet, Path: "/v1/sandboxes/{a1}", Header: override("X-HTTP-Method-Override", "DELETE")}, as: "sess:a1", status: 200, check: unchanged},
		{name: "X-HTTP-Method DELETE on a status read", req: apitest.Request{Method: http.MethodGet, Path: "/v1/sandboxes/{a1}", Header: override("X-HTTP-Method", "DELETE")}, as: "sess:a1", status: 200, check: unchanged},
		{name: "X-Method-Override DELETE on a status read", req: apitest.Request{Method: http.MethodGet, Path: "/v1/sandboxes/{a1}", Header: override("X-Method-Override", "DELETE")}, as: "sess:a1", status: 200, check: unchanged},
		{name: "a _method=DELETE query on a status read", req: apitest.Request{Method: http.MethodGet, Path: "/v1/sandboxes/{a1}?_method=DELETE"}, as: "sess:a1", status: 200, check: unchanged},
		{name: "an override to GET on a forbidden mint", req: apitest.Request{Method: http.MethodPost, Path: "/v1/tokens", Body: `{"role":"operator","ttl_seconds":3600}`, Header: override("X-HTTP-Method-Override", "GET")}, as: "agentA", status: 403, code: "policy_denied", rules: []string{"T2"}},
		{name: "an override to POST on another agent's exec", req: apitest.Request{Method: http.MethodPost, Path: "/v1/sandboxes/{b1}/exec", Body: `{"argv":["true"]}`, Header: override("X-HTTP-Method-Override", "GET")}, as: "agentA", status: 403, code: "policy_denied", rules: []string{"T2"}},
		{name: "PATCH on a sandbox", req: apitest.Request{Method: http.MethodPatch, Path: "/v1/sandboxes/{a1}", Body: `{"expires_at":"2999-01-01T00:00:00Z"}`}, as: "op", status: 405, code: "method_not_allowed"},
		{name: "PUT on a sandbox", req: apitest.Request{Method: http.MethodPut, Path: "/v1/sandboxes/{a1}", Body: `{"principal":"beta"}`}, as: "agentA", status: 405, code: "method_not_allowed"},
		{name: "TRACE on the token list", req: apitest.Request{Method: http.MethodTrace, Path: "/v1/tokens"}, as: "agentA", status: 405, code: "method_not_allowed"},
		{name: "PROPFIND on a sandbox", req: apitest.Request{Method: "PROPFIND", Path: "/v1/sandboxes/{b1}"}, as: "agentA", status: 405, code: "method_not_allowed"},
		{name: "a lower-case delete on another agent's sandbox", req: apitest.Request{Method: "delete", Path: "/v1/sandboxes/{b1}"}, as: "agentA", status: 405, code: "method_not_allowed"},
		{name: "HEAD on another agent's sandbox", req: apitest.Request{Method: http.MethodHead, Path: "/v1/sandboxes/{b1}"}, as: "agentA", status: 405, check: emptyBody},
		{name: "a CORS preflight from another origin is granted nothing", req: apitest.Request{Method: http.MethodOptions, Path: "/v1/sandboxes/{a1}", Header: map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "DELETE", "Access-Control-Request-Headers": "authorization"}}, status: 204, check: noCORS},
		{name: "a cross-origin read is granted nothing", req: apitest.Request{Method: http.MethodGet, Path: "/v1/sandboxes", Header: map[string]string{"Origin": "https://evil.example"}}, as: "op", status: 200, check: noCORS},
	}
}

// noCORS checks that an answer grants no other origin anything.
func noCORS(t *testing.T, _ *world, r apitest.Reply) {
	for k := range r.Header {
		if strings.HasPrefix(strings.ToLower(k), "access-control-") {
			t.Errorf("the answer carries %s: %v", k, r.Header[k])
		}
	}
}

func emptyBody(t *testing.T, _ *world, r apitest.Reply) {
	if len(r.Body) != 0 {
		t.Errorf("a HEAD answer with a body: %s", clip(r.Body))
	}
}
