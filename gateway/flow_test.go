package gateway_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sandgate/gateway/apitest"
	"sandgate/gateway/token"
	"sandgate/store"
)

func TestTheAgentFlowEndToEnd(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	agent := h.mint(token.RoleAgent, "agent-a")

	r := h.gw.Do(http.MethodPost, "/v1/sandboxes", agent, map[string]any{"labels": map[string]string{"task": "demo"}})
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	created := r.JSON(t)
	for _, k := range []string{"id", "state", "node", "profile", "network", "created_at", "expires_at", "ceiling_at", "labels", "token"} {
		if _, ok := created[k]; !ok {
			t.Fatalf("create response lacks %q: %s", k, r.Body)
		}
	}
	if created["state"] != "running" || created["profile"] != "strict" || created["network"] != "none" {
		t.Fatalf("unexpected record: %s", r.Body)
	}
	id, session := created["id"].(string), created["token"].(string)

	// status with the session token, without the token in the answer
	r = h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, session, nil)
	if r.Status != http.StatusOK || strings.Contains(string(r.Body), session) || r.JSON(t)["token"] != nil {
		t.Fatalf("status: %d %s", r.Status, r.Body)
	}

	// exec echo hi
	r = h.gw.Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": []string{"echo", "hi"}})
	if r.Status != http.StatusOK {
		t.Fatalf("exec: %d %s", r.Status, r.Body)
	}
	ex := r.JSON(t)
	if ex["exit_code"] != float64(0) || ex["stdout"] != "hi\n" || ex["stderr"] != "" || ex["timed_out"] != false || ex["stdout_truncated"] != false {
		t.Fatalf("exec result: %s", r.Body)
	}

	// logs
	r = h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id+"/logs?stream=stdout&tail_bytes=4096", session, nil)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), "task started") {
		t.Fatalf("logs: %d %q", r.Status, r.Body)
	}

	// the session token is refused on another sandbox, on list and on extend
	other := h.gw.Create(agent, nil).ID
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/sandboxes/"+other, session, nil), http.StatusForbidden, "policy_denied", "T2")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, "/v1/sandboxes/"+other+"/exec", session, map[string]any{"argv": []string{"true"}}), http.StatusForbidden, "policy_denied", "T2")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/sandboxes", session, nil), http.StatusForbidden, "policy_denied", "T2")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, "/v1/sandboxes/"+id+"/extend", session, map[string]any{"ttl_seconds": 600}), http.StatusForbidden, "policy_denied", "T2")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, "/v1/sandboxes", session, map[string]any{}), http.StatusForbidden, "policy_denied", "T2")

	// destroy with the session token, then the token is refused
	r = h.gw.Do(http.MethodDelete, "/v1/sandboxes/"+id, session, nil)
	if r.Status != http.StatusNoContent {
		t.Fatalf("destroy: %d %s", r.Status, r.Body)
	}
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, session, nil), http.StatusUnauthorized, "unauthenticated", "T4")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": []string{"true"}}), http.StatusUnauthorized, "unauthenticated", "T4")

	// the operator still sees the ended record; the job is gone; budget released
	r = h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, h.operator, nil)
	if r.Status != http.StatusOK || r.JSON(t)["state"] != "ended" || r.JSON(t)["end_reason"] != "destroyed" {
		t.Fatalf("operator status after destroy: %d %s", r.Status, r.Body)
	}
	for _, j := range h.sim.Jobs() {
		if strings.HasSuffix(j, id) {
			t.Fatalf("job %s left after destroy", j)
		}
	}
	// a second destroy by the operator is idempotent
	if r := h.gw.Do(http.MethodDelete, "/v1/sandboxes/"+id, h.operator, nil); r.Status != http.StatusNoContent {
		t.Fatalf("second destroy: %d %s", r.Status, r.Body)
	}
	// the agent lists only its own live sandboxes
	other2 := h.gw.Create(h.operator, nil).ID
	r = h.gw.Do(http.MethodGet, "/v1/sandboxes", agent, nil)
	list := r.JSON(t)["sandboxes"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["id"] != other {
		t.Fatalf("agent list: %s (operator's is %s)", r.Body, other2)
	}
	// ... and is refused the operator's sandbox
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/sandboxes/"+other2, agent, nil), http.StatusForbidden, "policy_denied", "T2")
	assertBudgetMatchesLiveRecords(t, h)
}

func TestExpiryIsRefusedOneSecondPastExpiresAtWithTheReaperStopped(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{fake: true})
	id, session := h.gw.Create(h.operator, map[string]any{"ttl_seconds": 120}).IDToken()
	rec, err := h.st.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(rec.ExpiresAt.Sub(h.clock.Now()) - time.Second)
	if r := h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, session, nil); r.Status != http.StatusOK {
		t.Fatalf("one second before expiry: %d %s", r.Status, r.Body)
	}
	h.clock.Advance(2 * time.Second) // one second past expires_at
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, session, nil), http.StatusGone, "sandbox_expired", "T3")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", h.operator, map[string]any{"argv": []string{"true"}}), http.StatusGone, "sandbox_expired", "T3")
	// the record is still live: only the reaper ends it, and it did not run
	if rec, _ := h.st.Get(context.Background(), id); rec.State != store.StateRunning {
		t.Fatalf("state %s, want running (the reaper did not run)", rec.State)
	}
	n, err := h.srv.Reap(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("reap: %d %v", n, err)
	}
	if rec, _ := h.st.Get(context.Background(), id); rec.State != store.StateEnded || rec.EndReason != "expired" {
		t.Fatalf("after reap: %s %s", rec.State, rec.EndReason)
	}
	assertBudgetMatchesLiveRecords(t, h)
}

func TestExtendIsClampedAtTheCeiling(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{fake: true})
	id := h.gw.Create(h.operator, map[string]any{"ttl_seconds": 600}).ID
	r := h.gw.Do(http.MethodPost, "/v1/sandboxes/"+id+"/extend", h.operator, map[string]any{"ttl_seconds": 1200})
	if r.Status != http.StatusOK || r.JSON(t)["clamped"] != false {
		t.Fatalf("extend: %d %s", r.Status, r.Body)
	}
	want := h.clock.Now().Add(1200 * time.Second).UTC().Format(time.RFC3339)
	if got := r.JSON(t)["expires_at"]; got != want {
		t.Fatalf("expires_at %v, want %s", got, want)
	}
	h.clock.Advance(500 * time.Second) // now + 4h passes the ceiling (creation + 4h)
	r = h.gw.Do(http.MethodPost, "/v1/sandboxes/"+id+"/extend", h.operator, map[string]any{"ttl_seconds": 14400})
	m := r.JSON(t)
	if r.Status != http.StatusOK || m["clamped"] != true || m["expires_at"] != m["ceiling_at"] {
		t.Fatalf("extend past the ceiling: %d %s", r.Status, r.Body)
	}
}

func TestEveryDecisionIsLoggedAndCounted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id, session := h.gw.Create(h.operator, nil).IDToken()
	h.gw.Do(http.MethodGet, "/v1/sandboxes", session, nil) // a deny
	data, err := os.ReadFile(filepath.Join(h.dataDir, "decisions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var allows, denies, admissions int
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		for _, k := range []string{"time", "decision_id", "entrypoint", "bundle_revision", "allow", "rule_ids", "input_sha256", "duration_us", "principal"} {
			if _, ok := e[k]; !ok {
				t.Fatalf("entry lacks %s: %s", k, line)
			}
		}
		if len(e["input_sha256"].(string)) != 64 {
			t.Fatalf("input_sha256 is not a SHA-256: %s", line)
		}
		switch {
		case e["entrypoint"] == "admission":
			admissions++
		case e["allow"] == true:
			allows++
		default:
			denies++
			if e["route"] != "/v1/sandboxes" || !strings.Contains(line, `"T2"`) || e["principal"] != "session:"+id {
				t.Fatalf("deny entry: %s", line)
			}
		}
	}
	if allows != 1 || denies != 1 || admissions != 1 {
		t.Fatalf("allows %d, denies %d, admissions %d; want 1 each", allows, denies, admissions)
	}
	m := h.gw.Do(http.MethodGet, "/metrics", "", nil)
	for _, want := range []string{
		`sandgate_policy_decisions_total{entrypoint="authz",result="deny"} 1`,
		`sandgate_policy_violations_total{entrypoint="authz",mode="deny",result="deny",rule="T2"} 1`,
		`sandgate_sandboxes{state="running"} 1`,
		`sandgate_nomad_request_duration_seconds_count{op="register"} 1`,
		`sandgate_http_request_duration_seconds_count{method="POST",route="/v1/sandboxes",status="201"} 1`,
	} {
		if !strings.Contains(string(m.Body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestTokenRefusals(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{fake: true})
	ctx := context.Background()
	s := h.engine.Settings()

	// expired: past exp and the 30 s leeway
	short, c, err := h.iss.Mint(token.MintRequest{Role: token.RoleOperator, Subject: "brief", Scopes: s.RoleScopes("operator"), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.st.PutToken(ctx, store.Token{JTI: c.ID, Role: "operator", Subject: "brief", CreatedAt: c.IssuedAt.Time, ExpiresAt: c.ExpiresAt.Time}); err != nil {
		t.Fatal(err)
	}
	if r := h.gw.Do(http.MethodGet, "/v1/sandboxes", short, nil); r.Status != http.StatusOK {
		t.Fatalf("fresh token: %d %s", r.Status, r.Body)
	}
	h.clock.Advance(91 * time.Second)
	r := apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/sandboxes", short, nil), http.StatusUnauthorized, "token_expired")
	if strings.Contains(fmt.Sprint(r), short) {
		t.Fatal("the problem echoes the token")
	}

	// signed by another key
	_, otherKey, _ := ed25519.GenerateKey(rand.Reader)
	cfg := token.DefaultConfig()
	cfg.Key, cfg.Now = otherKey, h.clock.Now
	forger, _ := token.New(cfg)
	forged, _, _ := forger.Mint(token.MintRequest{Role: token.RoleOperator, Subject: "ops", Scopes: s.RoleScopes("operator"), TTL: time.Hour})
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/sandboxes", forged, nil), http.StatusUnauthorized, "unauthenticated")

	// well signed but never recorded (or revoked): T4
	unrecorded, _, _ := h.iss.Mint(token.MintRequest{Role: token.RoleOperator, Subject: "ghost", Scopes: s.RoleScopes("operator"), TTL: time.Hour})
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/sandboxes", unrecorded, nil), http.StatusUnauthorized, "unauthenticated", "T4")
	revoked := h.mint(token.RoleAgent, "gone")
	claims, err := h.iss.Verify(revoked)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.st.RevokeToken(ctx, claims.ID, h.clock.Now()); err != nil {
		t.Fatal(err)
	}
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, "/v1/sandboxes", revoked, map[string]any{}), http.StatusUnauthorized, "unauthenticated", "T4")

	// not a bearer token at all
	req, _ := http.NewRequest(http.MethodGet, h.url+"/v1/sandboxes", nil)
	req.Header.Set("Authorization", "Basic b3BzOnB3")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("basic auth: %d %v", resp.StatusCode, resp.Header)
	}
}
