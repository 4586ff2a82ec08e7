package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"sandgate/store"
)

func testIdempotency(t *testing.T, open func(*testing.T) store.Store) {
	ctx := context.Background()
	keyed := func(id, key string, created time.Time) store.Sandbox {
		rec := sandbox(id, "w1", "alice")
		rec.IdempotencyKey, rec.RequestDigest, rec.CreatedAt = key, "body-"+key, created
		return rec
	}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

	t.Run("a key answers its record within the window, and a repeat is refused", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		mustReserve(t, s, keyed("a", "k1", t0))
		got, err := s.ByIdempotencyKey(ctx, "k1", t0.Add(-time.Hour))
		if err != nil || got.ID != "a" || got.RequestDigest != "body-k1" {
			t.Fatalf("ByIdempotencyKey = %+v, %v", got, err)
		}
		err = s.Reserve(ctx, keyed("b", "k1", t0.Add(time.Hour)), admitAll)
		var conflict *store.IdempotencyConflictError
		if !errors.As(err, &conflict) || conflict.ID != "a" {
			t.Fatalf("a second reservation of the key: %v", err)
		}
		if _, err := s.Get(ctx, "b"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the refused repeat was stored: %v", err)
		}
		if _, err := s.ByIdempotencyKey(ctx, "k2", t0.Add(-time.Hour)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("an unused key: %v", err)
		}
		if _, err := s.ByIdempotencyKey(ctx, "k1", t0.Add(time.Second)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a key older than since: %v", err)
		}
	})

	t.Run("past the window, or after a failed create, the key reserves anew", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		mustReserve(t, s, keyed("a", "k1", t0))
		mustReserve(t, s, keyed("b", "k1", t0.Add(store.IdempotencyWindow+time.Second)))
		got, err := s.ByIdempotencyKey(ctx, "k1", t0)
		if err != nil || got.ID != "b" {
			t.Fatalf("the newest record of the key: %+v, %v", got, err)
		}
		if _, err := s.Update(ctx, "b", func(r *store.Sandbox) error { r.State = store.StateFailed; return nil }); err != nil {
			t.Fatal(err)
		}
		got, err = s.ByIdempotencyKey(ctx, "k1", t0)
		if err != nil || got.ID != "a" {
			t.Fatalf("a failed record is not answered: %+v, %v", got, err)
		}
		mustReserve(t, s, keyed("c", "k1", t0.Add(store.IdempotencyWindow+2*time.Second)))
	})

	t.Run("a pruned record no longer answers its key", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		mustReserve(t, s, keyed("a", "k1", t0))
		if _, err := s.Update(ctx, "a", func(r *store.Sandbox) error {
			r.State, r.EndedAt = store.StateEnded, t0.Add(time.Minute)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.ByIdempotencyKey(ctx, "k1", t0); err != nil || got.ID != "a" {
			t.Fatalf("an ended record still answers its key: %+v, %v", got, err)
		}
		if n, err := s.Prune(ctx, t0.Add(time.Hour), 10); err != nil || n != 1 {
			t.Fatalf("Prune = %d, %v", n, err)
		}
		if _, err := s.ByIdempotencyKey(ctx, "k1", t0); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a pruned record: %v", err)
		}
		mustReserve(t, s, keyed("b", "k1", t0.Add(2*time.Hour)))
	})

	t.Run("racing reservations of one key store exactly one", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		const racers = 16
		var (
			wg        sync.WaitGroup
			mu        sync.Mutex
			won, lost int
		)
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := s.Reserve(ctx, keyed(fmt.Sprintf("r%d", i), "k1", t0), admitAll)
				var conflict *store.IdempotencyConflictError
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won++
				case errors.As(err, &conflict):
					lost++
				default:
					t.Errorf("racer %d: %v", i, err)
				}
			}()
		}
		wg.Wait()
		if won != 1 || lost != racers-1 {
			t.Fatalf("%d reserved, %d refused; want 1 and %d", won, lost, racers-1)
		}
		if got := mustNodeUsage(t, s, "w1"); got.Sandboxes != 1 {
			t.Fatalf("node use %+v after one reservation", got)
		}
	})
}
