package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"sandgate/store"
)

func testHistory(t *testing.T, open func(*testing.T) store.Store) {
	t.Run("due lists live records past their expiry or ceiling, earliest first", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		ctx := context.Background()
		at := func(id string, expires, ceiling int) store.Sandbox {
			r := sandbox(id, "w1", "agent:alice")
			r.ExpiresAt = base.Add(time.Duration(expires) * time.Minute)
			r.CeilingAt = base.Add(time.Duration(ceiling) * time.Minute)
			return r
		}
		for _, r := range []store.Sandbox{
			at("expires-10", 10, 60), at("ceiling-5", 30, 5), at("expires-10b", 10, 60),
			at("expires-20", 20, 60), at("ended-1", 1, 1), at("later", 90, 120),
		} {
			mustReserve(t, s, r)
		}
		mustUpdate(t, s, "ended-1", setState(store.StateEnded))
		cases := []struct {
			at   time.Time
			want []string
		}{
			{base, []string{}},
			{base.Add(5*time.Minute - time.Nanosecond), []string{}},
			{base.Add(5 * time.Minute), []string{"ceiling-5"}},
			{base.Add(15 * time.Minute), []string{"ceiling-5", "expires-10", "expires-10b"}},
			{base.Add(24 * time.Hour), []string{"ceiling-5", "expires-10", "expires-10b", "expires-20", "later"}},
		}
		for _, tc := range cases {
			got, err := s.Due(ctx, tc.at)
			if err != nil || !slices.Equal(ids(got), tc.want) {
				t.Errorf("Due(%s) = %v, %v; want %v", tc.at, ids(got), err, tc.want)
			}
			if got == nil {
				t.Errorf("Due(%s) = nil, want an empty, non-nil slice", tc.at)
			}
			for _, r := range got {
				if r.Spec != nil {
					t.Errorf("Due carries %s's spec", r.ID)
				}
			}
		}
		// An extension moves a record out; ending one removes it.
		mustUpdate(t, s, "expires-10", func(r *store.Sandbox) error { r.ExpiresAt = base.Add(50 * time.Minute); return nil })
		mustUpdate(t, s, "ceiling-5", setState(store.StateFailed))
		got, err := s.Due(ctx, base.Add(15*time.Minute))
		if want := []string{"expires-10b"}; err != nil || !slices.Equal(ids(got), want) {
			t.Fatalf("Due after an extension and an end = %v, %v; want %v", ids(got), err, want)
		}
	})

	t.Run("counts follow every state change and start at zero", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		want := map[store.State]int64{store.StateStarting: 0, store.StateRunning: 0, store.StateFailed: 0, store.StateEnded: 0}
		check := func(when string) {
			t.Helper()
			if got := mustCounts(t, s); !reflect.DeepEqual(got, want) {
				t.Fatalf("Counts %s = %v, want %v", when, got, want)
			}
		}
		check("of an empty store")
		for i := range 5 {
			mustReserve(t, s, sandbox(fmt.Sprintf("c%d", i), "w1", "agent:alice"))
		}
		want[store.StateStarting] = 5
		check("after five reservations")
		mustUpdate(t, s, "c0", setState(store.StateRunning))
		mustUpdate(t, s, "c1", setState(store.StateRunning))
		mustUpdate(t, s, "c1", setState(store.StateRunning)) // no change
		mustUpdate(t, s, "c2", setState(store.StateFailed))
		mustUpdate(t, s, "c2", setState(store.StateEnded))
		mustUpdate(t, s, "c3", setState(store.StateEnded))
		want = map[store.State]int64{store.StateStarting: 1, store.StateRunning: 2, store.StateFailed: 0, store.StateEnded: 2}
		check("after updates")
		if _, err := s.Update(context.Background(), "c3", setState(store.StateRunning)); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("Update(ended to running) = %v, want ErrInvalid", err)
		}
		if err := s.Reserve(context.Background(), sandbox("c4", "w1", "agent:alice"), admitAll); !errors.Is(err, store.ErrExists) {
			t.Fatalf("Reserve(taken) = %v, want ErrExists", err)
		}
		check("after refused writes")
		if _, err := s.Prune(context.Background(), time.Now().Add(time.Hour), 10); err != nil {
			t.Fatalf("Prune: %v", err)
		}
		want[store.StateEnded] = 0
		check("after pruning")
	})

	t.Run("prune deletes old terminal records, oldest first, and nothing live", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		ctx := context.Background()
		endAt := func(id string, days int, st store.State) {
			mustUpdate(t, s, id, func(r *store.Sandbox) error {
				r.State, r.EndReason = st, "destroyed"
				r.EndedAt = base.Add(time.Duration(days) * 24 * time.Hour)
				return nil
			})
		}
		old := sandbox("old-live", "w1", "agent:alice")
		old.CreatedAt = base.Add(-365 * 24 * time.Hour)
		mustReserve(t, s, old)
		for _, id := range []string{"e1", "e2", "e3", "e4", "f5", "recent"} {
			mustReserve(t, s, sandbox(id, "w1", "agent:alice"))
		}
		endAt("e3", 3, store.StateEnded)
		endAt("e1", 1, store.StateEnded)
		endAt("e2", 2, store.StateEnded)
		endAt("e4", 4, store.StateEnded)
		endAt("f5", 5, store.StateFailed)
		endAt("recent", 30, store.StateEnded)
		use := mustNodeUsage(t, s, "w1")
		cutoff := base.Add(10 * 24 * time.Hour)

		if _, err := s.Prune(ctx, cutoff, 0); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("Prune(limit 0) = %v, want ErrInvalid", err)
		}
		steps := []struct {
			limit int
			want  int
			gone  []string
		}{
			{2, 2, []string{"e1", "e2"}},
			{2, 2, []string{"e3", "e4"}},
			{2, 1, []string{"f5"}},
			{2, 0, nil},
		}
		for _, st := range steps {
			n, err := s.Prune(ctx, cutoff, st.limit)
			if err != nil || n != st.want {
				t.Fatalf("Prune(%d) = %d, %v; want %d", st.limit, n, err, st.want)
			}
			for _, id := range st.gone {
				if _, err := s.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("Get(%s) after Prune = %v, want ErrNotFound", id, err)
				}
				if _, err := s.Spec(ctx, id); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("Spec(%s) after Prune = %v, want ErrNotFound", id, err)
				}
			}
		}
		if got := ids(mustList(t, s, store.Filter{})); !slices.Equal(got, []string{"old-live", "recent"}) {
			t.Fatalf("List after pruning = %v, want the live record and the recent one", got)
		}
		for _, q := range []store.Query{{}, {States: []store.State{store.StateEnded, store.StateFailed}}, {Principal: "agent:alice"}, {Node: "w1"}} {
			want := []string{"old-live", "recent"}
			if len(q.States) > 0 {
				want = want[1:]
			}
			page, err := s.ListPage(ctx, q)
			if err != nil || !slices.Equal(ids(page.Items), want) {
				t.Fatalf("ListPage(%+v) after pruning = %v, %v; want %v", q, ids(page.Items), err, want)
			}
		}
		if got := mustNodeUsage(t, s, "w1"); got != use {
			t.Fatalf("NodeUsage after pruning = %+v, want it untouched (%+v)", got, use)
		}
		// A pruned id leaves nothing behind: it may be reserved again.
		mustReserve(t, s, sandbox("e1", "w1", "agent:alice"))
		if got := mustCounts(t, s); got[store.StateStarting] != 2 || got[store.StateEnded] != 1 || got[store.StateFailed] != 0 {
			t.Fatalf("Counts = %v, want 2 starting, 1 ended", got)
		}
	})
}
