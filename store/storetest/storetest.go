// Package storetest is the conformance suite every store.Store
// implementation must pass. An implementation's test calls Run with a
// function that opens a fresh, empty store:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{})
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { _ = s.Close() })
//			return s
//		})
//	}
//
// The suite checks the contract written on store.Store, above all two
// invariants, under concurrency and over random histories: a node's and a
// principal's use always equal the sums over their live records, and
// ListPage, List, Due and Counts always agree with a brute-force reading
// of every record.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"testing"
	"time"

	"sandgate/store"
)

// Run runs the suite. open must return a new, empty store on every call
// and should close it in t.Cleanup; the suite closes some stores itself,
// so Close must tolerate a second call. Sub-tests run in parallel, each on
// its own store.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	groups := []struct {
		name string
		run  func(*testing.T, func(*testing.T) store.Store)
	}{
		{"Reserve", testReserve},
		{"Idempotency", testIdempotency},
		{"Update", testUpdate},
		{"Read", testRead},
		{"Page", testPage},
		{"History", testHistory},
		{"Nodes", testNodes},
		{"Tokens", testTokens},
		{"Lifecycle", testLifecycle},
		{"Invariant", testInvariant},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			g.run(t, open)
		})
	}
}

// base is the suite's fixed clock origin; every fixture time is UTC
// without a monotonic reading, so JSON round trips compare equal.
var base = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// sandbox returns a valid, live record.
func sandbox(id, node, principal string) store.Sandbox {
	return store.Sandbox{
		ID:        id,
		JobID:     "sandgate-sbx-" + id,
		Node:      node,
		Principal: principal,
		Profile:   "strict",
		Network:   "none",
		Image:     "ubuntu:24.04",
		CPUMHz:    500,
		MemoryMB:  512,
		Labels:    map[string]string{"team": "a"},
		State:     store.StateStarting,
		CreatedAt: base,
		ExpiresAt: base.Add(time.Hour),
		CeilingAt: base.Add(4 * time.Hour),
		UpdatedAt: base,
		Spec:      []byte(`{"Job":{"ID":"x"}}`),
	}
}

// admitAll admits every reservation.
func admitAll(store.ReserveFacts) error { return nil }

// errProbe is what probe's admit returns to abort its Reserve.
var errProbe = errors.New("storetest: probe")

func mustReserve(t *testing.T, s store.Store, rec store.Sandbox) {
	t.Helper()
	if err := s.Reserve(context.Background(), rec, admitAll); err != nil {
		t.Fatalf("Reserve(%s): %v", rec.ID, err)
	}
}

func mustGet(t *testing.T, s store.Store, id string) store.Sandbox {
	t.Helper()
	rec, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return rec
}

func mustUpdate(t *testing.T, s store.Store, id string, mutate func(*store.Sandbox) error) store.Sandbox {
	t.Helper()
	rec, err := s.Update(context.Background(), id, mutate)
	if err != nil {
		t.Fatalf("Update(%s): %v", id, err)
	}
	return rec
}

func mustNodeUsage(t *testing.T, s store.Store, node string) store.Usage {
	t.Helper()
	u, err := s.NodeUsage(context.Background(), node)
	if err != nil {
		t.Fatalf("NodeUsage(%s): %v", node, err)
	}
	return u
}

func mustList(t *testing.T, s store.Store, f store.Filter) []store.Sandbox {
	t.Helper()
	recs, err := s.List(context.Background(), f)
	if err != nil {
		t.Fatalf("List(%+v): %v", f, err)
	}
	return recs
}

// setState returns a mutate that moves a record to st.
func setState(st store.State) func(*store.Sandbox) error {
	return func(rec *store.Sandbox) error {
		rec.State = st
		if !st.Live() {
			rec.EndReason = "destroyed"
		}
		return nil
	}
}

// probe reads the facts Reserve would hand admit for a record on node by
// principal, without writing: its admit records them and refuses.
func probe(t *testing.T, s store.Store, node, principal string) store.ReserveFacts {
	t.Helper()
	var facts store.ReserveFacts
	rec := sandbox("probe-never-stored", node, principal)
	err := s.Reserve(context.Background(), rec, func(f store.ReserveFacts) error {
		facts = f
		return errProbe
	})
	if !errors.Is(err, errProbe) {
		t.Fatalf("probe Reserve on %s/%s: got %v, want the admit error", node, principal, err)
	}
	return facts
}

// usageOf sums the use held by recs.
func usageOf(recs []store.Sandbox) store.Usage {
	var u store.Usage
	for _, r := range recs {
		u.Sandboxes++
		u.CPUMHz += r.CPUMHz
		u.MemoryMB += r.MemoryMB
	}
	return u
}

// checkBudget asserts the budget invariant: for every node and principal
// named, the store's use equals the sum over its live records, both as
// NodeUsage reports it and as Reserve's admit sees it.
func checkBudget(t *testing.T, s store.Store, nodes, principals []string) {
	t.Helper()
	live := mustList(t, s, store.Filter{LiveOnly: true})
	byNode := map[string][]store.Sandbox{}
	byPrincipal := map[string][]store.Sandbox{}
	for _, r := range live {
		if !r.State.Live() {
			t.Fatalf("List(LiveOnly) returned %s in state %s", r.ID, r.State)
		}
		byNode[r.Node] = append(byNode[r.Node], r)
		byPrincipal[r.Principal] = append(byPrincipal[r.Principal], r)
	}
	for i := range max(len(nodes), len(principals)) {
		node, principal := nodes[i%len(nodes)], principals[i%len(principals)]
		wantNode, wantPrincipal := usageOf(byNode[node]), usageOf(byPrincipal[principal])
		if got := mustNodeUsage(t, s, node); got != wantNode {
			t.Fatalf("NodeUsage(%s) = %+v, live records sum to %+v", node, got, wantNode)
		}
		facts := probe(t, s, node, principal)
		if facts.Node != wantNode {
			t.Fatalf("admit saw node %s use %+v, live records sum to %+v", node, facts.Node, wantNode)
		}
		if facts.Principal != wantPrincipal {
			t.Fatalf("admit saw principal %s use %+v, live records sum to %+v", principal, facts.Principal, wantPrincipal)
		}
	}
}

// normal returns rec in the form a JSON round trip produces: UTC times,
// nil for empty labels and spec. UpdatedAt, the store's to set, is zeroed.
func normal(rec store.Sandbox) store.Sandbox {
	for _, tp := range []*time.Time{&rec.CreatedAt, &rec.ExpiresAt, &rec.CeilingAt, &rec.EndedAt} {
		*tp = tp.UTC()
	}
	rec.UpdatedAt = time.Time{}
	if len(rec.Labels) == 0 {
		rec.Labels = nil
	} else {
		rec.Labels = maps.Clone(rec.Labels)
	}
	if len(rec.Spec) == 0 {
		rec.Spec = nil
	}
	return rec
}

// sameSandbox fails unless got and want agree on every field but
// UpdatedAt.
func sameSandbox(t *testing.T, got, want store.Sandbox) {
	t.Helper()
	if g, w := normal(got), normal(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("record mismatch\n got: %s\nwant: %s", show(g), show(w))
	}
}

func show(rec store.Sandbox) string {
	return fmt.Sprintf("%+v (spec %q)", rec, rec.Spec)
}

// ids lists the records' ids in order.
func ids(recs []store.Sandbox) []string {
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.ID)
	}
	return out
}
