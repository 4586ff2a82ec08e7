package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"sandgate/gateway/apitest"
	"sandgate/store"
)

// A node that goes down: exec answers 503 with Retry-After and the sandbox
// stays (its node may return); once Nomad has replaced the allocation, the
// allocation watch ends the sandbox (reason lost) and releases its budget.
// The same sequence runs on the real agent in test/e2e (TestALostNode).
func TestALostNodeIsUnavailableThenTheSandboxEnds(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id, session := h.gw.Create(h.operator, map[string]any{"node": "worker-1"}).IDToken()
	if err := h.sim.SetNodeStatus("worker-1", "down"); err != nil {
		t.Fatal(err)
	}
	r := h.gw.Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": []string{"true"}})
	apitest.ExpectProblem(t, r, http.StatusServiceUnavailable, "nomad_unavailable")
	if r.Header.Get("Retry-After") == "" {
		t.Fatalf("503 without Retry-After: %s", r.Body)
	}
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id+"/logs", session, nil), http.StatusServiceUnavailable, "nomad_unavailable")
	if n, err := h.srv.WatchAllocations(t.Context()); err != nil || n != 0 {
		t.Fatalf("watch while the node is down: %d ended, %v", n, err)
	}
	if rec, _ := h.st.Get(t.Context(), id); rec.State != store.StateRunning {
		t.Fatalf("while the node is down: %+v", rec)
	}
	if err := h.sim.SetNodeStatus("worker-1", "ready"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := h.srv.WatchAllocations(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watch never ended the sandbox whose allocation was replaced")
		}
		time.Sleep(50 * time.Millisecond)
	}
	rec, _ := h.st.Get(t.Context(), id)
	if rec.State != store.StateEnded || rec.EndReason != "lost" || !strings.Contains(rec.LastError, "replaced") {
		t.Fatalf("the lost sandbox: %+v", rec)
	}
	if u, _ := h.st.NodeUsage(t.Context(), "worker-1"); u != (store.Usage{}) {
		t.Fatalf("budget still held: %+v", u)
	}
	if len(h.sim.Jobs()) != 0 {
		t.Fatalf("the job was not purged: %v", h.sim.Jobs())
	}
	// Its token was revoked with the end.
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, session, nil), http.StatusUnauthorized, "unauthenticated")
}

// A call that finds the allocation already replaced ends the sandbox at
// once and says so: 410 sandbox_lost.
func TestExecOnAReplacedAllocationEndsTheSandbox(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id, session := h.gw.Create(h.operator, map[string]any{"node": "worker-1"}).IDToken()
	for _, st := range []string{"down", "ready"} {
		if err := h.sim.SetNodeStatus("worker-1", st); err != nil {
			t.Fatal(err)
		}
	}
	var r apitest.Reply
	deadline := time.Now().Add(10 * time.Second)
	for {
		r = h.gw.Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": []string{"true"}})
		if r.Status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the replacement is being placed
	}
	apitest.ExpectProblem(t, r, http.StatusGone, "sandbox_lost")
	if rec, _ := h.st.Get(t.Context(), id); rec.EndReason != "lost" {
		t.Fatalf("after the 410: %+v", rec)
	}
}

// staleStore answers the live list with the records it was given while
// they are set: a watch pass that read the list just before another
// replica (or a request) ended one of them.
type staleStore struct {
	store.Store
	mu    sync.Mutex
	stale []store.Sandbox
}

func (s *staleStore) List(ctx context.Context, f store.Filter) ([]store.Sandbox, error) {
	s.mu.Lock()
	stale := s.stale
	s.mu.Unlock()
	if f.LiveOnly && stale != nil {
		return stale, nil
	}
	return s.Store.List(ctx, f)
}

// A watch pass that finds complete the allocation of a sandbox destroyed
// since it read the list does not count it lost, and the record keeps the
// end the destroy gave it.
func TestAWatchThatLostTheRaceToADestroyCountsNothingLost(t *testing.T) {
	t.Parallel()
	stale := &staleStore{}
	h := newHarness(t, harnessOptions{wrapStore: func(st store.Store) store.Store { stale.Store = st; return stale }})
	id, session := h.gw.Create(h.operator, map[string]any{"node": "worker-1"}).IDToken()
	running, err := h.st.List(t.Context(), store.Filter{LiveOnly: true})
	if err != nil || len(running) != 1 || running[0].AllocID == "" {
		t.Fatalf("the live list: %+v %v", running, err)
	}
	if r := h.gw.Do(http.MethodDelete, "/v1/sandboxes/"+id, session, nil); r.Status != http.StatusOK && r.Status != http.StatusNoContent {
		t.Fatalf("destroy: %d %s", r.Status, r.Body)
	}
	stale.mu.Lock()
	stale.stale = running
	stale.mu.Unlock()
	n, err := h.srv.WatchAllocations(t.Context())
	if err != nil || n != 0 {
		t.Fatalf("the watch on the stale list: %d ended, %v; want none", n, err)
	}
	if rec, _ := h.st.Get(t.Context(), id); rec.State != store.StateEnded || rec.EndReason != "destroyed" {
		t.Fatalf("the destroyed sandbox after the watch: %s %s", rec.State, rec.EndReason)
	}
}
