package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"sandgate/store"
)

func testPage(t *testing.T, open func(*testing.T) store.Store) {
	t.Run("pages filter, follow creation time then id and carry no spec", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		all := seedHistory(t, s)
		live := []store.State{store.StateStarting, store.StateRunning}
		cases := []struct {
			name string
			q    store.Query
		}{
			{"everything", store.Query{}},
			{"every state named", store.Query{States: []store.State{store.StateEnded, store.StateRunning, store.StateFailed, store.StateStarting, store.StateEnded}}},
			{"live states", store.Query{States: live}},
			{"ended only", store.Query{States: []store.State{store.StateEnded}}},
			{"failed or starting", store.Query{States: []store.State{store.StateFailed, store.StateStarting}}},
			{"one principal", store.Query{Principal: "agent:alice"}},
			{"a principal that prefixes another", store.Query{Principal: "agent:al"}},
			{"one principal, live", store.Query{Principal: "agent:alice", States: live}},
			{"one node", store.Query{Node: "w1"}},
			{"one node, ended", store.Query{Node: "w2", States: []store.State{store.StateEnded}}},
			{"principal and node", store.Query{Principal: "agent:bob", Node: "w2"}},
			{"a label", store.Query{Labels: map[string]string{"team": "b"}}},
			{"two labels", store.Query{Labels: map[string]string{"team": "a", "tier": "gold"}}},
			{"a label and a principal", store.Query{Labels: map[string]string{"team": "a"}, Principal: "agent:alice"}},
			{"a label nobody has", store.Query{Labels: map[string]string{"team": "z"}}},
			{"an unknown principal", store.Query{Principal: "agent:nobody"}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				var want []store.Sandbox
				for _, r := range all {
					if queryMatches(tc.q, r) {
						want = append(want, r)
					}
				}
				for _, limit := range []int{1, 2, 5, 0} {
					q := tc.q
					q.Limit = limit
					sameList(t, fmt.Sprintf("pages of %d", limit), allPages(t, s, q), want)
				}
			})
		}
	})

	t.Run("the limit defaults to 100, allows 1000 and refuses the rest", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		for i := range store.DefaultPageLimit + 1 {
			mustReserve(t, s, sandbox(fmt.Sprintf("s%03d", i), "w1", "agent:alice"))
		}
		ctx := context.Background()
		page, err := s.ListPage(ctx, store.Query{})
		if err != nil || len(page.Items) != store.DefaultPageLimit || page.Next == "" {
			t.Fatalf("ListPage(limit 0) = %d items, next %q, %v; want %d and a next page", len(page.Items), page.Next, err, store.DefaultPageLimit)
		}
		if page, err = s.ListPage(ctx, store.Query{Cursor: page.Next}); err != nil || len(page.Items) != 1 || page.Next != "" {
			t.Fatalf("second page = %v, next %q, %v; want the last record and no next", ids(page.Items), page.Next, err)
		}
		if page, err = s.ListPage(ctx, store.Query{Limit: store.MaxPageLimit}); err != nil || len(page.Items) != store.DefaultPageLimit+1 || page.Next != "" {
			t.Fatalf("ListPage(limit %d) = %d items, next %q, %v; want all in one page", store.MaxPageLimit, len(page.Items), page.Next, err)
		}
		if page, err = s.ListPage(ctx, store.Query{Limit: store.DefaultPageLimit + 1}); err != nil || page.Next != "" {
			t.Fatalf("a page exactly as long as what is left has next %q, %v; want none", page.Next, err)
		}
		for _, q := range []store.Query{
			{Limit: -1}, {Limit: store.MaxPageLimit + 1},
			{States: []store.State{"paused"}}, {States: []store.State{store.StateRunning, ""}},
		} {
			if _, err := s.ListPage(ctx, q); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("ListPage(%+v) = %v, want ErrInvalid", q, err)
			}
		}
	})

	t.Run("a tampered or foreign cursor is ErrInvalid", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		seedHistory(t, s)
		ctx := context.Background()
		q := store.Query{Principal: "agent:alice", Labels: map[string]string{"team": "a"}, Limit: 1}
		page, err := s.ListPage(ctx, q)
		if err != nil || page.Next == "" {
			t.Fatalf("ListPage = %+v, %v; want a next page", page, err)
		}
		next := page.Next
		other := open(t)
		seedHistory(t, other)
		flip := func(c string, i int) string {
			b := []byte(c)
			if b[i] == 'A' {
				b[i] = 'B'
			} else {
				b[i] = 'A'
			}
			return string(b)
		}
		cases := []struct {
			name   string
			s      store.Store
			q      store.Query
			cursor string
		}{
			{"not base64", s, q, "!!not a cursor!!"},
			{"a few bytes", s, q, "AAAA"},
			{"cut short", s, q, next[:len(next)-3]},
			{"one character changed at the start", s, q, flip(next, 0)},
			{"one character changed in the middle", s, q, flip(next, len(next)/2)},
			{"one character changed at the end", s, q, flip(next, len(next)-1)},
			{"another principal", s, store.Query{Principal: "agent:bob", Labels: q.Labels}, next},
			{"another label", s, store.Query{Principal: q.Principal, Labels: map[string]string{"team": "b"}}, next},
			{"labels dropped", s, store.Query{Principal: q.Principal}, next},
			{"states added", s, store.Query{Principal: q.Principal, Labels: q.Labels, States: []store.State{store.StateEnded}}, next},
			{"a node added", s, store.Query{Principal: q.Principal, Labels: q.Labels, Node: "w1"}, next},
			{"another store", other, q, next},
		}
		for _, tc := range cases {
			tc.q.Cursor = tc.cursor
			_, err := tc.s.ListPage(ctx, tc.q)
			if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "cursor") {
				t.Errorf("%s: ListPage = %v, want ErrInvalid naming the cursor", tc.name, err)
			}
		}
		q.Cursor, q.Limit = next, 50
		if _, err := s.ListPage(ctx, q); err != nil {
			t.Errorf("the same query with another limit = %v, want the next page", err)
		}
	})

	t.Run("a cursor resumes across writes and never repeats a record", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		all := seedHistory(t, s)
		ctx := context.Background()
		page, err := s.ListPage(ctx, store.Query{Limit: 4})
		if err != nil || page.Next == "" {
			t.Fatalf("first page = %+v, %v", page, err)
		}
		// Between pages: a record before the cursor and one after it
		// are created, the last record listed (the cursor's own) is ended
		// and pruned, the first one listed and the last one of all are
		// ended.
		early, late := sandbox("early", "w1", "agent:alice"), sandbox("late", "w1", "agent:alice")
		early.CreatedAt, late.CreatedAt = base.Add(-time.Hour), base.Add(time.Hour)
		mustReserve(t, s, early)
		mustReserve(t, s, late)
		for _, id := range []string{page.Items[0].ID, all[len(all)-1].ID} {
			mustUpdate(t, s, id, setState(store.StateEnded))
		}
		longAgo := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
		mustUpdate(t, s, page.Items[3].ID, func(r *store.Sandbox) error {
			r.State, r.EndedAt = store.StateEnded, longAgo
			return nil
		})
		if n, err := s.Prune(ctx, longAgo.Add(time.Second), 1000); err != nil || n != 1 {
			t.Fatalf("Prune = %d, %v; want the cursor's own record pruned", n, err)
		}
		got := slices.Clone(page.Items)
		got = append(got, allPages(t, s, store.Query{Limit: 4, Cursor: page.Next})...)
		seen := map[string]bool{}
		for _, r := range got {
			if seen[r.ID] {
				t.Fatalf("%s listed twice: %v", r.ID, ids(got))
			}
			seen[r.ID] = true
		}
		if seen["early"] || !seen["late"] {
			t.Fatalf("listed %v; want the record created after the cursor and not the one before", ids(got))
		}
		for _, r := range all {
			if !seen[r.ID] {
				t.Fatalf("%s, there throughout, was not listed: %v", r.ID, ids(got))
			}
		}
	})

	t.Run("listings leave the spec out and Spec reads it", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		ctx := context.Background()
		rec := sandbox("a", "w1", "agent:alice")
		mustReserve(t, s, rec)
		bare := sandbox("bare", "w1", "agent:alice")
		bare.Spec = nil
		mustReserve(t, s, bare)
		if got := mustGet(t, s, "a"); string(got.Spec) != string(rec.Spec) {
			t.Fatalf("Get(a).Spec = %q, want %q", got.Spec, rec.Spec)
		}
		for _, f := range []store.Filter{{}, {LiveOnly: true}, {Principal: "agent:alice"}, {Node: "w1"}} {
			for _, r := range mustList(t, s, f) {
				if r.Spec != nil {
					t.Fatalf("List(%+v) carries %s's spec", f, r.ID)
				}
			}
		}
		spec, err := s.Spec(ctx, "a")
		if err != nil || string(spec) != string(rec.Spec) {
			t.Fatalf("Spec(a) = %q, %v; want %q", spec, err, rec.Spec)
		}
		spec[0] = 'X'
		if again, _ := s.Spec(ctx, "a"); string(again) != string(rec.Spec) {
			t.Fatalf("Spec returned the store's own bytes: after a scribble it reads %q", again)
		}
		if spec, err := s.Spec(ctx, "bare"); err != nil || spec != nil {
			t.Fatalf("Spec(bare) = %q, %v; want nil, nil", spec, err)
		}
		if _, err := s.Spec(ctx, "missing"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Spec(missing) = %v, want ErrNotFound", err)
		}
		updated := mustUpdate(t, s, "a", func(r *store.Sandbox) error {
			if string(r.Spec) != string(rec.Spec) {
				return fmt.Errorf("mutate was handed spec %q", r.Spec)
			}
			r.Spec = []byte(`{"Job":{"ID":"y"}}`)
			return nil
		})
		if string(updated.Spec) != `{"Job":{"ID":"y"}}` || string(mustGet(t, s, "a").Spec) != `{"Job":{"ID":"y"}}` {
			t.Fatalf("a spec changed in Update was not kept: %q", updated.Spec)
		}
	})
}

// seedHistory stores 24 records over three principals ("agent:al" a
// prefix of "agent:alice"), two nodes, two teams, some with a second
// label, some sharing a creation time, in every state, and returns them
// as Get reads them, in listing order.
func seedHistory(t *testing.T, s store.Store) []store.Sandbox {
	t.Helper()
	principals := []string{"agent:alice", "agent:al", "agent:bob"}
	var ids []string
	for i := range 24 {
		rec := sandbox(fmt.Sprintf("h%02d", 23-i), []string{"w1", "w2"}[i%2], principals[i%3])
		rec.CreatedAt = base.Add(time.Duration(i/3) * time.Minute)
		rec.Labels = map[string]string{"team": []string{"a", "b"}[i/2%2]}
		if i%4 == 0 {
			rec.Labels["tier"] = "gold"
		}
		mustReserve(t, s, rec)
		ids = append(ids, rec.ID)
		switch i % 5 {
		case 1:
			mustUpdate(t, s, rec.ID, setState(store.StateRunning))
		case 2, 3:
			mustUpdate(t, s, rec.ID, setState(store.StateEnded))
		case 4:
			mustUpdate(t, s, rec.ID, setState(store.StateFailed))
		}
	}
	return snapshot(t, s, ids)
}
