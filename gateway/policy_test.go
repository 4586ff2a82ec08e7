package gateway_test

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"sandgate/gateway/client"
	"sandgate/gateway/token"
	"sandgate/policies"
)

func TestThePolicyInForceIsReadableByOperatorsOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	r := h.do(http.MethodGet, "/v1/policy", h.operator, nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/policy as the operator: %d %s", r.status, r.body)
	}
	var got client.Policy
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	digest, err := policies.BundleDigest(policies.EmbeddedBundle())
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != h.engine.Revision() || got.Digest != digest || got.DigestAlgorithm != policies.DigestAlgorithm || got.Signed {
		t.Fatalf("policy %+v: want revision %s, digest %s (%s), unsigned", got, h.engine.Revision(), digest, policies.DigestAlgorithm)
	}
	if at, err := time.Parse(time.RFC3339Nano, got.LoadedAt); err != nil || at.IsZero() || at.After(time.Now()) {
		t.Fatalf("loaded_at %q: %v", got.LoadedAt, err)
	}
	want := h.engine.Rules()
	if len(got.Rules) != len(want) || len(want) < 30 {
		t.Fatalf("%d rules listed, the engine has %d", len(got.Rules), len(want))
	}
	for i, w := range want {
		g := got.Rules[i]
		if g.ID != w.ID || g.Title != w.Title || g.Description != w.Description || g.Severity != w.Severity ||
			g.Entrypoint != string(w.Entrypoint) || g.Location != w.Location || g.Mode != policies.ModeDeny {
			t.Errorf("rule %d: %+v, want %+v in mode deny", i, g, w)
		}
	}

	agent := h.mint(token.RoleAgent, "reader")
	sid, session := h.create(agent, nil)
	for who, tok := range map[string]string{"an agent": agent, "a session (" + sid + ")": session} {
		r := h.do(http.MethodGet, "/v1/policy", tok, nil)
		if r.status != http.StatusForbidden || !strings.Contains(string(r.body), `"rule_ids":["T2"]`) || strings.Contains(string(r.body), `"rules"`) {
			t.Errorf("GET /v1/policy as %s: %d %s, want 403 T2 and no rule list", who, r.status, r.body)
		}
	}
}

// C1 in the gateway: a route the policy's table serves under an advertised
// capability is registered, and a registered protected route is in the
// table under an advertised capability. What GET /v1/capabilities says is
// what answers.
func TestAdvertisedRoutesAreExactlyTheServedOnes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	raw, err := fs.ReadFile(policies.EmbeddedBundle(), "data.json")
	if err != nil {
		t.Fatal(err)
	}
	var data struct {
		Sandgate struct {
			Config struct {
				Capabilities []string `json:"capabilities"`
				// method -> Echo route template -> entry
				Routes map[string]map[string]struct {
					Capability string `json:"capability"`
				} `json:"routes"`
			} `json:"config"`
		} `json:"sandgate"`
	}
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	cfg := data.Sandgate.Config
	registered := map[string]bool{}
	for _, rt := range h.srv.Echo().Routes() {
		if !publicPaths[rt.Path] {
			registered[rt.Method+" "+rt.Path] = true
		}
	}
	table := map[string]string{} // "METHOD template" -> capability
	for method, byRoute := range cfg.Routes {
		for route, r := range byRoute {
			table[method+" "+route] = r.Capability
		}
	}
	for key, capability := range table {
		advertised := slices.Contains(cfg.Capabilities, capability)
		if advertised != registered[key] {
			t.Errorf("%s: capability %s advertised %t, route registered %t", key, capability, advertised, registered[key])
		}
	}
	for key := range registered {
		if _, ok := table[key]; !ok {
			t.Errorf("%s is registered but not in the policy's route table", key)
		}
	}
}
