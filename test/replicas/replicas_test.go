package replicas

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sandgate/gateway/client"
	"sandgate/internal/pgtest"
	"sandgate/store"
	"sandgate/store/maintain"
)

// createsAtOnce is how many creates are in flight at any moment.
const createsAtOnce = 24

// TestRacingCreatesOverThreeReplicasNeverOverrun sends 1,000 creates,
// spread over three replicas, against two nodes of four slots and agents
// of two: the budgets are decided in the shared database, so no node and
// no agent ever holds more than its limit, every answer is a sandbox or a
// refusal naming its rule (never a 5xx), and afterwards the budgets equal
// the live records.
func TestRacingCreatesOverThreeReplicasNeverOverrun(t *testing.T) {
	t.Parallel()
	const (
		creates = 1000
		agents  = 6
		quota   = 2
	)
	dsn := pgtest.Database(t)
	d := newDeployment(t, dsn, 3)
	ctx := context.Background()
	var tokens []string
	for i := range agents {
		q := int64(quota)
		tk, err := d.replicas[i%3].client(t, d.operator).MintToken(ctx, client.MintRequest{
			Role: new(client.RoleAgent), Subject: new(fmt.Sprintf("agent-%d", i)), TTLSeconds: new(int64(3600)),
			Quota: &client.MintQuota{MaxLiveSandboxes: &q},
		})
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, tk.Token)
	}
	db := openStore(t, dsn)
	var (
		next                   atomic.Int64
		created, refused, gone atomic.Int64
		wg                     sync.WaitGroup
		watching               = make(chan struct{})
		overrunMu              sync.Mutex
		overruns               []string
		unexpected             = make(chan string, creates)
		watcherDone            = make(chan struct{})
	)
	// A watcher reads the database while the creates race.
	go func() {
		defer close(watcherDone)
		for {
			select {
			case <-watching:
				return
			default:
			}
			if msg, err := overrun(ctx, db, quota); err != nil || msg != "" {
				overrunMu.Lock()
				overruns = append(overruns, fmt.Sprint(msg, err))
				overrunMu.Unlock()
			}
		}
	}()
	for range createsAtOnce {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= creates {
					return
				}
				r := d.replicas[i%len(d.replicas)]
				agent := r.client(t, tokens[i%agents])
				sb, err := agent.CreateSandbox(ctx, client.CreateRequest{CPUMHz: new(int64(100)), MemoryMB: new(int64(64)), TTLSeconds: new(int64(600))})
				var p *client.Problem
				switch {
				case err == nil:
					created.Add(1)
					// Every sandbox ends at once, through another replica,
					// so the slots keep changing hands while the creates
					// race.
					other := d.replicas[(i+1)%len(d.replicas)].client(t, sb.Token)
					if err := other.DestroySandbox(ctx, sb.ID); err != nil {
						unexpected <- fmt.Sprintf("destroy %s through %s: %v", sb.ID, d.replicas[(i+1)%3].name, err)
					}
					gone.Add(1)
				case errors.As(err, &p) && p.Status == http.StatusTooManyRequests && p.Code == client.CodeBudgetExhausted &&
					len(p.RuleIDs) > 0 && !slices.ContainsFunc(p.RuleIDs, func(r string) bool { return r != "B1" && r != "B3" }):
					refused.Add(1)
				default:
					unexpected <- fmt.Sprintf("create %d through %s: %v", i, r.name, err)
				}
			}
		})
	}
	wg.Wait()
	close(watching)
	<-watcherDone
	close(unexpected)
	for msg := range unexpected {
		t.Error(msg)
	}
	if len(overruns) > 0 {
		t.Fatalf("%d overruns seen while the creates raced, the first: %s", len(overruns), overruns[0])
	}
	t.Logf("%d creates over 3 replicas: %d sandboxes (each destroyed at once through another), %d refused on B1/B3",
		creates, created.Load(), refused.Load())
	if created.Load() == 0 || refused.Load() == 0 || created.Load()+refused.Load() != creates {
		t.Fatalf("created %d and refused %d of %d: want both, and nothing else", created.Load(), refused.Load(), creates)
	}
	if msg, err := overrun(ctx, db, quota); err != nil || msg != "" {
		t.Fatalf("after the race: %s %v", msg, err)
	}
	r, err := maintain.Check(ctx, db)
	if err != nil || len(r.Problems) != 0 {
		t.Fatalf("the budgets disagree with the live records after the race: %v %v", r.Problems, err)
	}
}

// TestOneIdempotencyKeySentToThreeReplicasAtOnceMakesOneSandbox: the
// repeats are decided one after the other on the key's row in the shared
// database; every answer names the one sandbox.
func TestOneIdempotencyKeySentToThreeReplicasAtOnceMakesOneSandbox(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Database(t)
	d := newDeployment(t, dsn, 3)
	ctx := context.Background()
	tk, err := d.replicas[0].client(t, d.operator).MintToken(ctx, client.MintRequest{
		Role: new(client.RoleAgent), Subject: new("retrying-agent"), TTLSeconds: new(int64(3600))})
	if err != nil {
		t.Fatal(err)
	}
	for round := range 5 {
		key := fmt.Sprintf("create-once-%d", round)
		ids := make([]string, 3*2)
		errs := make([]error, len(ids))
		var wg sync.WaitGroup
		for i := range ids {
			wg.Go(func() {
				sb, err := d.replicas[i%3].client(t, tk.Token).CreateSandbox(ctx,
					client.CreateRequest{CPUMHz: new(int64(100)), MemoryMB: new(int64(64))}, client.WithIdempotencyKey(key))
				ids[i], errs[i] = sb.ID, err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, request %d through %s: %v", round, i, d.replicas[i%3].name, err)
			}
			if ids[i] != ids[0] {
				t.Fatalf("round %d: the answers name %v, want one sandbox", round, ids)
			}
		}
		live, err := d.replicas[round%3].client(t, d.operator).ListSandboxes(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(live) != round+1 {
			t.Fatalf("round %d: %d live sandboxes, want %d (one per key)", round, len(live), round+1)
		}
	}
}

// TestKillingTheLeaseHolderHandsTheBackgroundWorkToAnother: the replica
// that runs the reaper is killed with SIGKILL; another takes the lease
// within one reaper interval, an expired sandbox is still reaped, and it
// is ended once.
func TestKillingTheLeaseHolderHandsTheBackgroundWorkToAnother(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Database(t)
	d := newDeployment(t, dsn, 3)
	ctx := context.Background()
	holder := d.holder(d.replicas, 60*time.Second)
	var others []*replica
	for _, r := range d.replicas {
		if r != holder {
			others = append(others, r)
		}
	}
	op := others[0].client(t, d.operator)
	sb, err := op.CreateSandbox(ctx, client.CreateRequest{CPUMHz: new(int64(100)), MemoryMB: new(int64(64)), TTLSeconds: new(int64(600))})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := holder.lease()
	killed := time.Now()
	holder.proc.Signal(os.Kill, 20*time.Second)
	next := d.holder(others, 60*time.Second)
	took := time.Since(killed)
	after, _ := next.lease()
	t.Logf("%s killed holding the lease at epoch %d; %s took it at epoch %d after %s (reaper interval 1s; the lease lasts %s, 2/3 of it)",
		holder.name, before.Epoch, next.name, after.Epoch, took.Round(time.Millisecond), "667ms")
	if after.Epoch <= before.Epoch {
		t.Fatalf("the new holder's epoch %d is not past the dead one's %d", after.Epoch, before.Epoch)
	}
	// The sandbox's expiry passes (moved in the database: the policy's
	// shortest lifetime is a minute).
	db := openStore(t, dsn)
	if _, err := db.Update(ctx, sb.ID, func(r *store.Sandbox) error { r.ExpiresAt = time.Now().Add(-time.Second); return nil }); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		rec, err := db.Get(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !rec.State.Live() {
			if rec.EndReason != "expired" {
				t.Fatalf("the sandbox ended %s, want expired", rec.EndReason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the expired sandbox was not reaped within 60 s of the takeover (state %s)", rec.State)
		}
		time.Sleep(50 * time.Millisecond) // a poll interval
	}
	if jobs := d.sim.Jobs(); slices.Contains(jobs, "sandgate-sbx-"+sb.ID) {
		t.Fatalf("the reaped sandbox's job is still in Nomad: %v", jobs)
	}
	// Ended once: only one replica counted it.
	var ended float64
	for _, r := range others {
		ended += r.metric(t, "sandgate_sandboxes_ended_total", `reason="expired"`)
	}
	if ended != 1 {
		t.Fatalf("the live replicas count %v expiries, want 1", ended)
	}
}

// TestACreateWaitingPastStartTimeoutIsLeftToItsReplica: a create that
// waits for a slow placement longer than start_timeout (wait_seconds may
// be longer) is its replica's while that replica is alive, however old
// its starting record: the lease holder's reconcile leaves it alone, and
// the create answers 201 with a running sandbox and its token. (Before
// replicas held a presence, the holder took such a record for one left
// by a dead replica and failed it (start_timeout): the create answered a
// sandbox without a token, or a failed placement.)
func TestACreateWaitingPastStartTimeoutIsLeftToItsReplica(t *testing.T) {
	t.Parallel()
	const runDelay = 16 * time.Second // past start_timeout (5 s) and the holder's watch of it (5 s more)
	d := deploy(t, deploymentOptions{DSN: pgtest.Database(t), Replicas: 2, RunDelay: runDelay})
	ctx := context.Background()
	holder := d.holder(d.replicas, 60*time.Second)
	other := d.replicas[0]
	if other == holder {
		other = d.replicas[1]
	}
	start := time.Now()
	sb, err := other.client(t, d.operator).CreateSandbox(ctx, client.CreateRequest{
		CPUMHz: new(int64(100)), MemoryMB: new(int64(64)), TTLSeconds: new(int64(600)), WaitSeconds: new(int64(60)),
	})
	if err != nil {
		t.Fatalf("create through %s (the holder is %s), waiting for a placement of %s: %v", other.name, holder.name, runDelay, err)
	}
	t.Logf("create through %s answered after %s: %s", other.name, time.Since(start).Round(time.Millisecond), sb.State)
	if sb.State != client.StateRunning || sb.Token == "" {
		t.Fatalf("the create answered state %q with a token of %d bytes; want running, with its token", sb.State, len(sb.Token))
	}
	if h, _ := holder.lease(); !h.Held {
		t.Logf("the lease moved during the create (%+v): the test proves less", h)
	}
	if err := holder.client(t, sb.Token).DestroySandbox(ctx, sb.ID); err != nil {
		t.Fatalf("destroy through %s with the sandbox's token: %v", holder.name, err)
	}
}

// TestRestartingTheDatabaseUnderLoadLosesAndDuplicatesNothing: while the
// database is down every request is refused with 503 (never a 500, never
// a hang); once it is back, every sandbox whose create was answered 201 is
// in the store exactly once, and the budgets equal the live records.
func TestRestartingTheDatabaseUnderLoadLosesAndDuplicatesNothing(t *testing.T) {
	t.Parallel()
	srv := pgtest.StartServer(t)
	dsn := srv.NewDatabase(t)
	d := newDeployment(t, dsn, 2)
	ctx := context.Background()
	// One agent per worker, so no principal's rate limit is what refuses.
	const workers = 8
	var agents []string
	for w := range workers {
		tk, err := d.replicas[0].client(t, d.operator).MintToken(ctx, client.MintRequest{
			Role: new(client.RoleAgent), Subject: new(fmt.Sprintf("busy-agent-%d", w)), TTLSeconds: new(int64(3600))})
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, tk.Token)
	}
	var (
		mu          sync.Mutex
		answered    = map[string]int{} // sandbox id -> 201s naming it
		unavailable atomic.Int64
		served      atomic.Int64
		bad         []string
		stop        = make(chan struct{})
		wg          sync.WaitGroup
	)
	fail := func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		bad = append(bad, msg)
	}
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				failed := len(bad) > 0
				mu.Unlock()
				if failed {
					return
				}
				r := d.replicas[(w+i)%2]
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				sb, err := r.client(t, agents[w]).CreateSandbox(rctx, client.CreateRequest{CPUMHz: new(int64(100)), MemoryMB: new(int64(64)), TTLSeconds: new(int64(600))})
				cancel()
				var p *client.Problem
				switch {
				case err == nil:
					served.Add(1)
					mu.Lock()
					answered[sb.ID]++
					mu.Unlock()
					dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
					derr := r.client(t, sb.Token).DestroySandbox(dctx, sb.ID)
					cancel()
					if derr != nil && (!errors.As(derr, &p) || p.Status != http.StatusServiceUnavailable) {
						fail(fmt.Sprintf("destroy through %s: %v", r.name, derr))
					}
				case errors.As(err, &p) && p.Status == http.StatusServiceUnavailable:
					unavailable.Add(1)
				case errors.As(err, &p) && p.Status == http.StatusTooManyRequests && p.Code == client.CodeBudgetExhausted:
					// the nodes are full for a moment
				case errors.As(err, &p) && p.Status == http.StatusTooManyRequests && p.Code == client.CodeRateLimited:
					// The gateway says when to come back: waiting that long
					// is the protocol, not a guess at the machine's speed.
					select {
					case <-time.After(p.RetryAfter):
					case <-stop:
					}
				default:
					fail(fmt.Sprintf("create through %s: %v", r.name, err))
				}
			}
		})
	}
	// halt stops the workers and reports what went wrong, once; a
	// failure ends the wait it happened in.
	halt := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
		for _, b := range bad {
			t.Error(b)
		}
	})
	defer halt()
	until := func(what string, cond func() bool) {
		t.Helper()
		waitFor(t, what, func() bool {
			mu.Lock()
			failed := len(bad) > 0
			mu.Unlock()
			return failed || cond()
		})
		if mu.Lock(); len(bad) > 0 {
			mu.Unlock()
			t.Fatalf("while waiting for %s", what)
		}
		mu.Unlock()
	}
	until("creates served before the restart", func() bool { return served.Load() >= 20 })
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	until("503s while the database is down", func() bool { return unavailable.Load() >= 20 })
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("the database was down for %s: %d answers were 503", time.Since(down).Round(time.Millisecond), unavailable.Load())
	after := served.Load()
	until("creates served after the restart", func() bool { return served.Load() >= after+20 })
	halt()
	if t.Failed() {
		t.FailNow()
	}
	db := openStore(t, dsn)
	all, err := db.List(ctx, store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]int{}
	for _, r := range all {
		stored[r.ID]++
	}
	for id, n := range answered {
		if n != 1 || stored[id] != 1 {
			t.Errorf("sandbox %s: answered 201 %d times, stored %d times; want once each", id, n, stored[id])
		}
	}
	r, err := maintain.Check(ctx, db)
	if err != nil || len(r.Problems) != 0 {
		t.Fatalf("after the restart the store is inconsistent: %v %v", r.Problems, err)
	}
	// A create answered 503 leaves no sandbox behind: its record, if
	// one was written, ends (the lease holder's reconcile ends a
	// starting record whose job is gone once start_timeout has passed).
	var unanswered int
	for _, r := range all {
		if answered[r.ID] > 0 {
			continue
		}
		unanswered++
		waitFor(t, "the record of a create answered 503 to end", func() bool {
			rec, err := db.Get(ctx, r.ID)
			return err == nil && !rec.State.Live()
		})
	}
	if r, err := maintain.Check(ctx, db); err != nil || len(r.Problems) != 0 {
		t.Fatalf("once the records of the refused creates ended: %v %v", r.Problems, err)
	}
	t.Logf("%d sandboxes answered 201, every one stored once; %d records in all, %d of creates answered 503, all ended", len(answered), len(all), unanswered)
}

// waitFor polls cond until it holds, failing after two minutes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited two minutes for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // a poll interval
	}
}

// TestCreatesOutnumberingThePoolAllAnswer sends more creates at once than
// the replica has database connections. A create decides its admission
// while it holds its budget rows locked, and that decision is written to
// the shared decision log before the answer: were the log written through
// the same pool, the creates waiting on the locked rows would hold every
// connection, the lock holder could not write its decision, and all of
// them would stall until the statement timeout refused them with a 503.
// Every create must instead be answered with a sandbox.
func TestCreatesOutnumberingThePoolAllAnswer(t *testing.T) {
	t.Parallel()
	const (
		conns = 3
		at    = 4 * conns
	)
	d := deploy(t, deploymentOptions{DSN: pgtest.Database(t), Replicas: 1, Budget: at, MaxConns: conns, PolicyDir: unlimitedPolicy(t)})
	op := d.replicas[0].client(t, d.operator)
	ctx := context.Background()
	req := client.CreateRequest{CPUMHz: new(int64(100)), MemoryMB: new(int64(64)), TTLSeconds: new(int64(600))}
	for round := range 3 {
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
			ids  []string
		)
		for range at {
			wg.Go(func() {
				sb, err := op.CreateSandbox(ctx, req)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				ids = append(ids, sb.ID)
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("round %d: %d of %d creates refused, first: %v", round, len(errs), at, errs[0])
		}
		for _, id := range ids {
			if err := op.DestroySandbox(ctx, id); err != nil {
				t.Fatalf("destroy %s: %v", id, err)
			}
		}
	}
}
