package storetest

import (
	"context"
	"errors"
	"testing"

	"sandgate/store"
)

var errMutate = errors.New("storetest: mutate refused")

func testUpdate(t *testing.T, open func(*testing.T) store.Store) {
	held := store.Usage{Sandboxes: 1, CPUMHz: 500, MemoryMB: 512}

	t.Run("a live-to-live change is stored and keeps the budget held", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		mustReserve(t, s, sandbox("a", "w1", "alice"))
		got := mustUpdate(t, s, "a", func(r *store.Sandbox) error {
			r.State, r.AllocID = store.StateRunning, "alloc-1"
			r.Labels["extra"] = "yes"
			return nil
		})
		if got.State != store.StateRunning || got.AllocID != "alloc-1" || got.Labels["extra"] != "yes" {
			t.Fatalf("Update returned %+v, want running with alloc-1 and the new label", got)
		}
		if got.UpdatedAt.IsZero() {
			t.Errorf("Update left UpdatedAt zero")
		}
		sameSandbox(t, mustGet(t, s, "a"), got)
		if u := mustNodeUsage(t, s, "w1"); u != held {
			t.Fatalf("NodeUsage = %+v, want %+v", u, held)
		}
	})

	t.Run("ending a record releases its budget exactly once", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		mustReserve(t, s, sandbox("a", "w1", "alice"))
		mustReserve(t, s, sandbox("b", "w1", "alice"))
		mustUpdate(t, s, "a", setState(store.StateEnded))
		if u := mustNodeUsage(t, s, "w1"); u != held {
			t.Fatalf("NodeUsage after ending a = %+v, want %+v", u, held)
		}
		again := mustUpdate(t, s, "a", func(r *store.Sandbox) error {
			r.State, r.EndReason = store.StateEnded, "expired"
			return nil
		})
		if again.EndReason != "expired" {
			t.Errorf("terminal-to-terminal change not stored: EndReason %q", again.EndReason)
		}
		if u := mustNodeUsage(t, s, "w1"); u != held {
			t.Fatalf("NodeUsage after ending a twice = %+v, want %+v", u, held)
		}
		checkBudget(t, s, []string{"w1"}, []string{"alice"})
	})

	t.Run("failed then ended releases once and is allowed", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		mustReserve(t, s, sandbox("a", "w1", "alice"))
		mustUpdate(t, s, "a", setState(store.StateFailed))
		got := mustUpdate(t, s, "a", setState(store.StateEnded))
		if got.State != store.StateEnded {
			t.Fatalf("state = %s, want ended", got.State)
		}
		if u := mustNodeUsage(t, s, "w1"); u != (store.Usage{}) {
			t.Fatalf("NodeUsage = %+v, want zero", u)
		}
		checkBudget(t, s, []string{"w1"}, []string{"alice"})
	})

	t.Run("a refused change returns ErrInvalid and writes nothing", func(t *testing.T) {
		t.Parallel()
		cases := []struct {
			name   string
			end    bool // end the record before the refused change
			mutate func(*store.Sandbox) error
		}{
			{"terminal to running", true, setState(store.StateRunning)},
			{"terminal to starting", true, setState(store.StateStarting)},
			{"unknown state", false, setState("paused")},
			{"empty state", false, setState("")},
			{"changed id", false, func(r *store.Sandbox) error { r.ID = "other"; return nil }},
			{"changed node", false, func(r *store.Sandbox) error { r.Node = "w2"; return nil }},
			{"changed principal", false, func(r *store.Sandbox) error { r.Principal = "bob"; return nil }},
			{"changed cpu", false, func(r *store.Sandbox) error { r.CPUMHz = 1; return nil }},
			{"changed memory", false, func(r *store.Sandbox) error { r.MemoryMB = 1; return nil }},
			{"changed node while ending", false, func(r *store.Sandbox) error {
				r.Node, r.State = "w2", store.StateEnded
				return nil
			}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				s := open(t)
				mustReserve(t, s, sandbox("a", "w1", "alice"))
				if tc.end {
					mustUpdate(t, s, "a", setState(store.StateEnded))
				}
				before := mustGet(t, s, "a")
				usage := mustNodeUsage(t, s, "w1")
				_, err := s.Update(context.Background(), "a", tc.mutate)
				if !errors.Is(err, store.ErrInvalid) {
					t.Fatalf("Update = %v, want ErrInvalid", err)
				}
				after := mustGet(t, s, "a")
				sameSandbox(t, after, before)
				if !after.UpdatedAt.Equal(before.UpdatedAt) {
					t.Errorf("UpdatedAt moved on a refused change")
				}
				if u := mustNodeUsage(t, s, "w1"); u != usage {
					t.Errorf("NodeUsage = %+v, want %+v", u, usage)
				}
				checkBudget(t, s, []string{"w1", "w2"}, []string{"alice", "bob"})
			})
		}
	})

	t.Run("a mutate error aborts and comes back comparable", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		mustReserve(t, s, sandbox("a", "w1", "alice"))
		before := mustGet(t, s, "a")
		_, err := s.Update(context.Background(), "a", func(r *store.Sandbox) error {
			r.State, r.LastError = store.StateEnded, "half-done"
			return errMutate
		})
		if !errors.Is(err, errMutate) {
			t.Fatalf("Update = %v, want the mutate error", err)
		}
		sameSandbox(t, mustGet(t, s, "a"), before)
		if u := mustNodeUsage(t, s, "w1"); u != held {
			t.Fatalf("NodeUsage = %+v, want %+v", u, held)
		}
	})

	t.Run("updating a missing record returns ErrNotFound", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		called := false
		_, err := s.Update(context.Background(), "missing", func(*store.Sandbox) error { called = true; return nil })
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Update = %v, want ErrNotFound", err)
		}
		if called {
			t.Errorf("mutate called for a missing record")
		}
		if _, err := s.Get(context.Background(), "missing"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Get after Update(missing) = %v, want ErrNotFound", err)
		}
	})
}
