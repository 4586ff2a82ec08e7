package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"sandgate/gateway"
	"sandgate/gateway/apitest"
	"sandgate/gateway/token"
	"sandgate/policies"
	"sandgate/store"
)

func TestTokensAreMintedOnceListedWithoutSecretAndRevokedAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	r := h.gw.Do(http.MethodPost, "/v1/tokens", h.operator, map[string]any{
		"role": "agent", "ttl_seconds": 3600, "label": "ci runner", "subject": "agent-ci",
		"quota": map[string]any{"max_live_sandboxes": 2},
	})
	if r.Status != http.StatusCreated {
		t.Fatalf("mint: %d %s", r.Status, r.Body)
	}
	if r.Header.Get("Cache-Control") != "no-store" {
		t.Fatal("the mint answer may be cached")
	}
	m := r.JSON(t)
	secret, id := m["token"].(string), m["id"].(string)
	if secret == "" || id == "" || m["role"] != "agent" || m["subject"] != "agent-ci" || m["label"] != "ci runner" ||
		m["quota"].(map[string]any)["max_live_sandboxes"] != float64(2) {
		t.Fatalf("mint answer: %s", r.Body)
	}
	// The new token works.
	if r := h.gw.Do(http.MethodGet, "/v1/sandboxes", secret, nil); r.Status != http.StatusOK {
		t.Fatalf("the minted token: %d %s", r.Status, r.Body)
	}

	r = h.gw.Do(http.MethodGet, "/v1/tokens", h.operator, nil)
	if strings.Contains(string(r.Body), secret) || strings.Contains(string(r.Body), `"token"`) {
		t.Fatalf("the listing shows a secret: %s", r.Body)
	}
	var listed map[string]any
	for _, x := range r.JSON(t)["tokens"].([]any) {
		if x.(map[string]any)["id"] == id {
			listed = x.(map[string]any)
		}
	}
	if listed == nil || listed["last_used"] == "" || listed["revoked_at"] != "" || listed["expires_at"] == "" {
		t.Fatalf("listed: %v", listed)
	}

	if r := h.gw.Do(http.MethodDelete, "/v1/tokens/"+id, h.operator, nil); r.Status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/sandboxes", secret, nil), http.StatusUnauthorized, "unauthenticated", "T4")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodDelete, "/v1/tokens/nope", h.operator, nil), http.StatusNotFound, "token_not_found")
	if tk, _ := h.st.GetToken(t.Context(), id); tk.RevokedAt.IsZero() {
		t.Fatal("the store does not say revoked")
	}
}

func TestMintRequestsAreJudgedByThePolicy(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	cases := []struct {
		name string
		body any
		rule string
	}{
		{"a session token", map[string]any{"role": "session", "ttl_seconds": 3600}, "T4"},
		{"no ttl", map[string]any{"role": "agent"}, "T4"},
		{"a ttl too short", map[string]any{"role": "agent", "ttl_seconds": 10}, "T4"},
		{"a ttl past a year", map[string]any{"role": "operator", "ttl_seconds": 40000000}, "T4"},
		{"a quota for an operator", map[string]any{"role": "operator", "ttl_seconds": 3600, "quota": map[string]any{"max_live_sandboxes": 1}}, "B3"},
		{"a quota past the ceiling", map[string]any{"role": "agent", "ttl_seconds": 3600, "quota": map[string]any{"max_live_sandboxes": 1000}}, "B3"},
		{"a subject with a colon", map[string]any{"role": "agent", "ttl_seconds": 3600, "subject": "a:b"}, "T4"},
		{"a subject with a space", map[string]any{"role": "agent", "ttl_seconds": 3600, "subject": "a b"}, "T4"},
		{"a label of 300 bytes", map[string]any{"role": "agent", "ttl_seconds": 3600, "label": strings.Repeat("a", 300)}, "T4"},
		{"the attacker's operator token of a century", attackerMint, "T4"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, "/v1/tokens", h.operator, c.body), http.StatusForbidden, "policy_denied", c.rule)
		})
	}
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, "/v1/tokens", h.operator, nil), http.StatusBadRequest, "invalid_request")
	agent := h.mint("agent", "agent-a")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, "/v1/tokens", agent, map[string]any{"role": "agent", "ttl_seconds": 3600}),
		http.StatusForbidden, "policy_denied", "T2")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/tokens", agent, nil), http.StatusForbidden, "policy_denied", "T2")
}

// B3: an agent's quota holds under concurrent creates, because the count
// of its live sandboxes is read in the transaction that reserves.
func TestAgentQuotaHoldsUnderConcurrentCreates(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	r := h.gw.Do(http.MethodPost, "/v1/tokens", h.operator, map[string]any{
		"role": "agent", "ttl_seconds": 3600, "subject": "agent-q", "quota": map[string]any{"max_live_sandboxes": 3},
	})
	agent := r.JSON(t)["token"].(string)
	const n = 20
	var wg sync.WaitGroup
	statuses := make([]int, n)
	bodies := make([]string, n)
	for i := range n {
		wg.Go(func() {
			r := h.gw.Do(http.MethodPost, "/v1/sandboxes", agent, map[string]any{"wait_seconds": 0})
			statuses[i], bodies[i] = r.Status, string(r.Body)
		})
	}
	wg.Wait()
	created, refused := 0, 0
	for i, s := range statuses {
		switch {
		case s == http.StatusCreated:
			created++
		case s == http.StatusTooManyRequests && strings.Contains(bodies[i], `"B3"`):
			refused++
		default:
			t.Errorf("create %d: %d %s", i, s, bodies[i])
		}
	}
	if created != 3 || refused != n-3 {
		t.Fatalf("created %d, refused %d; want 3 and %d", created, refused, n-3)
	}
	live, _ := h.st.List(t.Context(), store.Filter{Principal: "agent:agent-q", LiveOnly: true})
	if len(live) != 3 {
		t.Fatalf("%d live sandboxes for the agent", len(live))
	}
	// Ending one frees one slot (B4 releases the principal's use too).
	if r := h.gw.Do(http.MethodDelete, "/v1/sandboxes/"+live[0].ID, agent, nil); r.Status != http.StatusNoContent {
		t.Fatalf("destroy: %d %s", r.Status, r.Body)
	}
	h.gw.Create(agent, nil)
	// The operator has no principal quota.
	for range 4 {
		h.gw.Create(h.operator, nil)
	}
}

func TestRecentDecisionsShowRuleIDsNewestFirst(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	agent := h.mint("agent", "agent-d")
	h.gw.Do(http.MethodGet, "/v1/hosts", agent, nil) // denied: T2
	r := h.gw.Do(http.MethodGet, "/v1/decisions?limit=2", h.operator, nil)
	ds := r.JSON(t)["decisions"].([]any)
	if len(ds) != 2 {
		t.Fatalf("limit=2 gave %d", len(ds))
	}
	// Newest first: this very request's own decision, then the denial.
	first, second := ds[0].(map[string]any), ds[1].(map[string]any)
	if first["route"] != "/v1/decisions" || first["allow"] != true {
		t.Fatalf("newest: %v", first)
	}
	if second["route"] != "/v1/hosts" || second["allow"] != false || second["principal"] != "agent:agent-d" {
		t.Fatalf("second: %v", second)
	}
	ids := second["rule_ids"].([]any)
	vs := second["violations"].([]any)
	if len(ids) != 1 || ids[0] != "T2" || len(vs) == 0 || second["decision_id"] == "" || second["bundle_revision"] == "" {
		t.Fatalf("denial: %v", second)
	}
	for _, q := range []string{"0", "1001", "x"} {
		apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/decisions?limit="+q, h.operator, nil), http.StatusBadRequest, "invalid_request")
	}
}

// attackerMint is what issue 21 recorded offline: an operator token valid
// for 100 years, with the subject "atk2:sub with space" and a 300-byte label.
var attackerMint = map[string]any{
	"role": "operator", "ttl_seconds": 100 * 365 * 24 * 3600, "subject": "atk2:sub with space", "label": strings.Repeat("x", 300),
}

// The offline mint (sandgate token mint --offline) takes the decision POST
// /v1/tokens takes: the same rules refuse the same requests, and allow the
// same.
func TestTheOfflineMintIsDecidedAsTheTokensRouteDecides(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	eng, err := policies.New(t.Context(), policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		req  gateway.TokenRequest
		body map[string]any
	}{
		{"the attacker's mint", gateway.TokenRequest{Role: token.RoleOperator, Subject: "atk2:sub with space", Label: strings.Repeat("x", 300), TTL: 100 * 365 * 24 * time.Hour}, attackerMint},
		{"a century alone", gateway.TokenRequest{Role: token.RoleOperator, TTL: 100 * 365 * 24 * time.Hour},
			map[string]any{"role": "operator", "ttl_seconds": 100 * 365 * 24 * 3600}},
		{"a colon alone", gateway.TokenRequest{Role: token.RoleAgent, Subject: "agent:ci", TTL: time.Hour},
			map[string]any{"role": "agent", "ttl_seconds": 3600, "subject": "agent:ci"}},
		{"a long label alone", gateway.TokenRequest{Role: token.RoleReviewer, Label: strings.Repeat("é", 65), TTL: time.Hour},
			map[string]any{"role": "reviewer", "ttl_seconds": 3600, "label": strings.Repeat("é", 65)}},
		{"a ttl too short", gateway.TokenRequest{Role: token.RoleAgent, TTL: 10 * time.Second},
			map[string]any{"role": "agent", "ttl_seconds": 10}},
		{"a session token", gateway.TokenRequest{Role: "session", TTL: time.Hour},
			map[string]any{"role": "session", "ttl_seconds": 3600}},
		{"a good operator token", gateway.TokenRequest{Role: token.RoleOperator, Subject: "alice@example.org", Label: "first", TTL: 24 * time.Hour},
			map[string]any{"role": "operator", "ttl_seconds": 24 * 3600, "subject": "alice@example.org", "label": "first"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d, err := gateway.DecideOfflineMint(t.Context(), eng, time.Now(), c.req)
			if err != nil {
				t.Fatal(err)
			}
			r := h.gw.Do(http.MethodPost, "/v1/tokens", h.operator, c.body)
			if d.Allow {
				if r.Status != http.StatusCreated {
					t.Fatalf("offline allowed, the route answered %d: %s", r.Status, r.Body)
				}
				return
			}
			apitest.ExpectProblem(t, r, http.StatusForbidden, "policy_denied", d.RuleIDs()...)
			var p struct{ Violations []policies.Violation }
			if err := json.Unmarshal(r.Body, &p); err != nil {
				t.Fatal(err)
			}
			if len(p.Violations) != len(d.Violations) {
				t.Fatalf("offline violations %v, the route's %v", d.Violations, p.Violations)
			}
			for i := range d.Violations {
				if p.Violations[i].Rule != d.Violations[i].Rule || p.Violations[i].Msg != d.Violations[i].Msg {
					t.Fatalf("offline violations %v, the route's %v", d.Violations, p.Violations)
				}
			}
		})
	}
}
