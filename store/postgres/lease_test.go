package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"sandgate/internal/pgtest"
	"sandgate/store"
	"sandgate/store/postgres"
)

func live(id string) store.Sandbox {
	now := time.Now().UTC()
	return store.Sandbox{ID: id, Node: "w1", Principal: "agent:a", State: store.StateStarting, CPUMHz: 100, MemoryMB: 64,
		CreatedAt: now, ExpiresAt: now.Add(time.Hour), CeilingAt: now.Add(time.Hour)}
}

func TestALeaseHasOneHolderAndFencesTheOneThatLostIt(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Database(t)
	a, b := open2(t, dsn), open2(t, dsn)
	la, err := a.AcquireLease(ctx, "background", "replica-a", time.Minute)
	if err != nil || la.Holder != "replica-a" || la.Epoch != 1 {
		t.Fatalf("first acquire: %+v %v", la, err)
	}
	if lb, err := b.AcquireLease(ctx, "background", "replica-b", time.Minute); err != nil || lb.Holder != "replica-a" || lb.Epoch != 1 {
		t.Fatalf("acquire of a held lease: %+v %v; want it left with replica-a", lb, err)
	}
	if l, err := a.AcquireLease(ctx, "background", "replica-a", time.Minute); err != nil || l.Epoch != 1 || !l.Expires.After(la.Expires.Add(-time.Second)) {
		t.Fatalf("renewal: %+v %v; want epoch 1 and a later expiry", l, err)
	}
	fenceA := store.WithFence(ctx, la)
	if err := a.Reserve(fenceA, live("s1"), nil); err != nil {
		t.Fatalf("a write under the held lease: %v", err)
	}
	if err := b.ReleaseLease(ctx, "background", "replica-b"); err != nil { // not b's: nothing happens
		t.Fatal(err)
	}
	if err := a.ReleaseLease(ctx, "background", "replica-a"); err != nil {
		t.Fatal(err)
	}
	lb, err := b.AcquireLease(ctx, "background", "replica-b", time.Minute)
	if err != nil || lb.Holder != "replica-b" || lb.Epoch != 2 {
		t.Fatalf("acquire after the release: %+v %v; want replica-b at epoch 2", lb, err)
	}
	// replica-a, still believing it holds the lease, writes nothing.
	writes := map[string]func(context.Context) error{
		"Reserve": func(ctx context.Context) error { return a.Reserve(ctx, live("s2"), nil) },
		"Update": func(ctx context.Context) error {
			_, err := a.Update(ctx, "s1", func(r *store.Sandbox) error { r.State, r.EndReason = store.StateEnded, "expired"; return nil })
			return err
		},
		"Prune":    func(ctx context.Context) error { _, err := a.Prune(ctx, time.Now().Add(time.Hour), 10); return err },
		"PutNode":  func(ctx context.Context) error { return a.PutNode(ctx, store.Node{Name: "w9"}) },
		"PutToken": func(ctx context.Context) error { return a.PutToken(ctx, store.Token{JTI: "j9"}) },
		"Revoke":   func(ctx context.Context) error { return a.RevokeToken(ctx, "j9", time.Time{}) },
	}
	for name, write := range writes {
		if err := write(fenceA); !errors.Is(err, store.ErrFenced) {
			t.Errorf("%s under a lost lease: %v, want store.ErrFenced", name, err)
		}
	}
	if rec, err := b.Get(ctx, "s1"); err != nil || rec.State != store.StateStarting {
		t.Fatalf("s1 after the fenced writes: %+v %v", rec.State, err)
	}
	if _, err := b.Get(ctx, "s2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a fenced Reserve stored its record: %v", err)
	}
	if err := b.Reserve(store.WithFence(ctx, lb), live("s3"), nil); err != nil {
		t.Fatalf("the new holder's write: %v", err)
	}
}

// LeaseHeld answers for the holder alone, by the database's clock, and
// changes nothing: a lease never taken, released, expired or another's
// is not held.
func TestLeaseHeldNamesTheHolderOnlyWhileItsLeaseLasts(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Database(t)
	a, b := open2(t, dsn), open2(t, dsn)
	held := func(st *postgres.Store, name, holder string) bool {
		t.Helper()
		ok, err := st.LeaseHeld(ctx, name, holder)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if held(b, "replica/gw-a", "gw-a#1") {
		t.Fatal("a lease never taken is held")
	}
	if _, err := a.AcquireLease(ctx, "replica/gw-a", "gw-a#1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if !held(b, "replica/gw-a", "gw-a#1") {
		t.Fatal("the holder's lease, read from another replica, is not held")
	}
	if held(b, "replica/gw-a", "gw-a#0") || held(b, "replica/gw-b", "gw-a#1") {
		t.Fatal("another holder, or another lease, is held")
	}
	if l, err := b.AcquireLease(ctx, "replica/gw-a", "gw-a#1-copy", time.Minute); err != nil || l.Holder != "gw-a#1" {
		t.Fatalf("after LeaseHeld the lease is %+v %v; want it unchanged", l, err)
	}
	if err := a.ReleaseLease(ctx, "replica/gw-a", "gw-a#1"); err != nil {
		t.Fatal(err)
	}
	if held(b, "replica/gw-a", "gw-a#1") {
		t.Fatal("a released lease is held")
	}
	if _, err := a.AcquireLease(ctx, "replica/gw-a", "gw-a#2", 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for held(b, "replica/gw-a", "gw-a#2") {
		if time.Now().After(deadline) {
			t.Fatal("a lease of 200 ms is still held after 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestAnExpiredLeaseIsTakenOverWithANewEpoch(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Database(t)
	a, b := open2(t, dsn), open2(t, dsn)
	la, err := a.AcquireLease(ctx, "background", "replica-a", 300*time.Millisecond)
	if err != nil || la.Holder != "replica-a" {
		t.Fatalf("%+v %v", la, err)
	}
	// replica-a stops renewing (killed, or cut off from the database).
	deadline := time.Now().Add(30 * time.Second)
	var lb store.Lease
	for {
		if lb, err = b.AcquireLease(ctx, "background", "replica-b", time.Minute); err != nil {
			t.Fatal(err)
		}
		if lb.Holder == "replica-b" || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // a poll interval, not a wait tuned to the expiry
	}
	if lb.Holder != "replica-b" || lb.Epoch != la.Epoch+1 {
		t.Fatalf("after the expiry: %+v, want replica-b at epoch %d", lb, la.Epoch+1)
	}
	if err := a.Reserve(store.WithFence(ctx, la), live("late"), nil); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a write under the expired lease: %v", err)
	}
}

func TestRacingReplicasElectOneHolder(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Database(t)
	const replicas = 8
	stores := make([]*postgres.Store, replicas)
	for i := range stores {
		stores[i] = open2(t, dsn)
	}
	got := make([]store.Lease, replicas)
	var wg sync.WaitGroup
	for i := range stores {
		wg.Go(func() {
			l, err := stores[i].AcquireLease(ctx, "background", fmt.Sprintf("replica-%d", i), time.Minute)
			if err != nil {
				t.Error(err)
			}
			got[i] = l
		})
	}
	wg.Wait()
	holders := map[string]bool{}
	for _, l := range got {
		holders[l.Holder] = true
		if l.Epoch != 1 {
			t.Errorf("epoch %d after one election", l.Epoch)
		}
	}
	if len(holders) != 1 {
		t.Fatalf("replicas see %d holders: %v", len(holders), holders)
	}
}

func open2(t *testing.T, dsn string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
