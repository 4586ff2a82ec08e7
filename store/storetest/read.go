package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"sandgate/store"
)

func testRead(t *testing.T, open func(*testing.T) store.Store) {
	t.Run("getting a missing record returns ErrNotFound", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		for _, id := range []string{"missing", ""} {
			if _, err := s.Get(context.Background(), id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Get(%q) = %v, want ErrNotFound", id, err)
			}
		}
	})

	t.Run("list filters and orders by creation time then id", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		// Inserted out of order; "b" and "c" share a creation time.
		at := func(id, node, principal string, minutes int) store.Sandbox {
			r := sandbox(id, node, principal)
			r.CreatedAt = base.Add(time.Duration(minutes) * time.Minute)
			return r
		}
		for _, r := range []store.Sandbox{
			at("d", "w2", "bob", 3),
			at("c", "w1", "alice", 1),
			at("a", "w1", "bob", 2),
			at("b", "w2", "alice", 1),
			at("e", "w1", "alice", 0),
		} {
			mustReserve(t, s, r)
		}
		mustUpdate(t, s, "a", setState(store.StateEnded))
		mustUpdate(t, s, "e", setState(store.StateFailed))

		cases := []struct {
			name   string
			filter store.Filter
			want   []string
		}{
			{"everything", store.Filter{}, []string{"e", "b", "c", "a", "d"}},
			{"live only", store.Filter{LiveOnly: true}, []string{"b", "c", "d"}},
			{"one principal", store.Filter{Principal: "alice"}, []string{"e", "b", "c"}},
			{"one node", store.Filter{Node: "w1"}, []string{"e", "c", "a"}},
			{"node and principal", store.Filter{Node: "w1", Principal: "bob"}, []string{"a"}},
			{"node, principal and live", store.Filter{Node: "w1", Principal: "bob", LiveOnly: true}, []string{}},
			{"unknown principal", store.Filter{Principal: "nobody"}, []string{}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				if got := ids(mustList(t, s, tc.filter)); !slices.Equal(got, tc.want) {
					t.Fatalf("List(%+v) = %v, want %v", tc.filter, got, tc.want)
				}
			})
		}
	})

	t.Run("records handed in and out are copies", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		ctx := context.Background()
		rec := sandbox("a", "w1", "alice")
		want := sandbox("a", "w1", "alice")
		mustReserve(t, s, rec)
		scribble := func(r *store.Sandbox) {
			r.Labels["team"] = "scribbled"
			r.Labels["new"] = "scribbled"
			if len(r.Spec) > 0 {
				r.Spec[0] = 'X'
			}
		}

		scribble(&rec) // the caller's record after Reserve
		got := mustGet(t, s, "a")
		scribble(&got)
		list := mustList(t, s, store.Filter{})
		scribble(&list[0])
		var kept *store.Sandbox
		updated := mustUpdate(t, s, "a", func(r *store.Sandbox) error {
			kept = r
			r.AllocID = "alloc-1"
			return nil
		})
		scribble(kept) // what mutate was handed, after Update returned
		if updated.Labels["team"] != "a" || updated.Spec[0] == 'X' {
			t.Errorf("Update's result shares Labels or Spec with what mutate was handed")
		}
		scribble(&updated)
		want.AllocID = "alloc-1"
		sameSandbox(t, mustGet(t, s, "a"), want)

		if err := s.PutNode(ctx, store.Node{Name: "w1", State: "active", MaxSandboxes: 4}); err != nil {
			t.Fatalf("PutNode: %v", err)
		}
		err := s.Reserve(ctx, sandbox("b", "w1", "alice"), func(f store.ReserveFacts) error {
			f.NodeInfo.MaxSandboxes = 1000
			return nil
		})
		if err != nil {
			t.Fatalf("Reserve(b): %v", err)
		}
		if n, err := s.GetNode(ctx, "w1"); err != nil || n.MaxSandboxes != 4 {
			t.Fatalf("GetNode after admit scribbled on NodeInfo = %+v, %v; want MaxSandboxes 4", n, err)
		}
	})
}
