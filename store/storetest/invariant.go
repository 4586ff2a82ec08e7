package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
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
	t.Run("indexes agree with the records after concurrent writes, prunes and reads", func(t *testing.T) {
		t.Parallel()
		testConcurrentIndexes(t, open(t))
	})
}

// testConcurrentIndexes runs writers (reserve, then move through states
// and expiry changes), a pruner and readers (paging, Due, Counts) at once,
// then compares every index with the records. Readers check what holds
// while writes run: pages in strict listing order, no record twice in one
// walk, counts never negative.
func testConcurrentIndexes(t *testing.T, s store.Store) {
	const (
		writers = 6
		each    = 25
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ctx := context.Background()
	nodes := []string{"w1", "w2", "w1\x00"}
	principals := []string{"agent:alice", "agent:al", "operator:ops"}
	label := [2]string{"team", "a"}
	states := []store.State{store.StateRunning, store.StateFailed, store.StateEnded}
	var ever []string
	var everMu sync.Mutex
	done := make(chan struct{})

	var writes, others sync.WaitGroup
	for g := range writers {
		writes.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(g))) //nolint:gosec // a reproducible test sequence
			for i := range each {
				rec := sandbox(fmt.Sprintf("c%d-%02d", g, i), nodes[rng.IntN(len(nodes))], principals[rng.IntN(len(principals))])
				rec.CreatedAt = base.Add(time.Duration(rng.IntN(30)) * time.Second)
				rec.ExpiresAt = base.Add(time.Duration(rng.IntN(600)) * time.Second)
				rec.Labels = map[string]string{"team": []string{"a", "b"}[rng.IntN(2)]}
				if err := s.Reserve(ctx, rec, admitAll); err != nil {
					t.Errorf("Reserve(%s): %v", rec.ID, err)
					return
				}
				everMu.Lock()
				ever = append(ever, rec.ID)
				everMu.Unlock()
				for range rng.IntN(3) {
					to := states[rng.IntN(len(states))]
					expires := base.Add(time.Duration(rng.IntN(600)) * time.Second)
					ended := base.Add(time.Duration(rng.IntN(300)) * time.Second)
					_, err := s.Update(ctx, rec.ID, func(r *store.Sandbox) error {
						if !r.State.Live() && to.Live() {
							return nil
						}
						r.State, r.ExpiresAt = to, expires
						if !to.Live() {
							r.EndedAt = ended
						}
						return nil
					})
					if errors.Is(err, store.ErrNotFound) {
						break // ended, then pruned meanwhile
					}
					if err != nil {
						t.Errorf("Update(%s): %v", rec.ID, err)
					}
				}
			}
		})
	}
	others.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			if _, err := s.Prune(ctx, base.Add(time.Duration(i%300)*time.Second), 3); err != nil {
				t.Errorf("Prune: %v", err)
				return
			}
		}
	})
	for range 2 {
		others.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				walkPages(t, s, store.Query{Limit: 4})
				walkPages(t, s, store.Query{Principal: principals[0], States: []store.State{store.StateStarting, store.StateRunning}, Limit: 3})
				if _, err := s.Due(ctx, base.Add(5*time.Minute)); err != nil {
					t.Errorf("Due: %v", err)
				}
				counts, err := s.Counts(ctx)
				if err != nil {
					t.Errorf("Counts: %v", err)
				}
				for st, n := range counts {
					if n < 0 {
						t.Errorf("Counts[%s] = %d", st, n)
					}
				}
			}
		})
	}
	writes.Wait()
	close(done)
	others.Wait()
	if t.Failed() {
		return
	}
	times := []time.Time{base, base.Add(2 * time.Minute), base.Add(time.Hour)}
	checkIndexes(t, s, ever, principals, nodes, label, times)
	checkBudget(t, s, nodes, principals)
}

// walkPages follows q's cursors to the end while other goroutines write,
// and reports an item out of listing order or listed twice.
func walkPages(t *testing.T, s store.Store, q store.Query) {
	seen := map[string]bool{}
	var prev *store.Sandbox
	for range 10000 {
		page, err := s.ListPage(context.Background(), q)
		if err != nil {
			t.Errorf("ListPage(%+v): %v", q, err)
			return
		}
		for i := range page.Items {
			r := &page.Items[i]
			if seen[r.ID] {
				t.Errorf("ListPage walk listed %s twice", r.ID)
			}
			seen[r.ID] = true
			if prev != nil && byCreated(*prev, *r) >= 0 {
				t.Errorf("ListPage walk listed %s after %s", r.ID, prev.ID)
			}
			prev = r
		}
		if page.Next == "" {
			return
		}
		q.Cursor = page.Next
	}
	t.Errorf("ListPage(%+v): cursors never end", q)
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

// testRandomHistory applies random reservations, updates (of state,
// times and labels; valid and not) and prunes, and after each step checks
// every record's state against a model and the store's use against the
// live records, and every few steps ListPage, List, Due and Counts against
// a brute-force reading of every record. Principals and nodes include 0x00 bytes, bytes
// above 0x7f and prefixes of one another, so a key encoding that lets one
// owner's keys run into another's fails here.
func testRandomHistory(t *testing.T, s store.Store) {
	const steps = 300
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x5a4d6a7e)) //nolint:gosec // a reproducible test sequence, not a secret
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	at := func(maxSeconds int) time.Time { return base.Add(time.Duration(rng.IntN(maxSeconds)) * time.Second) }
	ctx := context.Background()
	nodes := []string{"w1", "w1\x00", "w\u00ff", "w"}
	principals := []string{"agent:alice", "agent:al", "agent:al\x00ice", "operator:ops", "agent:\u00ffbob"}
	label := [2]string{"team", "a"}
	states := []store.State{store.StateStarting, store.StateRunning, store.StateFailed, store.StateEnded}
	model := map[string]store.State{}
	var known, ever []string // known: stored now; ever: every id reserved
	probeTimes := []time.Time{base.Add(-time.Hour), base, base.Add(90 * time.Second), base.Add(10 * time.Minute)}

	for step := range steps {
		switch op := rng.IntN(10); {
		case len(known) == 0 || op < 5:
			id := fmt.Sprintf("r%03d", step)
			taken := len(known) > 0 && rng.IntN(10) == 0
			if taken {
				id = pick(known)
			}
			rec := sandbox(id, pick(nodes), pick(principals))
			rec.CPUMHz, rec.MemoryMB = rng.Int64N(2000), rng.Int64N(4096)
			rec.State = states[rng.IntN(2)]
			rec.CreatedAt = at(60) // ties on purpose: order falls back to the id
			rec.ExpiresAt, rec.CeilingAt = at(600), at(600)
			rec.Labels = map[string]string{"team": pick([]string{"a", "b"})}
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
				ever = append(ever, id)
			}
		case op < 9:
			id, to := pick(known), states[rng.IntN(len(states))]
			fail := rng.IntN(10) == 0
			change := rng.IntN(4)
			_, err := s.Update(ctx, id, func(r *store.Sandbox) error {
				r.State = to
				switch change {
				case 0:
					r.ExpiresAt = at(600)
				case 1:
					r.Labels = map[string]string{"team": pick([]string{"a", "b"})}
				case 2:
					r.CreatedAt = at(60)
				}
				if !to.Live() && rng.IntN(3) > 0 {
					r.EndedAt = at(300)
				}
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
		default:
			cutoff, limit := at(300), 1+rng.IntN(4)
			want := prunable(snapshot(t, s, known), cutoff, limit)
			n, err := s.Prune(ctx, cutoff, limit)
			if err != nil || n != len(want) {
				t.Fatalf("step %d: Prune(%s, %d) = %d, %v; want %d (%v)", step, cutoff, limit, n, err, len(want), want)
			}
			for _, id := range want {
				if _, err := s.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("step %d: Get(%s) after Prune = %v, want ErrNotFound", step, id, err)
				}
				delete(model, id)
				known = slices.DeleteFunc(known, func(k string) bool { return k == id })
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
		if step%4 == 0 || step == steps-1 { // every step would cost seconds under -race
			checkIndexes(t, s, ever, principals, nodes, label, probeTimes)
		}
	}
}

// prunable is Prune's meaning, written out: the ids of the first limit
// terminal records ended before cutoff, oldest first (a zero EndedAt
// counts as UpdatedAt), then by id.
func prunable(recs []store.Sandbox, cutoff time.Time, limit int) []string {
	ended := func(r store.Sandbox) time.Time {
		if r.EndedAt.IsZero() {
			return r.UpdatedAt
		}
		return r.EndedAt
	}
	var old []store.Sandbox
	for _, r := range recs {
		if !r.State.Live() && ended(r).Before(cutoff) {
			old = append(old, r)
		}
	}
	slices.SortFunc(old, func(a, b store.Sandbox) int {
		if c := ended(a).Compare(ended(b)); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return ids(old[:min(limit, len(old))])
}
