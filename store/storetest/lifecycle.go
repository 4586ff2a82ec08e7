package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"sandgate/store"
)

// calls exercises every Store method but Close with ctx and returns what
// each one returned, by name. The store is expected to hold sandbox "a" on
// w1, node w1 and token "t".
func calls(ctx context.Context, s store.Store) map[string]error {
	ok := func(store.ReserveFacts) error { return nil }
	end := func(r *store.Sandbox) error { r.State = store.StateEnded; return nil }
	out := map[string]error{}
	out["Reserve"] = s.Reserve(ctx, sandbox("new", "w1", "alice"), ok)
	_, out["Get"] = s.Get(ctx, "a")
	_, out["List"] = s.List(ctx, store.Filter{})
	_, out["ListPage"] = s.ListPage(ctx, store.Query{})
	_, out["Due"] = s.Due(ctx, base.Add(24*time.Hour))
	_, out["Counts"] = s.Counts(ctx)
	_, out["Spec"] = s.Spec(ctx, "a")
	_, out["Prune"] = s.Prune(ctx, base.Add(24*time.Hour), 10)
	_, out["Update"] = s.Update(ctx, "a", end)
	_, out["NodeUsage"] = s.NodeUsage(ctx, "w1")
	out["PutNode"] = s.PutNode(ctx, store.Node{Name: "w9", State: "active"})
	_, out["GetNode"] = s.GetNode(ctx, "w1")
	_, out["ListNodes"] = s.ListNodes(ctx)
	out["DeleteNode"] = s.DeleteNode(ctx, "w1")
	out["PutToken"] = s.PutToken(ctx, store.Token{JTI: "t9", Role: "agent", CreatedAt: base})
	_, out["GetToken"] = s.GetToken(ctx, "t")
	_, out["ListTokens"] = s.ListTokens(ctx)
	out["RevokeToken"] = s.RevokeToken(ctx, "t", base)
	out["TouchToken"] = s.TouchToken(ctx, "t", base.Add(24*time.Hour))
	out["Ping"] = s.Ping(ctx)
	return out
}

// seed gives s the state calls expects.
func seed(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	mustReserve(t, s, sandbox("a", "w1", "alice"))
	if err := s.PutNode(ctx, store.Node{Name: "w1", State: "active"}); err != nil {
		t.Fatalf("PutNode: %v", err)
	}
	if err := s.PutToken(ctx, store.Token{JTI: "t", Role: "agent", CreatedAt: base}); err != nil {
		t.Fatalf("PutToken: %v", err)
	}
}

func testLifecycle(t *testing.T, open func(*testing.T) store.Store) {
	t.Run("a cancelled context fails every call and writes nothing", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		seed(t, s)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		for name, err := range calls(ctx, s) {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s with a cancelled context = %v, want context.Canceled", name, err)
			}
		}
		bg := context.Background()
		if rec := mustGet(t, s, "a"); rec.State != store.StateStarting {
			t.Errorf("sandbox a is %s, want it untouched (starting)", rec.State)
		}
		if recs := mustList(t, s, store.Filter{}); len(recs) != 1 {
			t.Errorf("List = %v, want only a", ids(recs))
		}
		if u := mustNodeUsage(t, s, "w1"); u.Sandboxes != 1 {
			t.Errorf("NodeUsage(w1) = %+v, want one sandbox", u)
		}
		if nodes, err := s.ListNodes(bg); err != nil || len(nodes) != 1 || nodes[0].Name != "w1" {
			t.Errorf("ListNodes = %+v, %v; want only w1", nodes, err)
		}
		tok, err := s.GetToken(bg, "t")
		if err != nil || !tok.RevokedAt.IsZero() || !tok.LastUsed.IsZero() {
			t.Errorf("GetToken(t) = %+v, %v; want it untouched", tok, err)
		}
		if _, err := s.GetToken(bg, "t9"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetToken(t9) = %v, want ErrNotFound", err)
		}
	})

	t.Run("after Close every call returns ErrClosed", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		seed(t, s)
		if err := s.Ping(context.Background()); err != nil {
			t.Fatalf("Ping on an open store: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		for name, err := range calls(context.Background(), s) {
			if !errors.Is(err, store.ErrClosed) {
				t.Errorf("%s after Close = %v, want ErrClosed", name, err)
			}
		}
		if err := s.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
			t.Errorf("second Close = %v, want nil or ErrClosed", err)
		}
	})
}
