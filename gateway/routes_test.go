package gateway_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sandgate/gateway"
	"sandgate/gateway/apitest"
	"sandgate/gateway/audit"
	"sandgate/gateway/token"
	"sandgate/nomad/nomadsim"
	"sandgate/policies"
	"sandgate/policies/policytest"
	"sandgate/store"
)

// denyAllBundle writes the embedded bundle to a directory with every
// role's scopes emptied: T2 then refuses every route.
func denyAllBundle(t *testing.T) string {
	t.Helper()
	return copyBundle(t, func(path string, data []byte) ([]byte, error) {
		if path != "data.json" {
			return data, nil
		}
		var doc map[string]any
		if err := json.Unmarshal(data, &doc); err != nil {
			return nil, err
		}
		roles := doc["sandgate"].(map[string]any)["config"].(map[string]any)["roles"].(map[string]any)
		for name := range roles {
			roles[name] = map[string]any{"scopes": []string{}}
		}
		return json.Marshal(doc)
	})
}

// copyBundle writes the embedded bundle to a directory, passing every file
// through edit.
func copyBundle(t *testing.T, edit func(path string, data []byte) ([]byte, error)) string {
	t.Helper()
	return policytest.Copy(t, policies.EmbeddedBundle(), edit)
}

// publicPaths is the test's own list of the routes that take no token:
// kept apart from the registration, so that a route made public by mistake,
// or one that lost its middleware, fails the walk below.
var publicPaths = map[string]bool{
	"/healthz": true, "/readyz": true, "/metrics": true, "/v1/capabilities": true, "/llms.txt": true, "/openapi.json": true,
	"/mcp": true,                // bearer-authenticated by the MCP endpoint; each tool call is a REST request with this middleware
	"/":    true, "/ui/*": true, // the dashboard: static files; its API calls carry the token
}

// selfAuthenticated are the routes that check the bearer token
// themselves and make no policy decision of their own: /mcp, whose every
// tool call is a request to a route below (TestMCPToolsAreTheRESTRoutesUnderTheSameToken).
var selfAuthenticated = map[string]bool{"/mcp": true}

// Every registered route except the public ones is refused without a token
// and refused when the policy says no: a route added without the
// middleware fails here.
func TestEveryNonPublicRouteIsRefusedWithoutATokenAndWhenThePolicyDenies(t *testing.T) {
	t.Parallel()
	open := newHarness(t, harnessOptions{})
	deny := newHarness(t, harnessOptions{policyDir: denyAllBundle(t)})
	operator := deny.mint(token.RoleOperator, "ops")
	sbx := open.gw.Create(open.operator, nil).ID

	routes := open.srv.Echo().Routes()
	if len(routes) < 11 {
		t.Fatalf("only %d routes registered", len(routes))
	}
	seen := 0
	for _, rt := range routes {
		path := strings.ReplaceAll(rt.Path, ":id", sbx)
		path = strings.ReplaceAll(path, ":node", "worker-1")
		path = strings.ReplaceAll(path, ":jti", "x")
		path = strings.ReplaceAll(path, "*", "app.js")
		if selfAuthenticated[rt.Path] {
			for _, tok := range []string{"", "not-a-jwt"} {
				r := open.gw.Do(rt.Method, path, tok, `{}`)
				checkRefusedUnauthenticated(t, rt.Method+" "+rt.Path+" with token "+tok, r)
			}
			continue
		}
		if publicPaths[rt.Path] {
			r := open.gw.Do(rt.Method, path, "", nil)
			if r.Status != http.StatusOK {
				t.Errorf("public %s %s: %d", rt.Method, rt.Path, r.Status)
			}
			checkNoStore(t, rt.Method+" "+rt.Path, r)
			continue
		}
		seen++
		r := open.gw.Do(rt.Method, path, "", `{}`)
		checkRefusedUnauthenticated(t, rt.Method+" "+rt.Path+" without a token", r)
		r = open.gw.Do(rt.Method, path, "not-a-jwt", `{}`)
		checkRefusedUnauthenticated(t, rt.Method+" "+rt.Path+" with a malformed token", r)
		if ok := open.gw.Do(rt.Method, strings.ReplaceAll(rt.Path, ":id", sbx), open.operator, `{}`); ok.Status != 0 {
			checkNoStore(t, rt.Method+" "+rt.Path+" with the operator's token", ok)
		}
		body := `{}`
		if strings.HasSuffix(rt.Path, "/exec") {
			body = `{"argv":["true"]}`
		} else if strings.HasSuffix(rt.Path, "/extend") {
			body = `{"ttl_seconds":600}`
		}
		path = strings.ReplaceAll(rt.Path, ":id", "abcdefgh12345678")
		r = deny.gw.Do(rt.Method, path, operator, body)
		if r.Status != http.StatusForbidden && r.Status != http.StatusNotFound {
			t.Errorf("%s %s with an operator token under a deny-all policy: %d, want 403 (or 404 for an absent target)", rt.Method, rt.Path, r.Status)
		}
		if !strings.Contains(string(r.Body), `"rule_ids"`) || !strings.Contains(string(r.Body), `"decision_id"`) {
			t.Errorf("%s %s: the refusal names no rule or decision: %s", rt.Method, rt.Path, r.Body)
		}
		checkNoStore(t, rt.Method+" "+rt.Path+" refused by the policy", r)
	}
	if seen < 7 {
		t.Fatalf("only %d protected routes walked", seen)
	}
}

// checkNoStore: every answer of the gateway, whatever the route, the
// status or the handler, says Cache-Control: no-store (docs/api.md,
// Caching): any of them may carry a token, a sandbox's output or a file.
func checkNoStore(t *testing.T, what string, r apitest.Reply) {
	t.Helper()
	if got := r.Header.Values("Cache-Control"); len(got) != 1 || got[0] != "no-store" {
		t.Errorf("%s: Cache-Control %q, want exactly no-store", what, got)
	}
}

// checkRefusedUnauthenticated: a 401 is a problem document with a Bearer
// challenge, on REST and on /mcp alike, and says no-store.
func checkRefusedUnauthenticated(t *testing.T, what string, r apitest.Reply) {
	t.Helper()
	if r.Status != http.StatusUnauthorized {
		t.Errorf("%s: %d, want 401: %s", what, r.Status, r.Body)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("%s: Content-Type %q, want application/problem+json: %s", what, ct, r.Body)
	}
	if ch := r.Header.Get("WWW-Authenticate"); !strings.HasPrefix(ch, `Bearer realm="sandgate"`) {
		t.Errorf("%s: WWW-Authenticate %q, want a Bearer challenge", what, ch)
	}
	checkNoStore(t, what, r)
}

// A decision of the wrong shape (here: no violations) is an engine error,
// and an engine error refuses the request: nothing reaches Nomad.
func TestAMalformedDecisionFailsClosed(t *testing.T) {
	t.Parallel()
	dir := copyBundle(t, func(path string, data []byte) ([]byte, error) {
		if path != "authz/authz.rego" {
			return data, nil
		}
		s := string(data)
		const decision = `decision := modes.decision(violations)`
		if !strings.Contains(s, decision) {
			t.Fatal("authz.rego no longer holds the decision this test rewrites")
		}
		return []byte(strings.Replace(s, decision, `decision := {"allow": true}`, 1)), nil
	})
	h := newHarness(t, harnessOptions{policyDir: dir})
	h.sim.ResetRequests()
	r := h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{})
	m := apitest.ExpectProblem(t, r, http.StatusServiceUnavailable, "unavailable")
	if m["decision_id"] == "" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("refusal lacks decision_id or Retry-After: %s", r.Body)
	}
	if n := h.sim.Requests(); n != 0 {
		t.Fatalf("a refused request reached Nomad: %v", h.sim.RequestLog())
	}
	if recs, _ := h.st.List(t.Context(), store.Filter{}); len(recs) != 0 {
		t.Fatalf("a refused request wrote %d records", len(recs))
	}
}

func TestReadyzIs503WhenNomadDoesNotAnswer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{fake: true})
	if r := h.gw.Do(http.MethodGet, "/readyz", "", nil); r.Status != http.StatusOK {
		t.Fatalf("readyz: %d %s", r.Status, r.Body)
	}
	h.sim.InjectFault(nomadsim.Fault{PathPrefix: "/v1/agent/self", Status: http.StatusInternalServerError})
	if r := h.gw.Do(http.MethodGet, "/readyz", "", nil); r.Status != http.StatusOK {
		t.Fatalf("readyz within its cache period: %d %s, want the cached 200", r.Status, r.Body)
	}
	h.clock.Advance(time.Second) // the cache period
	r := h.gw.Do(http.MethodGet, "/readyz", "", nil)
	if r.Status != http.StatusServiceUnavailable || r.JSON(t)["ready"] != false || strings.Contains(string(r.Body), "127.0.0.1") {
		t.Fatalf("readyz with Nomad failing: %d %s", r.Status, r.Body)
	}
}

// A lifecycle deny stops the action: here a bundle whose B4 sees only
// starting sandboxes as live refuses to end a running one, so the destroy
// is a 403 and the job, the record, its budget and its token all stay.
func TestALifecycleDenyLeavesTheSandboxUntouched(t *testing.T) {
	t.Parallel()
	dir := copyBundle(t, func(path string, data []byte) ([]byte, error) {
		if path != "lifecycle/lifecycle.rego" {
			return data, nil
		}
		const live = `_live_states := {"starting", "running"}`
		if !strings.Contains(string(data), live) {
			t.Fatal("lifecycle.rego no longer holds the line this test rewrites")
		}
		return []byte(strings.Replace(string(data), live, `_live_states := {"starting"}`, 1)), nil
	})
	h := newHarness(t, harnessOptions{policyDir: dir})
	id, session := h.gw.Create(h.operator, nil).IDToken()
	apitest.ExpectProblem(t, h.gw.Do(http.MethodDelete, "/v1/sandboxes/"+id, h.operator, nil), http.StatusForbidden, "policy_denied", "B4")
	if r := h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, session, nil); r.Status != http.StatusOK || r.JSON(t)["state"] != "running" {
		t.Fatalf("after the refused destroy: %d %s", r.Status, r.Body)
	}
	if jobs := h.sim.Jobs(); len(jobs) != 1 {
		t.Fatalf("jobs after the refused destroy: %v", jobs)
	}
	if u, _ := h.st.NodeUsage(t.Context(), "worker-1"); u.Sandboxes != 1 {
		t.Fatalf("budget after the refused destroy: %+v", u)
	}
}

// /readyz is unauthenticated: a flood of probes costs one Nomad call per
// cache period, not one per request.
func TestReadyzFloodCostsOneNomadCallPerPeriod(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{fake: true})
	h.sim.ResetRequests()
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			if r := h.gw.Do(http.MethodGet, "/readyz", "", nil); r.Status != http.StatusOK {
				t.Errorf("readyz: %d %s", r.Status, r.Body)
			}
		})
	}
	wg.Wait()
	if n := h.sim.Requests(); n != 1 {
		t.Fatalf("100 probes made %d Nomad calls, want 1: %v", n, h.sim.RequestLog())
	}
	h.clock.Advance(time.Second) // the cache period
	h.gw.Do(http.MethodGet, "/readyz", "", nil)
	if n := h.sim.Requests(); n != 2 {
		t.Fatalf("a probe after the cache period made %d calls in all, want 2", n)
	}
}

// A decision that cannot be logged is not acted on: with the decision log
// closed under it, a create is a 503 without a decision id (no line holds
// it), Retry-After set, and nothing reaches Nomad or the store.
func TestAnUnwritableDecisionLogFailsClosed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{config: func(c *gateway.Config) {
		closed, err := audit.Open(audit.Config{Path: filepath.Join(t.TempDir(), "closed.jsonl")})
		if err != nil {
			t.Fatal(err)
		}
		if err := closed.Close(); err != nil {
			t.Fatal(err)
		}
		c.Decisions = closed
	}})
	h.sim.ResetRequests()
	r := h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{})
	m := apitest.ExpectProblem(t, r, http.StatusServiceUnavailable, "unavailable")
	if _, ok := m["decision_id"]; ok || r.Header.Get("Retry-After") == "" {
		t.Fatalf("want no decision_id and a Retry-After: %s", r.Body)
	}
	if !strings.Contains(m["detail"].(string), "decision log") {
		t.Fatalf("detail does not say the decision log failed: %s", r.Body)
	}
	if n := h.sim.Requests(); n != 0 {
		t.Fatalf("a refused request reached Nomad: %v", h.sim.RequestLog())
	}
	if recs, _ := h.st.List(t.Context(), store.Filter{}); len(recs) != 0 {
		t.Fatalf("a refused request wrote %d records", len(recs))
	}
}
