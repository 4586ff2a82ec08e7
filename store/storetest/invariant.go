package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sandgate/store"
)

func testInvariant(t *testing.T, open func(*testing.T) store.Store) {
	t.Run("concurrent reservations never overrun a limit checked in admit", func(t *testing.T) {
		t.Parallel()
		testConcurrentReserve(t, open(t))
	})
	t.Run("use equals the live records over a random history", func(t *testing.T) {
		t.Parallel()
		testRandomHistory(t, open(t))
	})
}

// testConcurrentReserve races 200 Reserve calls against one node whose
// admit refuses at limit live sandboxes, while other goroutines end some of
// the admitted ones. In the first wave of 100, enders free up to maxEnds
// slots; the second wave of 100 runs alone and must fill the node exactly.
func testConcurrentReserve(t *testing.T, s store.Store) {
	const (
		limit   = 8
		wave    = 100
		maxEnds = 20
	)
	ctx := context.Background()
	principals := []string{"alice", "bob", "carol"}
	admit := func(f store.ReserveFacts) error {
		if f.Node.Sandboxes >= limit {
			return fmt.Errorf("%d live: %w", f.Node.Sandboxes, errNodeFull)
		}
		return nil
	}
	var serial atomic.Int64
	// run starts n reservers and returns how many were admitted; each
	// admitted id is sent on admitted when it is not nil.
	run := func(n int, admitted chan<- string) int {
		var wg sync.WaitGroup
		var ok atomic.Int64
		for range n {
			wg.Go(func() {
				i := serial.Add(1)
				rec := sandbox(fmt.Sprintf("sbx-%03d", i), "w1", principals[i%3])
				rec.CPUMHz, rec.MemoryMB = 100+i, 64*i
				err := s.Reserve(ctx, rec, admit)
				switch {
				case err == nil:
					ok.Add(1)
					if admitted != nil {
						admitted <- rec.ID
					}
				case !errors.Is(err, errNodeFull):
					t.Errorf("Reserve(%s) = %v, want nil or the admit error", rec.ID, err)
				}
			})
		}
		wg.Wait()
		return int(ok.Load())
	}

	admitted := make(chan string, wave)
	slots := make(chan struct{}, maxEnds)
	for range maxEnds {
		slots <- struct{}{}
	}
	var ends atomic.Int64
	var enders sync.WaitGroup
	for range 4 {
		enders.Go(func() {
			for id := range admitted {
				select {
				case <-slots:
				default:
					continue
				}
				if _, err := s.Update(ctx, id, setState(store.StateEnded)); err != nil {
					t.Errorf("Update(%s, ended) = %v", id, err)
					continue
				}
				ends.Add(1)
			}
		})
	}
	first := run(wave, admitted)
	close(admitted)
	enders.Wait()

	live := mustList(t, s, store.Filter{LiveOnly: true})
	if want := first - int(ends.Load()); len(live) != want {
		t.Fatalf("after the first wave: %d live, want %d admitted - %d ended = %d", len(live), first, ends.Load(), want)
	}
	if len(live) > limit {
		t.Fatalf("after the first wave: %d live on a node limited to %d", len(live), limit)
	}
	if want := min(first, maxEnds); int(ends.Load()) != want {
		t.Fatalf("%d ended, want %d", ends.Load(), want)
	}
	checkBudget(t, s, []string{"w1"}, principals)

	second := run(wave, nil)
	if want := limit - len(live); second != want {
		t.Errorf("second wave admitted %d, want the %d free slots", second, want)
	}
	live = mustList(t, s, store.Filter{LiveOnly: true})
	if len(live) != limit {
		t.Fatalf("after the second wave: %d live, want exactly %d", len(live), limit)
	}
	if got, want := mustNodeUsage(t, s, "w1"), usageOf(live); got != want {
		t.Fatalf("NodeUsage = %+v, live records sum to %+v", got, want)
	}
	checkBudget(t, s, []string{"w1"}, principals)
}

// testRandomHistory applies random reservations and updates, valid and
// not, and after each step checks every record's state against a model
// and the store's use against the live records.
func testRandomHistory(t *testing.T, s store.Store) {
	const steps = 300
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x5a4d6a7e)) //nolint:gosec // a reproducible test sequence, not a secret
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	ctx := context.Background()
	nodes := []string{"w1", "w2", "w3"}
	principals := []string{"alice", "bob", "carol"}
	states := []store.State{store.StateStarting, store.StateRunning, store.StateFailed, store.StateEnded}
	model := map[string]store.State{}
	var known []string

	for step := range steps {
		if len(known) == 0 || rng.IntN(2) == 0 {
			id := fmt.Sprintf("r%03d", step)
			taken := len(known) > 0 && rng.IntN(10) == 0
			if taken {
				id = pick(known)
			}
			rec := sandbox(id, pick(nodes), pick(principals))
			rec.CPUMHz, rec.MemoryMB = rng.Int64N(2000), rng.Int64N(4096)
			rec.State = states[rng.IntN(2)]
			rec.CreatedAt = base.Add(time.Duration(step) * time.Second)
			refuse := rng.IntN(7) == 0
			err := s.Reserve(ctx, rec, func(store.ReserveFacts) error {
				if refuse {
					return errNodeFull
				}
				return nil
			})
			switch {
			case taken:
				if !errors.Is(err, store.ErrExists) {
					t.Fatalf("step %d: Reserve(taken %s) = %v, want ErrExists", step, id, err)
				}
			case refuse:
				if !errors.Is(err, errNodeFull) {
					t.Fatalf("step %d: Reserve(%s) = %v, want the admit error", step, id, err)
				}
			case err != nil:
				t.Fatalf("step %d: Reserve(%s) = %v", step, id, err)
			default:
				model[id] = rec.State
				known = append(known, id)
			}
		} else {
			id, to := pick(known), states[rng.IntN(len(states))]
			fail := rng.IntN(10) == 0
			_, err := s.Update(ctx, id, func(r *store.Sandbox) error {
				r.State = to
				if fail {
					return errMutate
				}
				return nil
			})
			switch {
			case fail:
				if !errors.Is(err, errMutate) {
					t.Fatalf("step %d: Update(%s) = %v, want the mutate error", step, id, err)
				}
			case !model[id].Live() && to.Live():
				if !errors.Is(err, store.ErrInvalid) {
					t.Fatalf("step %d: Update(%s, %s -> %s) = %v, want ErrInvalid", step, id, model[id], to, err)
				}
			case err != nil:
				t.Fatalf("step %d: Update(%s, %s -> %s) = %v", step, id, model[id], to, err)
			default:
				model[id] = to
			}
		}
		recs := mustList(t, s, store.Filter{})
		if len(recs) != len(model) {
			t.Fatalf("step %d: %d records, want %d", step, len(recs), len(model))
		}
		for _, r := range recs {
			if r.State != model[r.ID] {
				t.Fatalf("step %d: %s is %s, want %s", step, r.ID, r.State, model[r.ID])
			}
		}
		checkBudget(t, s, nodes, principals)
	}
}
