package storetest

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"sandgate/store"
)

func testNodes(t *testing.T, open func(*testing.T) store.Store) {
	t.Run("nodes are created, replaced, listed by name and deleted", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		ctx := context.Background()
		w2 := store.Node{Name: "w2", Enrollment: "sandbox", State: "active", MaxSandboxes: 8, CPUMHz: 4000, MemoryMB: 8192, UpdatedAt: base}
		w1 := store.Node{Name: "w1", Enrollment: "sandbox+egress", State: "frozen", UpdatedAt: base}
		for _, n := range []store.Node{w2, w1} {
			if err := s.PutNode(ctx, n); err != nil {
				t.Fatalf("PutNode(%s): %v", n.Name, err)
			}
		}
		got, err := s.GetNode(ctx, "w2")
		if err != nil || !reflect.DeepEqual(normalNode(got), w2) {
			t.Fatalf("GetNode(w2) = %+v, %v; want %+v", got, err, w2)
		}
		w2.State, w2.MaxSandboxes, w2.UpdatedAt = "draining", 2, base.Add(time.Minute)
		if err := s.PutNode(ctx, w2); err != nil {
			t.Fatalf("PutNode(w2 again): %v", err)
		}
		got, err = s.GetNode(ctx, "w2")
		if err != nil || !reflect.DeepEqual(normalNode(got), w2) {
			t.Fatalf("GetNode(w2) after replace = %+v, %v; want %+v", got, err, w2)
		}
		nodes, err := s.ListNodes(ctx)
		if err != nil {
			t.Fatalf("ListNodes: %v", err)
		}
		names := make([]string, 0, len(nodes))
		for _, n := range nodes {
			names = append(names, n.Name)
		}
		if !slices.Equal(names, []string{"w1", "w2"}) {
			t.Fatalf("ListNodes names = %v, want [w1 w2]", names)
		}
		if err := s.DeleteNode(ctx, "w1"); err != nil {
			t.Fatalf("DeleteNode(w1): %v", err)
		}
		if _, err := s.GetNode(ctx, "w1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("GetNode(w1) after delete = %v, want ErrNotFound", err)
		}
		if err := s.DeleteNode(ctx, "w1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("DeleteNode(w1) again = %v, want ErrNotFound", err)
		}
	})

	t.Run("a node without a name is refused with ErrInvalid", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		if err := s.PutNode(context.Background(), store.Node{State: "active"}); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("PutNode(no name) = %v, want ErrInvalid", err)
		}
		if nodes, err := s.ListNodes(context.Background()); err != nil || len(nodes) != 0 {
			t.Fatalf("ListNodes = %v, %v; want none", nodes, err)
		}
	})

	t.Run("deleting a node leaves its sandboxes' budget held", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		ctx := context.Background()
		if err := s.PutNode(ctx, store.Node{Name: "w1", State: "active"}); err != nil {
			t.Fatalf("PutNode: %v", err)
		}
		mustReserve(t, s, sandbox("a", "w1", "alice"))
		if err := s.DeleteNode(ctx, "w1"); err != nil {
			t.Fatalf("DeleteNode: %v", err)
		}
		if facts := probe(t, s, "w1", "alice"); facts.NodeInfo != nil || facts.Node.Sandboxes != 1 {
			t.Fatalf("facts after DeleteNode = %+v, want nil NodeInfo and one sandbox held", facts)
		}
	})
}

func testTokens(t *testing.T, open func(*testing.T) store.Store) {
	token := func(jti string, created time.Time) store.Token {
		return store.Token{JTI: jti, Role: "agent", Subject: "agent-" + jti, Label: "ci", CreatedAt: created, ExpiresAt: created.Add(24 * time.Hour), MaxLiveSandboxes: 3}
	}

	t.Run("tokens are stored, listed by creation then jti and not overwritten", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		ctx := context.Background()
		c, a, b := token("c", base), token("a", base.Add(time.Second)), token("b", base)
		for _, tok := range []store.Token{a, b, c} {
			if err := s.PutToken(ctx, tok); err != nil {
				t.Fatalf("PutToken(%s): %v", tok.JTI, err)
			}
		}
		if err := s.PutToken(ctx, token("a", base.Add(time.Hour))); !errors.Is(err, store.ErrExists) {
			t.Fatalf("PutToken(a again) = %v, want ErrExists", err)
		}
		got, err := s.GetToken(ctx, "a")
		if err != nil || !reflect.DeepEqual(normalToken(got), a) {
			t.Fatalf("GetToken(a) = %+v, %v; want %+v", got, err, a)
		}
		toks, err := s.ListTokens(ctx)
		if err != nil {
			t.Fatalf("ListTokens: %v", err)
		}
		jtis := make([]string, 0, len(toks))
		for _, tok := range toks {
			jtis = append(jtis, tok.JTI)
		}
		if !slices.Equal(jtis, []string{"b", "c", "a"}) {
			t.Fatalf("ListTokens jtis = %v, want [b c a]", jtis)
		}
		if err := s.PutToken(ctx, store.Token{Role: "agent"}); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("PutToken(no jti) = %v, want ErrInvalid", err)
		}
	})

	t.Run("revoking is idempotent and keeps the first time", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		ctx := context.Background()
		if err := s.PutToken(ctx, token("a", base)); err != nil {
			t.Fatalf("PutToken: %v", err)
		}
		first := base.Add(time.Hour)
		for _, at := range []time.Time{first, first.Add(time.Hour)} {
			if err := s.RevokeToken(ctx, "a", at); err != nil {
				t.Fatalf("RevokeToken(a, %s): %v", at, err)
			}
		}
		got, err := s.GetToken(ctx, "a")
		if err != nil || !got.RevokedAt.Equal(first) {
			t.Fatalf("GetToken(a) = %+v, %v; want RevokedAt %s", got, err, first)
		}
	})

	t.Run("a missing token is ErrNotFound for get and revoke", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		ctx := context.Background()
		if _, err := s.GetToken(ctx, "missing"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetToken = %v, want ErrNotFound", err)
		}
		if err := s.RevokeToken(ctx, "missing", base); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("RevokeToken = %v, want ErrNotFound", err)
		}
		if toks, err := s.ListTokens(ctx); err != nil || len(toks) != 0 {
			t.Errorf("ListTokens = %v, %v; want none", toks, err)
		}
	})

	t.Run("a first touch records when the token was used", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		ctx := context.Background()
		if err := s.PutToken(ctx, token("a", base)); err != nil {
			t.Fatalf("PutToken: %v", err)
		}
		at := base.Add(time.Hour)
		if err := s.TouchToken(ctx, "a", at); err != nil {
			t.Fatalf("TouchToken: %v", err)
		}
		got, err := s.GetToken(ctx, "a")
		if err != nil || !got.LastUsed.Equal(at) {
			t.Fatalf("GetToken = %+v, %v; want LastUsed %s", got, err, at)
		}
	})
}

// normalToken returns t with UTC times.
func normalToken(t store.Token) store.Token {
	for _, tp := range []*time.Time{&t.CreatedAt, &t.ExpiresAt, &t.RevokedAt, &t.LastUsed} {
		*tp = tp.UTC()
	}
	return t
}
