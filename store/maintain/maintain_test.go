package maintain_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"sandgate/internal/pgtest"
	"sandgate/store"
	"sandgate/store/bolt"
	"sandgate/store/maintain"
	"sandgate/store/postgres"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)

// history fills s with records in every state, nodes and tokens.
func history(t *testing.T, s store.Store) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for i := range 40 {
		rec := store.Sandbox{
			ID: fmt.Sprintf("sbx-%02d", i), JobID: fmt.Sprintf("sandgate-sbx-%02d", i),
			Node: fmt.Sprintf("w%d", i%3), Principal: fmt.Sprintf("agent:a%d", i%4),
			Profile: "strict", Network: "none", Image: "debian:12", CPUMHz: 250 + int64(i), MemoryMB: 256,
			Labels: map[string]string{"i": fmt.Sprint(i)}, State: store.StateStarting,
			CreatedAt: t0.Add(time.Duration(i) * time.Second), ExpiresAt: t0.Add(time.Hour), CeilingAt: t0.Add(4 * time.Hour),
			Spec: fmt.Appendf(nil, `{"Job":{"ID":"sandgate-sbx-%02d"}}`, i), TokenJTI: fmt.Sprintf("jti-%02d", i),
			TokenDigest: fmt.Sprintf("%064x", i), IdempotencyKey: fmt.Sprintf("%064x", 1000+i), RequestDigest: "rd",
		}
		if err := s.Reserve(ctx, rec, nil); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.ID)
		to := []store.State{store.StateStarting, store.StateRunning, store.StateFailed, store.StateEnded}[i%4]
		if to != store.StateStarting {
			if _, err := s.Update(ctx, rec.ID, func(r *store.Sandbox) error {
				r.State, r.AllocID = to, "alloc-"+r.ID
				if !to.Live() {
					r.EndReason, r.EndedAt = "destroyed", t0.Add(time.Minute)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 3 {
		if err := s.PutNode(ctx, store.Node{Name: fmt.Sprintf("w%d", i), Enrollment: "sandbox", State: "active", MaxSandboxes: int64(4 + i), UpdatedAt: t0}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		tok := store.Token{JTI: fmt.Sprintf("tok-%d", i), Role: "agent", Subject: fmt.Sprintf("a%d", i), CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), MaxLiveSandboxes: 3}
		if err := s.PutToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			if err := s.RevokeToken(ctx, tok.JTI, t0.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return ids
}

func openBolt(t *testing.T) *bolt.Store {
	t.Helper()
	s, err := bolt.Open(filepath.Join(t.TempDir(), "sandgate.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func openPostgres(t *testing.T, dsn string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestMoveCarriesEveryRecordNodeAndTokenFromBoltToPostgres(t *testing.T) {
	ctx := context.Background()
	from := openBolt(t)
	ids := history(t, from)
	to := openPostgres(t, pgtest.Database(t))
	inv, err := maintain.Move(ctx, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Records() != 40 || inv.Nodes != 3 || inv.Tokens != 5 || inv.States[store.StateFailed] != 10 {
		t.Fatalf("moved %+v", inv)
	}
	for _, id := range ids {
		a, err1 := from.Get(ctx, id)
		b, err2 := to.Get(ctx, id)
		if err1 != nil || err2 != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("%s moved as\n%+v (%v)\nwas\n%+v (%v)", id, b, err2, a, err1)
		}
	}
	for _, list := range []func(store.Store) (any, error){
		func(s store.Store) (any, error) { return s.ListTokens(ctx) },
		func(s store.Store) (any, error) { return s.ListNodes(ctx) },
		func(s store.Store) (any, error) { return s.Due(ctx, t0.Add(2*time.Hour)) },
		func(s store.Store) (any, error) { return s.ListPage(ctx, store.Query{Principal: "agent:a1", Limit: 3}) },
	} {
		a, err1 := list(from)
		b, err2 := list(to)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if pa, ok := a.(store.Page); ok { // cursors are each store's own
			pb := b.(store.Page)
			a, b = pa.Items, pb.Items
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("the stores answer differently:\n%+v\n%+v", b, a)
		}
	}
	// The idempotency keys answer on the new store as on the old.
	if rec, err := to.ByIdempotencyKey(ctx, fmt.Sprintf("%064x", 1001), t0); err != nil || rec.ID != "sbx-01" {
		t.Fatalf("idempotency key after the move: %+v %v", rec.ID, err)
	}
	r, err := maintain.Check(ctx, to)
	if err != nil || len(r.Problems) != 0 || r.Schema != postgres.SchemaVersion() {
		t.Fatalf("check after the move: %+v %v", r, err)
	}
	// A second move into the now full store is refused, writing nothing.
	if _, err := maintain.Move(ctx, from, to); !errors.Is(err, maintain.ErrNotEmpty) {
		t.Fatalf("a move into a store that holds records: %v", err)
	}
}

func TestCheckFindsFiguresThatDisagreeWithTheRecords(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Database(t)
	s := openPostgres(t, dsn)
	history(t, s)
	if r, err := maintain.Check(ctx, s); err != nil || len(r.Problems) != 0 {
		t.Fatalf("check of a consistent store: %+v %v", r.Problems, err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	for _, q := range []string{
		`UPDATE node_usage SET sandboxes = sandboxes + 1 WHERE node = 'w1'::bytea`,
		`UPDATE principal_usage SET cpu_mhz = 0 WHERE principal = 'agent:a0'::bytea`,
		`UPDATE state_counts SET n = n + 7 WHERE state = 4 AND shard = (SELECT min(shard) FROM state_counts WHERE state = 4)`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	r, err := maintain.Check(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(r.Problems, "\n")
	for _, want := range []string{"node w1: use", "principal agent:a0: use", "counts: 10 ended records, but the count says 17"} {
		if !strings.Contains(got, want) {
			t.Errorf("check did not report %q; it reported:\n%s", want, got)
		}
	}
	if len(r.Problems) != 3 {
		t.Errorf("check reported %d problems, want 3:\n%s", len(r.Problems), got)
	}
}
