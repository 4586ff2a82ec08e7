package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"sandgate/gateway/token"
)

// createKeyed is POST /v1/sandboxes with an Idempotency-Key.
func (h *harness) createKeyed(tok, key string, body map[string]any) response {
	h.t.Helper()
	data, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, h.url+"/v1/sandboxes", bytes.NewReader(data))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: out}
}

// The same key and body from the same principal answer the same sandbox;
// another body is 422; another principal's key is its own; reissue_token
// hands a fresh session token and revokes the old one.
func TestAnIdempotencyKeyAnswersTheSandboxItCreated(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	agent := h.mint(token.RoleAgent, "idem")
	body := map[string]any{"labels": map[string]string{"task": "retry"}, "ttl_seconds": 1800}

	first := h.createKeyed(agent, "job-42", body)
	if first.status != http.StatusCreated || first.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first create: %d %s", first.status, first.body)
	}
	sbx := first.json(t)
	id, session := sbx["id"].(string), sbx["token"].(string)

	// A repeat (a longer wait changes nothing) answers the same sandbox, without its token.
	again := h.createKeyed(agent, "job-42", map[string]any{"labels": map[string]string{"task": "retry"}, "ttl_seconds": 1800, "wait_seconds": 30})
	rep := again.json(t)
	if again.status != http.StatusOK || rep["id"] != id || rep["token_reissued"] != false || rep["token"] != nil || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a repeat: %d %s", again.status, again.body)
	}
	if r := h.do(http.MethodGet, "/v1/sandboxes/"+id, session, nil); r.status != http.StatusOK {
		t.Fatalf("the first token after a repeat: %d", r.status)
	}

	// Another body under the key is refused.
	other := h.createKeyed(agent, "job-42", map[string]any{"ttl_seconds": 600})
	if other.status != http.StatusUnprocessableEntity || other.json(t)["code"] != "idempotency_key_reused" {
		t.Fatalf("another body under the key: %d %s", other.status, other.body)
	}

	// The key is the principal's: another agent's same key is its own create.
	agent2 := h.mint(token.RoleAgent, "idem-2")
	if r := h.createKeyed(agent2, "job-42", body); r.status != http.StatusCreated || r.json(t)["id"] == id {
		t.Fatalf("another principal's key: %d %s", r.status, r.body)
	}

	// reissue_token: a fresh session token; the old one is revoked.
	fresh := h.createKeyed(agent, "job-42", map[string]any{"labels": map[string]string{"task": "retry"}, "ttl_seconds": 1800, "reissue_token": true})
	f := fresh.json(t)
	newToken, _ := f["token"].(string)
	if fresh.status != http.StatusOK || f["id"] != id || f["token_reissued"] != true || newToken == "" || newToken == session {
		t.Fatalf("reissue: %d %s", fresh.status, fresh.body)
	}
	if r := h.do(http.MethodGet, "/v1/sandboxes/"+id, session, nil); r.status != http.StatusUnauthorized {
		t.Fatalf("the old token after a reissue: %d %s", r.status, r.body)
	}
	if r := h.do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", newToken, map[string]any{"argv": []string{"echo", "ok"}}); r.status != http.StatusOK {
		t.Fatalf("the new token: %d %s", r.status, r.body)
	}

	// reissue_token without a key is the policy's refusal (T4); a bad key is a 400 naming the header.
	expectProblem(t, h.do(http.MethodPost, "/v1/sandboxes", agent, map[string]any{"reissue_token": true}), http.StatusForbidden, "policy_denied", "T4")
	for _, bad := range []string{strings.Repeat("k", 256), "has space", "tab\tkey"} {
		r := h.createKeyed(agent, bad, body)
		if m := expectProblem(t, r, http.StatusBadRequest, "invalid_request"); m["field"] != "Idempotency-Key" {
			t.Fatalf("key %q: %v", bad, m)
		}
	}

	// Destroyed, the sandbox is still the key's answer within the window.
	if r := h.do(http.MethodDelete, "/v1/sandboxes/"+id, newToken, nil); r.status != http.StatusNoContent {
		t.Fatalf("destroy: %d", r.status)
	}
	if r := h.createKeyed(agent, "job-42", body); r.status != http.StatusOK || r.json(t)["state"] != "ended" || r.json(t)["token"] != nil {
		t.Fatalf("a repeat after destroy: %d %s", r.status, r.body)
	}
}

// Racing repeats of one key create exactly one sandbox: every answer names it.
func TestRacingRepeatsOfAnIdempotencyKeyCreateOneSandbox(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	agent := h.mint(token.RoleAgent, "racer")
	const racers = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		ids     = map[string]int{}
		created int
	)
	for range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := h.createKeyed(agent, "once", map[string]any{})
			mu.Lock()
			defer mu.Unlock()
			if r.status != http.StatusCreated && r.status != http.StatusOK {
				t.Errorf("racer: %d %s", r.status, r.body)
				return
			}
			if r.status == http.StatusCreated {
				created++
			}
			var m map[string]any
			_ = json.Unmarshal(r.body, &m)
			id, _ := m["id"].(string)
			ids[id]++
		}()
	}
	wg.Wait()
	if created != 1 || len(ids) != 1 {
		t.Fatalf("%d creates answered 201, ids %v; want one sandbox", created, ids)
	}
	list := h.do(http.MethodGet, "/v1/sandboxes", agent, nil).json(t)
	if n := len(list["sandboxes"].([]any)); n != 1 {
		t.Fatalf("%d sandboxes listed, want 1: %v", n, list)
	}
}
