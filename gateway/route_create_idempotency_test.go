package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"sandgate/gateway/apitest"
	"sandgate/gateway/token"
)

// createKeyed is POST /v1/sandboxes with an Idempotency-Key.
func (h *harness) createKeyed(tok, key string, body map[string]any) apitest.Reply {
	h.t.Helper()
	return h.gw.DoWith(apitest.Request{Method: http.MethodPost, Path: "/v1/sandboxes", Token: tok, Body: body,
		Header: map[string]string{"Idempotency-Key": key}})
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
	if first.Status != http.StatusCreated || first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first create: %d %s", first.Status, first.Body)
	}
	sbx := first.JSON(t)
	id, session := sbx["id"].(string), sbx["token"].(string)

	// A repeat (a longer wait changes nothing) answers the same sandbox, without its token.
	again := h.createKeyed(agent, "job-42", map[string]any{"labels": map[string]string{"task": "retry"}, "ttl_seconds": 1800, "wait_seconds": 30})
	rep := again.JSON(t)
	if again.Status != http.StatusOK || rep["id"] != id || rep["token_reissued"] != false || rep["token"] != nil || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a repeat: %d %s", again.Status, again.Body)
	}
	if r := h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, session, nil); r.Status != http.StatusOK {
		t.Fatalf("the first token after a repeat: %d", r.Status)
	}

	// Another body under the key is refused.
	other := h.createKeyed(agent, "job-42", map[string]any{"ttl_seconds": 600})
	if other.Status != http.StatusUnprocessableEntity || other.JSON(t)["code"] != "idempotency_key_reused" {
		t.Fatalf("another body under the key: %d %s", other.Status, other.Body)
	}

	// The key is the principal's: another agent's same key is its own create.
	agent2 := h.mint(token.RoleAgent, "idem-2")
	if r := h.createKeyed(agent2, "job-42", body); r.Status != http.StatusCreated || r.JSON(t)["id"] == id {
		t.Fatalf("another principal's key: %d %s", r.Status, r.Body)
	}

	// reissue_token: a fresh session token; the old one is revoked.
	fresh := h.createKeyed(agent, "job-42", map[string]any{"labels": map[string]string{"task": "retry"}, "ttl_seconds": 1800, "reissue_token": true})
	f := fresh.JSON(t)
	newToken, _ := f["token"].(string)
	if fresh.Status != http.StatusOK || f["id"] != id || f["token_reissued"] != true || newToken == "" || newToken == session {
		t.Fatalf("reissue: %d %s", fresh.Status, fresh.Body)
	}
	if r := h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, session, nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("the old token after a reissue: %d %s", r.Status, r.Body)
	}
	if r := h.gw.Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", newToken, map[string]any{"argv": []string{"echo", "ok"}}); r.Status != http.StatusOK {
		t.Fatalf("the new token: %d %s", r.Status, r.Body)
	}

	// reissue_token without a key is the policy's refusal (T4); a bad key is a 400 naming the header.
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, "/v1/sandboxes", agent, map[string]any{"reissue_token": true}), http.StatusForbidden, "policy_denied", "T4")
	for _, bad := range []string{strings.Repeat("k", 256), "has space", "tab\tkey"} {
		r := h.createKeyed(agent, bad, body)
		if m := apitest.ExpectProblem(t, r, http.StatusBadRequest, "invalid_request"); m["field"] != "Idempotency-Key" {
			t.Fatalf("key %q: %v", bad, m)
		}
	}

	// Destroyed, the sandbox is still the key's answer within the window.
	if r := h.gw.Do(http.MethodDelete, "/v1/sandboxes/"+id, newToken, nil); r.Status != http.StatusNoContent {
		t.Fatalf("destroy: %d", r.Status)
	}
	if r := h.createKeyed(agent, "job-42", body); r.Status != http.StatusOK || r.JSON(t)["state"] != "ended" || r.JSON(t)["token"] != nil {
		t.Fatalf("a repeat after destroy: %d %s", r.Status, r.Body)
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
			if r.Status != http.StatusCreated && r.Status != http.StatusOK {
				t.Errorf("racer: %d %s", r.Status, r.Body)
				return
			}
			if r.Status == http.StatusCreated {
				created++
			}
			var m map[string]any
			_ = json.Unmarshal(r.Body, &m)
			id, _ := m["id"].(string)
			ids[id]++
		}()
	}
	wg.Wait()
	if created != 1 || len(ids) != 1 {
		t.Fatalf("%d creates answered 201, ids %v; want one sandbox", created, ids)
	}
	list := h.gw.Do(http.MethodGet, "/v1/sandboxes", agent, nil).JSON(t)
	if n := len(list["sandboxes"].([]any)); n != 1 {
		t.Fatalf("%d sandboxes listed, want 1: %v", n, list)
	}
}
