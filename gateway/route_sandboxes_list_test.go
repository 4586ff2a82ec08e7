package gateway_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"sandgate/gateway/apitest"
	"sandgate/gateway/token"
	"sandgate/store"
)

// page reads one page of GET /v1/sandboxes: the ids and the next cursor.
func (h *harness) page(tok, query string) ([]string, string) {
	h.t.Helper()
	r := h.gw.Do(http.MethodGet, "/v1/sandboxes"+query, tok, nil)
	if r.Status != http.StatusOK {
		h.t.Fatalf("list %s: %d %s", query, r.Status, r.Body)
	}
	m := r.JSON(h.t)
	var ids []string
	for _, s := range m["sandboxes"].([]any) {
		ids = append(ids, s.(map[string]any)["id"].(string))
	}
	next, _ := m["next_cursor"].(string)
	return ids, next
}

func TestTheListIsPagedAndFiltered(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{fake: true})
	agent := h.mint(token.RoleAgent, "lister")
	var opIDs, agentIDs []string
	for i := range 5 {
		h.clock.Advance(time.Second) // distinct creation times: the order is by creation
		id := h.gw.Create(h.operator, map[string]any{"labels": map[string]string{"batch": "b" + string(rune('0'+i%2))}}).ID
		opIDs = append(opIDs, id)
	}
	for range 2 {
		h.clock.Advance(time.Second)
		id := h.gw.Create(agent, nil).ID
		agentIDs = append(agentIDs, id)
	}
	// the operator pages through all seven, two at a time, oldest first
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		q := "?limit=2"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		ids, next := h.page(h.operator, q)
		got = append(got, ids...)
		if next == "" {
			if pages != 3 {
				t.Fatalf("%d pages of 2 for 7 sandboxes", pages+1)
			}
			break
		}
		cursor = next
	}
	if want := slices.Concat(opIDs, agentIDs); !slices.Equal(got, want) {
		t.Fatalf("pages %v, want %v", got, want)
	}
	// filters: label, principal, state
	if ids, _ := h.page(h.operator, "?label=batch=b1"); !slices.Equal(ids, []string{opIDs[1], opIDs[3]}) {
		t.Fatalf("label filter: %v", ids)
	}
	if ids, _ := h.page(h.operator, "?principal=agent:lister"); !slices.Equal(ids, agentIDs) {
		t.Fatalf("principal filter: %v", ids)
	}
	if r := h.gw.Do(http.MethodDelete, "/v1/sandboxes/"+opIDs[0], h.operator, nil); r.Status != http.StatusNoContent {
		t.Fatalf("destroy: %d %s", r.Status, r.Body)
	}
	if ids, _ := h.page(h.operator, "?state=ended"); !slices.Equal(ids, []string{opIDs[0]}) {
		t.Fatalf("state=ended: %v", ids)
	}
	if ids, _ := h.page(h.operator, ""); len(ids) != 6 || slices.Contains(ids, opIDs[0]) {
		t.Fatalf("the default lists live ones only: %v", ids)
	}
	if ids, _ := h.page(h.operator, "?all=true"); len(ids) != 7 {
		t.Fatalf("all=true: %v", ids)
	}
	// an agent sees its own, whatever it asks for
	if ids, _ := h.page(agent, "?all=true"); !slices.Equal(ids, agentIDs) {
		t.Fatalf("the agent's list: %v", ids)
	}
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/sandboxes?principal=operator:ops", agent, nil), http.StatusBadRequest, "invalid_request")
	// bad parameters name themselves
	for q, field := range map[string]string{
		"?limit=0": "limit", "?limit=1001": "limit", "?limit=x": "limit", "?state=zombie": "state",
		"?state=ended,ended": "state", "?label=nokey": "label", "?cursor=AAAA": "cursor", "?all=yes": "all", "?sort=id": "sort",
	} {
		p := apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/sandboxes"+q, h.operator, nil), http.StatusBadRequest, "invalid_request")
		if p["field"] != field {
			t.Errorf("%s: field %v, want %s", q, p["field"], field)
		}
	}
	// a cursor of another listing is refused, not misread
	_, next := h.page(h.operator, "?limit=1")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/sandboxes?limit=1&state=ended&cursor="+next, h.operator, nil), http.StatusBadRequest, "invalid_request")
}

// Ended records are pruned once their retention has passed; live ones,
// and ended ones within it, stay.
func TestTheReaperPrunesEndedRecordsPastTheirRetention(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{fake: true})
	old := h.gw.Create(h.operator, nil).ID
	live := h.gw.Create(h.operator, map[string]any{"ttl_seconds": 4 * 3600}).ID
	if r := h.gw.Do(http.MethodDelete, "/v1/sandboxes/"+old, h.operator, nil); r.Status != http.StatusNoContent {
		t.Fatalf("destroy: %d %s", r.Status, r.Body)
	}
	h.clock.Advance(3 * time.Hour)
	recent := h.gw.Create(h.operator, nil).ID
	if r := h.gw.Do(http.MethodDelete, "/v1/sandboxes/"+recent, h.operator, nil); r.Status != http.StatusNoContent {
		t.Fatalf("destroy: %d %s", r.Status, r.Body)
	}
	h.clock.Advance(7*24*time.Hour - 2*time.Hour) // old ended 7 d + 1 h ago, recent 7 d - 2 h ago
	if _, err := h.srv.Reap(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.Get(context.Background(), old); err == nil {
		t.Fatal("a record ended past its retention is still stored")
	}
	// recent is within its retention; live expired in this pass and ended
	// just now, so it is kept for the whole retention too
	for _, id := range []string{live, recent} {
		if rec, err := h.st.Get(context.Background(), id); err != nil || rec.State != store.StateEnded {
			t.Fatalf("%s: %s %v", id, rec.State, err)
		}
	}
	counts, err := h.st.Counts(context.Background())
	if err != nil || counts[store.StateEnded] != 2 || counts[store.StateRunning] != 0 {
		t.Fatalf("counts %v %v", counts, err)
	}
	fresh := h.mint(token.RoleOperator, "ops") // the harness operator's token lasts a day
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/sandboxes/"+old, fresh, nil), http.StatusNotFound, "sandbox_not_found")
}
