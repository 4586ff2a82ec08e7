package crash

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sandgate/gateway/client"
	"sandgate/gateway/testhook"
	"sandgate/internal/pgtest"
	"sandgate/nomad/nomadsim"
	"sandgate/store"
	"sandgate/store/bolt"
	"sandgate/store/postgres"
)

const (
	// lanes run at once, each a gateway of its own with its own
	// simulator, data dir and points: cycle i of lane l arms point
	// i*lanes+l. The cycles, in all, are 100 (20 with -short).
	lanes = 4
	// node is the one node every lane's gateway enrolls.
	node = "worker-1"
	// jobPrefix is the bundle's job prefix (policies/data.json).
	jobPrefix = "sandgate-sbx-"
)

// atCrash is what a kill at each point leaves, in a cycle that starts with
// no live sandbox: the state of the live record ("" when none is live)
// and the number of prefixed jobs. It checks that each point sits where
// its name says; a point missing here is still crashed at and recovered
// from, only this check is skipped for it.
var atCrash = map[testhook.Point]struct {
	state store.State
	jobs  int
}{
	testhook.CreateAuthorized:  {"", 0},
	testhook.CreateAdmitted:    {"", 0},
	testhook.CreateReserved:    {store.StateStarting, 0},
	testhook.CreateRegistered:  {store.StateStarting, 1},
	testhook.CreatePlaced:      {store.StateStarting, 1},
	testhook.CreateSettled:     {store.StateRunning, 1},
	testhook.DestroyAuthorized: {store.StateRunning, 1},
	testhook.EndDecided:        {store.StateRunning, 1},
	testhook.EndPurged:         {store.StateRunning, 0},
	testhook.EndRecorded:       {"", 0},
}

// TestAGatewayKilledAtEveryStepLeavesNothingBehind is the crash loop of
// the package documentation, on the gateway's own bbolt file.
func TestAGatewayKilledAtEveryStepLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	cycles := 100
	if testing.Short() {
		cycles = 20
	}
	crashLoop(t, cycles, lanes, func(*testing.T) string { return "" })
}

// TestAGatewayOnPostgreSQLKilledAtEveryStepLeavesNothingBehind is the same
// loop on a PostgreSQL store (each lane its own database): every point
// twice. A kill there leaves the database's transactions as they
// committed, and the next start settles the rest.
func TestAGatewayOnPostgreSQLKilledAtEveryStepLeavesNothingBehind(t *testing.T) {
	pgtest.SharedDSN(t)
	t.Parallel()
	crashLoop(t, 2*len(testhook.Points), 2, func(t *testing.T) string { return pgtest.Database(t) })
}

// crashLoop runs cycles kill-and-restart cycles over lanes gateways at
// once, each on the store dsn gives it ("": its bbolt file).
func crashLoop(t *testing.T, cycles, lanes int, dsn func(*testing.T) string) {
	built := time.Now()
	bin, err := hookedBinary()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the test-hook build took %s", time.Since(built).Round(time.Millisecond))
	var mu sync.Mutex
	seen := map[testhook.Point]int{}
	// The lanes run at once, whatever -parallel says: a restart is CPU
	// bound (the policy bundle is compiled), the rest is waiting.
	var wg sync.WaitGroup
	for l := range lanes {
		wg.Go(func() {
			t.Run(fmt.Sprintf("lane-%d", l), func(t *testing.T) {
				var points []testhook.Point
				for i := l; i < cycles; i += lanes {
					points = append(points, testhook.Points[i%len(testhook.Points)])
				}
				runLane(t, bin, dsn(t), points, func(p testhook.Point) { mu.Lock(); seen[p]++; mu.Unlock() })
			})
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	total := 0
	for _, p := range testhook.Points {
		if seen[p] == 0 {
			t.Errorf("the gateway never paused at %s", p)
		}
		total += seen[p]
	}
	if total != cycles {
		t.Errorf("%d pauses, want %d", total, cycles)
	}
	t.Logf("pauses per point: %v", seen)
}

// runLane crashes one gateway at each of points in turn.
func runLane(t *testing.T, bin, dsn string, points []testhook.Point, paused func(testhook.Point)) {
	simCfg := nomadsim.DefaultConfig()
	simCfg.RunDelay = 20 * time.Millisecond
	sim, simURL := nomadsim.NewTestServer(t, simCfg)
	g := newGateway(t, bin, simURL, node, dsn)
	// The first process is armed through the environment, for its whole
	// life; every restart only through the pause file.
	g.start(points[0])
	op := g.client(g.operator)
	ctx := t.Context()
	minted, err := op.MintToken(ctx, client.MintRequest{Role: new(client.RoleAgent), Subject: new("crash-agent"), TTLSeconds: new(int64(7200))})
	if err != nil {
		t.Fatalf("mint the agent token: %v", err)
	}
	agent := minted.Token
	began := time.Now()
	var restarts time.Duration
	defer func() {
		t.Logf("%d cycles in %s, of which restarts until listening %s", len(points), time.Since(began).Round(time.Millisecond), restarts.Round(time.Millisecond))
	}()
	for i, p := range points {
		if i > 0 {
			g.arm(p)
		}
		got := drive(t, g, agent)
		if got != p {
			t.Fatalf("cycle %d: armed %s, the gateway paused at %q (\"\": a create and a destroy passed it)", i, p, got)
		}
		paused(p)
		g.kill9()
		g.arm("")
		checkCrashState(t, g, p, sim)
		restart := time.Now()
		g.start("")
		restarts += time.Since(restart)
		op = g.client(g.operator)
		waitSettled(t, op, sim, fmt.Sprintf("cycle %d, after a kill at %s", i, p))
		// Later requests succeed: every sandbox the crash left is destroyed.
		live, err := op.ListSandboxes(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, sb := range live {
			if err := op.DestroySandbox(ctx, sb.ID); err != nil {
				t.Fatalf("cycle %d: destroy %s after a kill at %s: %v", i, sb.ID, p, err)
			}
		}
		waitSettled(t, op, sim, fmt.Sprintf("cycle %d, after the clean-up", i))
	}
	g.stop()
	st := openStore(t, g)
	live := checkBudgets(t, st, "at the end")
	_ = st.Close()
	if len(live) != 0 || len(prefixed(sim.Jobs())) != 0 {
		t.Fatalf("at the end: live records %v, jobs %v", live, sim.Jobs())
	}
}

// drive sends a create with the agent token and, when it answers, a
// destroy of the new sandbox with its session token; it returns the
// point the gateway paused at, or "" when both answered.
func drive(t *testing.T, g *gateway, agent string) testhook.Point {
	t.Helper()
	var sb client.Sandbox
	var createErr error
	done := call(func(ctx context.Context) {
		sb, createErr = g.client(agent).CreateSandbox(ctx, client.CreateRequest{Node: new(node), CPUMHz: new(int64(100)), MemoryMB: new(int64(128)), TTLSeconds: new(int64(3600))})
	})
	if p := g.pausedAt(done); p != "" {
		return p
	}
	if createErr != nil || sb.State != client.StateRunning || sb.Token == "" {
		t.Fatalf("create: %v (state %q)", createErr, sb.State)
	}
	var destroyErr error
	done = call(func(ctx context.Context) { destroyErr = g.client(sb.Token).DestroySandbox(ctx, sb.ID) })
	if p := g.pausedAt(done); p != "" {
		return p
	}
	if destroyErr != nil {
		t.Fatalf("destroy: %v", destroyErr)
	}
	return ""
}

// openStore opens the gateway's store: its database, or its data dir's
// bbolt file (the gateway must not be running then).
func openStore(t *testing.T, g *gateway) store.Store {
	t.Helper()
	if g.dsn != "" {
		st, err := postgres.Open(t.Context(), g.dsn, postgres.Options{})
		if err != nil {
			t.Fatalf("open the store: %v", err)
		}
		return st
	}
	st, err := bolt.Open(filepath.Join(g.dir, "sandgate.db"), bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	return st
}

// checkCrashState checks the store as the kill at p left it: its budget
// use is its live records' (the store's own transactions guarantee that at
// any crash), and the point's step is where its name says.
func checkCrashState(t *testing.T, g *gateway, p testhook.Point, sim *nomadsim.Server) {
	t.Helper()
	st := openStore(t, g)
	defer func() { _ = st.Close() }()
	live := checkBudgets(t, st, "killed at "+string(p))
	want, ok := atCrash[p]
	if !ok {
		t.Logf("no expected crash state for %s: only the recovery is checked", p)
		return
	}
	states := []store.State{}
	for _, r := range live {
		states = append(states, r.State)
	}
	jobs := prefixed(sim.Jobs())
	wantStates := []store.State{}
	if want.state != "" {
		wantStates = append(wantStates, want.state)
	}
	if !slices.Equal(states, wantStates) || len(jobs) != want.jobs {
		t.Fatalf("killed at %s: live records in %v and %d jobs %v; the point's step leaves %v and %d", p, states, len(jobs), jobs, wantStates, want.jobs)
	}
}

// errProbe aborts the reservation that reads a principal's budget use.
var errProbe = errors.New("probe: read the use and write nothing")

// checkBudgets checks the budget use the store holds per node and per
// principal against the sum over its live records, and that no terminal
// record keeps a session token; it returns the live records.
func checkBudgets(t *testing.T, st store.Store, when string) []store.Sandbox {
	t.Helper()
	ctx := t.Context()
	all, err := st.List(ctx, store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var live []store.Sandbox
	byNode, byPrincipal := map[string]store.Usage{}, map[string]store.Usage{}
	for _, r := range all {
		if _, ok := byPrincipal[r.Principal]; !ok {
			byPrincipal[r.Principal] = store.Usage{}
		}
		if !r.State.Live() {
			if r.TokenDigest != "" {
				t.Errorf("%s: %s record %s keeps its session token", when, r.State, r.ID)
			}
			continue
		}
		live = append(live, r)
		add := func(u store.Usage) store.Usage {
			u.Sandboxes++
			u.CPUMHz += r.CPUMHz
			u.MemoryMB += r.MemoryMB
			return u
		}
		byNode[r.Node] = add(byNode[r.Node])
		byPrincipal[r.Principal] = add(byPrincipal[r.Principal])
	}
	got, err := st.NodeUsage(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	if got != byNode[node] {
		t.Errorf("%s: node %s holds %+v of its budget, its live records %+v", when, node, got, byNode[node])
	}
	for principal, want := range byPrincipal {
		var got store.Usage
		err := st.Reserve(ctx, store.Sandbox{ID: "crash-probe", JobID: jobPrefix + "crash-probe", Node: node, Principal: principal, State: store.StateStarting},
			func(f store.ReserveFacts) error { got = f.Principal; return errProbe })
		if !errors.Is(err, errProbe) {
			t.Fatalf("%s: probe the use of %s: %v", when, principal, err)
		}
		if got != want {
			t.Errorf("%s: principal %s holds %+v, its live records %+v", when, principal, got, want)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return live
}

// waitSettled waits until the running gateway and the simulator agree:
// no record starting, every prefixed job a live record's (no orphan),
// every live record's job present (no ghost), and the node's budget use
// as GET /v1/hosts reports it equal to the live records'.
func waitSettled(t *testing.T, op *client.Client, sim *nomadsim.Server, when string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		if last = settled(t.Context(), op, sim); last == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not settled within 30 s: %v", when, last)
}

func settled(ctx context.Context, op *client.Client, sim *nomadsim.Server) error {
	live, err := op.ListSandboxes(ctx, false)
	if err != nil {
		return err
	}
	var liveJobs []string
	var used client.BudgetUsed
	for _, sb := range live {
		if sb.State == client.StateStarting {
			return fmt.Errorf("sandbox %s is still starting", sb.ID)
		}
		liveJobs = append(liveJobs, jobPrefix+sb.ID)
		used.Sandboxes++
		used.CPUMHz += sb.CPUMHz
		used.MemoryMB += sb.MemoryMB
	}
	jobs := prefixed(sim.Jobs())
	var orphans, ghosts []string
	for _, j := range jobs {
		if !slices.Contains(liveJobs, j) {
			orphans = append(orphans, j)
		}
	}
	for _, j := range liveJobs {
		if !slices.Contains(jobs, j) {
			ghosts = append(ghosts, j)
		}
	}
	if len(orphans) > 0 || len(ghosts) > 0 {
		return fmt.Errorf("orphan jobs %v, ghost records %v", orphans, ghosts)
	}
	hosts, err := op.ListHosts(ctx)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		if h.Name == node {
			if h.Budget.Used != used {
				return fmt.Errorf("node %s: budget use %+v, live records %+v", node, h.Budget.Used, used)
			}
			return nil
		}
	}
	return fmt.Errorf("GET /v1/hosts lists no %s", node)
}

// prefixed keeps the sandbox jobs of ids.
func prefixed(ids []string) []string {
	var out []string
	for _, id := range ids {
		if strings.HasPrefix(id, jobPrefix) {
			out = append(out, id)
		}
	}
	return out
}
