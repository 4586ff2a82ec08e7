package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"sandgate/store"
)

// denial is a typed admit error, to check errors.As reaches through.
type denial struct{ rule string }

func (d *denial) Error() string { return "denied by " + d.rule }

var errNodeFull = errors.New("storetest: node full")

func testReserve(t *testing.T, open func(*testing.T) store.Store) {
	t.Run("a reservation is stored and counted against its node and principal", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		rec := sandbox("a", "w1", "alice")
		mustReserve(t, s, rec)
		sameSandbox(t, mustGet(t, s, "a"), rec)
		want := store.Usage{Sandboxes: 1, CPUMHz: 500, MemoryMB: 512}
		if got := mustNodeUsage(t, s, "w1"); got != want {
			t.Fatalf("NodeUsage(w1) = %+v, want %+v", got, want)
		}
		if got := probe(t, s, "w2", "alice").Principal; got != want {
			t.Fatalf("principal use = %+v, want %+v", got, want)
		}
		if got := mustNodeUsage(t, s, "w2"); got != (store.Usage{}) {
			t.Fatalf("NodeUsage of an unused node = %+v, want zero", got)
		}
	})

	t.Run("admit sees the node and principal use without the new record", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		ctx := context.Background()
		node := store.Node{Name: "w1", Enrollment: "sandbox", State: "active", MaxSandboxes: 8, CPUMHz: 4000, MemoryMB: 8192, UpdatedAt: base}
		if err := s.PutNode(ctx, node); err != nil {
			t.Fatalf("PutNode: %v", err)
		}
		a, b, c := sandbox("a", "w1", "alice"), sandbox("b", "w2", "alice"), sandbox("c", "w1", "bob")
		b.CPUMHz, b.MemoryMB = 100, 128
		c.CPUMHz, c.MemoryMB = 250, 1024
		ended := sandbox("ended", "w1", "alice")
		for _, r := range []store.Sandbox{a, b, c, ended} {
			mustReserve(t, s, r)
		}
		mustUpdate(t, s, "ended", setState(store.StateEnded))

		var facts store.ReserveFacts
		err := s.Reserve(ctx, sandbox("d", "w1", "alice"), func(f store.ReserveFacts) error {
			facts = f
			return nil
		})
		if err != nil {
			t.Fatalf("Reserve(d): %v", err)
		}
		if want := usageOf([]store.Sandbox{a, c}); facts.Node != want {
			t.Errorf("facts.Node = %+v, want %+v", facts.Node, want)
		}
		if want := usageOf([]store.Sandbox{a, b}); facts.Principal != want {
			t.Errorf("facts.Principal = %+v, want %+v", facts.Principal, want)
		}
		if facts.NodeInfo == nil || !reflect.DeepEqual(normalNode(*facts.NodeInfo), normalNode(node)) {
			t.Errorf("facts.NodeInfo = %+v, want %+v", facts.NodeInfo, node)
		}

		err = s.Reserve(ctx, sandbox("e", "unknown-node", "carol"), func(f store.ReserveFacts) error {
			facts = f
			return nil
		})
		if err != nil {
			t.Fatalf("Reserve(e): %v", err)
		}
		if facts.NodeInfo != nil || facts.Node != (store.Usage{}) || facts.Principal != (store.Usage{}) {
			t.Errorf("facts for a node without a record = %+v, want zero use and nil NodeInfo", facts)
		}
	})

	t.Run("an admit error aborts, comes back comparable and writes nothing", func(t *testing.T) {
		t.Parallel()
		cases := []struct {
			name  string
			err   error
			check func(error) bool
		}{
			{"sentinel", errNodeFull, func(err error) bool { return errors.Is(err, errNodeFull) }},
			{"wrapped sentinel", fmt.Errorf("policy: %w", errNodeFull), func(err error) bool { return errors.Is(err, errNodeFull) }},
			{"typed error", &denial{rule: "B1"}, func(err error) bool {
				var d *denial
				return errors.As(err, &d) && d.rule == "B1"
			}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				s := open(t)
				err := s.Reserve(context.Background(), sandbox("a", "w1", "alice"), func(store.ReserveFacts) error { return tc.err })
				if err == nil || !tc.check(err) {
					t.Fatalf("Reserve = %v, want the admit error %v", err, tc.err)
				}
				assertAbsent(t, s, "a", "w1", "alice")
			})
		}
	})

	t.Run("a taken id is refused with ErrExists and the first record stays", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		first := sandbox("a", "w1", "alice")
		mustReserve(t, s, first)
		dup := sandbox("a", "w2", "bob")
		called := false
		err := s.Reserve(context.Background(), dup, func(store.ReserveFacts) error { called = true; return nil })
		if !errors.Is(err, store.ErrExists) {
			t.Fatalf("Reserve(duplicate) = %v, want ErrExists", err)
		}
		if called {
			t.Errorf("admit was called for a taken id")
		}
		sameSandbox(t, mustGet(t, s, "a"), first)
		if got := mustNodeUsage(t, s, "w2"); got != (store.Usage{}) {
			t.Errorf("NodeUsage(w2) = %+v after a refused duplicate, want zero", got)
		}
		if got := mustNodeUsage(t, s, "w1"); got.Sandboxes != 1 {
			t.Errorf("NodeUsage(w1).Sandboxes = %d, want 1", got.Sandboxes)
		}
	})

	t.Run("an invalid record is refused with ErrInvalid", func(t *testing.T) {
		t.Parallel()
		cases := []struct {
			name   string
			mutate func(*store.Sandbox)
		}{
			{"empty id", func(r *store.Sandbox) { r.ID = "" }},
			{"empty node", func(r *store.Sandbox) { r.Node = "" }},
			{"empty principal", func(r *store.Sandbox) { r.Principal = "" }},
			{"empty state", func(r *store.Sandbox) { r.State = "" }},
			{"unknown state", func(r *store.Sandbox) { r.State = "paused" }},
			{"ended state", func(r *store.Sandbox) { r.State = store.StateEnded }},
			{"failed state", func(r *store.Sandbox) { r.State = store.StateFailed }},
			{"negative cpu", func(r *store.Sandbox) { r.CPUMHz = -1 }},
			{"negative memory", func(r *store.Sandbox) { r.MemoryMB = -1 }},
			{"id not UTF-8", func(r *store.Sandbox) { r.ID = "a\xff" }},
			{"node not UTF-8", func(r *store.Sandbox) { r.Node = "w1\xff" }},
			{"principal not UTF-8", func(r *store.Sandbox) { r.Principal = "agent:\xffalice" }},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				s := open(t)
				rec := sandbox("a", "w1", "alice")
				tc.mutate(&rec)
				err := s.Reserve(context.Background(), rec, func(store.ReserveFacts) error {
					t.Errorf("admit called for an invalid record")
					return nil
				})
				if !errors.Is(err, store.ErrInvalid) {
					t.Fatalf("Reserve = %v, want ErrInvalid", err)
				}
				assertAbsent(t, s, rec.ID, "w1", "alice")
			})
		}
	})

	t.Run("a zero-resource reservation still counts one sandbox", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		rec := sandbox("a", "w1", "alice")
		rec.CPUMHz, rec.MemoryMB, rec.State = 0, 0, store.StateRunning
		mustReserve(t, s, rec)
		if got, want := mustNodeUsage(t, s, "w1"), (store.Usage{Sandboxes: 1}); got != want {
			t.Fatalf("NodeUsage = %+v, want %+v", got, want)
		}
	})
}

// assertAbsent fails unless id is not stored and node and principal hold
// no use.
func assertAbsent(t *testing.T, s store.Store, id, node, principal string) {
	t.Helper()
	if id != "" {
		if _, err := s.Get(context.Background(), id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Get(%s) = %v, want ErrNotFound", id, err)
		}
	}
	if recs := mustList(t, s, store.Filter{}); len(recs) != 0 {
		t.Fatalf("List = %v, want nothing", ids(recs))
	}
	if got := mustNodeUsage(t, s, node); got != (store.Usage{}) {
		t.Fatalf("NodeUsage(%s) = %+v, want zero", node, got)
	}
	if got := probe(t, s, node, principal).Principal; got != (store.Usage{}) {
		t.Fatalf("principal %s use = %+v, want zero", principal, got)
	}
}

// normalNode returns n with a UTC UpdatedAt.
func normalNode(n store.Node) store.Node {
	n.UpdatedAt = n.UpdatedAt.UTC()
	return n
}
