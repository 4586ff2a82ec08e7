package gateway_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sandgate/gateway/apitest"
	"sandgate/gateway/audit"
	"sandgate/gateway/gatewaytest"
	"sandgate/gateway/token"
)

// With inputs on, every decision's line keeps its input, and no secret
// ever reaches the file: no token, no token digest, no exec stdin, no
// environment value.
func TestTheDecisionLogKeepsInputsButNoSecret(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{logInputs: true})
	agent := h.mint(token.RoleAgent, "ci")
	id, session := h.gw.Create(agent, nil).IDToken()
	const stdin, envValue = "STDIN-0f3a-must-not-be-logged", "ENV-9c1d-must-not-be-logged"
	r := h.gw.Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{
		"argv": []string{"cat"}, "stdin": stdin, "env": map[string]string{"API_KEY": envValue},
	})
	if r.Status != http.StatusOK {
		t.Fatalf("exec: %d %s", r.Status, r.Body)
	}
	raw, err := os.ReadFile(filepath.Join(h.dataDir, gatewaytest.DecisionLogFile))
	if err != nil {
		t.Fatal(err)
	}
	digest := func(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }
	for name, secret := range map[string]string{
		"the operator token": h.operator, "the agent token": agent, "the session token": session,
		"the session token's digest": digest(session), "the agent token's digest": digest(agent),
		"exec stdin": stdin, "an environment value": envValue,
	} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the decision log holds %s", name)
		}
	}
	// ... and it does hold the exec's input, with the env counted.
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var e audit.Entry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		if e.Entrypoint == "authz" && e.Route == "/v1/sandboxes/:id/exec" {
			found = true
			if !strings.Contains(string(e.Input), `"argv":["cat"]`) || !strings.Contains(string(e.Input), `"env_count":1`) {
				t.Fatalf("the exec decision's input: %s", e.Input)
			}
		}
		if len(e.Input) == 0 && e.InputOmitted == "" {
			t.Fatalf("a decision without its input: %s", line)
		}
	}
	if !found {
		t.Fatal("no exec decision in the log")
	}
}

// page is GET /v1/decisions as a client reads it.
type page struct {
	Decisions  []audit.Entry `json:"decisions"`
	NextCursor string        `json:"next_cursor"`
}

func TestDecisionsCanBeQueriedAndPaged(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{logInputs: true})
	agent := h.mint(token.RoleAgent, "ci")
	id, session := h.gw.Create(agent, nil).IDToken()
	// Three refusals: a session token listing, and creating, twice.
	for range 3 {
		h.gw.Do(http.MethodGet, "/v1/sandboxes", session, nil)
	}
	get := func(q string) page {
		t.Helper()
		r := h.gw.Do(http.MethodGet, "/v1/decisions?"+q, h.operator, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("?%s: %d %s", q, r.Status, r.Body)
		}
		var p page
		if err := json.Unmarshal(r.Body, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	denied := get("allow=false&rule=T2&principal=session:" + id)
	if len(denied.Decisions) != 3 {
		t.Fatalf("the session token's T2 refusals: %+v", denied.Decisions)
	}
	for _, e := range denied.Decisions {
		if e.Allow || e.Route != "/v1/sandboxes" || len(e.Violations) == 0 || e.Input != nil {
			t.Fatalf("a refusal as listed: %+v", e)
		}
	}
	// Two at a time: two pages, newest first, nothing twice.
	first := get("allow=false&rule=T2&limit=2")
	if len(first.Decisions) != 2 || first.NextCursor == "" {
		t.Fatalf("first page: %+v", first)
	}
	second := get("allow=false&rule=T2&limit=2&cursor=" + first.NextCursor)
	if len(second.Decisions) != 1 || second.NextCursor != "" || second.Decisions[0].DecisionID == first.Decisions[1].DecisionID {
		t.Fatalf("second page: %+v", second)
	}
	if !first.Decisions[0].Time.After(first.Decisions[1].Time) && !first.Decisions[0].Time.Equal(first.Decisions[1].Time) {
		t.Fatalf("not newest first: %+v", first.Decisions)
	}
	// Inputs only on request.
	withInputs := get("entrypoint=admission&inputs=true")
	if len(withInputs.Decisions) != 1 || !strings.Contains(string(withInputs.Decisions[0].Input), `"TaskGroups"`) {
		t.Fatalf("the admission decision with its input: %+v", withInputs.Decisions)
	}
	// A time window.
	until := withInputs.Decisions[0].Time.Format("2006-01-02T15:04:05.999999999Z07:00")
	if p := get("entrypoint=admission&until=" + until); len(p.Decisions) != 0 {
		t.Fatalf("until excludes its own instant: %+v", p.Decisions)
	}
	if p := get("entrypoint=admission&since=" + until); len(p.Decisions) != 1 {
		t.Fatalf("since includes its own instant: %+v", p.Decisions)
	}
	// Bad parameters are 400s naming them.
	for q, field := range map[string]string{
		"since=yesterday": "since", "until=1": "until", "allow=yes": "allow", "limit=0": "limit",
		"cursor=not-a-cursor": "cursor", "inputs=1": "inputs", "rule=" + strings.Repeat("x", 40): "rule",
	} {
		m := apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/decisions?"+q, h.operator, nil), http.StatusBadRequest, "invalid_request")
		if m["field"] != field {
			t.Errorf("?%s: field %v, want %s", q, m["field"], field)
		}
	}
}
