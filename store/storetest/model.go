package storetest

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"sandgate/store"
)

// This file computes by brute force, over every record fetched with Get,
// what ListPage, List, Due and Counts must answer, and compares.

// snapshot returns the stored records among ids (Get of each; a missing
// one is skipped), in listing order.
func snapshot(t *testing.T, s store.Store, ids []string) []store.Sandbox {
	t.Helper()
	var out []store.Sandbox
	for _, id := range ids {
		rec, err := s.Get(context.Background(), id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("Get(%s): %v", id, err)
		}
		out = append(out, rec)
	}
	slices.SortFunc(out, byCreated)
	return out
}

// byCreated is listing order: CreatedAt, then ID.
func byCreated(a, b store.Sandbox) int {
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// queryMatches is Query's meaning, written out.
func queryMatches(q store.Query, r store.Sandbox) bool {
	if len(q.States) > 0 && !slices.Contains(q.States, r.State) {
		return false
	}
	if q.Principal != "" && r.Principal != q.Principal || q.Node != "" && r.Node != q.Node {
		return false
	}
	for k, v := range q.Labels {
		if got, ok := r.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// filterMatches is Filter's meaning, written out.
func filterMatches(f store.Filter, r store.Sandbox) bool {
	return (f.Principal == "" || r.Principal == f.Principal) &&
		(f.Node == "" || r.Node == f.Node) &&
		(!f.LiveOnly || r.State.Live())
}

// withoutSpec returns recs (in order) as a listing returns them.
func withoutSpec(recs []store.Sandbox) []store.Sandbox {
	out := make([]store.Sandbox, 0, len(recs))
	for _, r := range recs {
		r.Spec = nil
		out = append(out, normal(r))
	}
	return out
}

// sameList fails unless got holds exactly want, in order, field by field.
func sameList(t *testing.T, what string, got, want []store.Sandbox) {
	t.Helper()
	for _, r := range got {
		if r.Spec != nil {
			t.Fatalf("%s: %s carries its spec; listings leave it out", what, r.ID)
		}
	}
	if g, w := withoutSpec(got), withoutSpec(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("%s:\n got %v\nwant %v", what, ids(got), ids(want))
	}
}

// allPages follows q's cursors to the end and returns every item. The
// stores under test hold fewer than store.MinPageScan records, so every
// page but the last must be full.
func allPages(t *testing.T, s store.Store, q store.Query) []store.Sandbox {
	t.Helper()
	limit := q.Limit
	if limit == 0 {
		limit = store.DefaultPageLimit
	}
	var out []store.Sandbox
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatalf("ListPage(%+v): cursors never end", q)
		}
		page, err := s.ListPage(context.Background(), q)
		if err != nil {
			t.Fatalf("ListPage(%+v): %v", q, err)
		}
		if len(page.Items) > limit {
			t.Fatalf("ListPage(%+v) returned %d items, over the limit", q, len(page.Items))
		}
		out = append(out, page.Items...)
		if page.Next == "" {
			return out
		}
		if len(page.Items) != limit {
			t.Fatalf("ListPage(%+v): a page before the last holds %d items, want %d", q, len(page.Items), limit)
		}
		q.Cursor = page.Next
	}
}

// dueOf is Due's meaning, written out: live records due at at, ordered
// by the earlier of expiry and ceiling, then id.
func dueOf(recs []store.Sandbox, at time.Time) []store.Sandbox {
	first := func(r store.Sandbox) time.Time {
		if r.CeilingAt.Before(r.ExpiresAt) {
			return r.CeilingAt
		}
		return r.ExpiresAt
	}
	var out []store.Sandbox
	for _, r := range recs {
		if r.State.Live() && !first(r).After(at) {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b store.Sandbox) int {
		if c := first(a).Compare(first(b)); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// probeQueries are the queries checkIndexes compares, for the given
// principals, nodes and a label.
func probeQueries(principals, nodes []string, label [2]string) []store.Query {
	live := []store.State{store.StateStarting, store.StateRunning}
	terminal := []store.State{store.StateEnded, store.StateFailed}
	labels := map[string]string{label[0]: label[1]}
	qs := []store.Query{
		{}, {States: live}, {States: terminal}, {States: []store.State{store.StateRunning}},
		{Labels: labels}, {States: live, Labels: labels},
	}
	for _, p := range principals {
		qs = append(qs, store.Query{Principal: p}, store.Query{Principal: p, States: live},
			store.Query{Principal: p, States: []store.State{store.StateEnded}}, store.Query{Principal: p, Node: nodes[0]})
	}
	for _, n := range nodes {
		qs = append(qs, store.Query{Node: n}, store.Query{Node: n, States: live}, store.Query{Node: n, Labels: labels})
	}
	return qs
}

// checkIndexes compares ListPage (at several page sizes), List, Due and
// Counts with what the records themselves say.
func checkIndexes(t *testing.T, s store.Store, ids, principals, nodes []string, label [2]string, times []time.Time) {
	t.Helper()
	ctx := context.Background()
	recs := snapshot(t, s, ids)
	for i, q := range probeQueries(principals, nodes, label) {
		var want []store.Sandbox
		for _, r := range recs {
			if queryMatches(q, r) {
				want = append(want, r)
			}
		}
		q.Limit = []int{2, 7, 0}[i%3]
		sameList(t, "ListPage", allPages(t, s, q), want)
	}
	for _, f := range []store.Filter{{}, {LiveOnly: true}, {Principal: principals[0]}, {Principal: principals[0], LiveOnly: true}, {Node: nodes[0]}, {Node: nodes[0], LiveOnly: true}} {
		var want []store.Sandbox
		for _, r := range recs {
			if filterMatches(f, r) {
				want = append(want, r)
			}
		}
		sameList(t, "List", mustList(t, s, f), want)
	}
	for _, at := range times {
		got, err := s.Due(ctx, at)
		if err != nil {
			t.Fatalf("Due(%s): %v", at, err)
		}
		sameList(t, "Due at "+at.String(), got, dueOf(recs, at))
	}
	want := map[store.State]int64{store.StateStarting: 0, store.StateRunning: 0, store.StateFailed: 0, store.StateEnded: 0}
	for _, r := range recs {
		want[r.State]++
	}
	if got := mustCounts(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("Counts = %v, the records say %v", got, want)
	}
}

func mustCounts(t *testing.T, s store.Store) map[store.State]int64 {
	t.Helper()
	got, err := s.Counts(context.Background())
	if err != nil {
		t.Fatalf("Counts: %v", err)
	}
	return got
}
