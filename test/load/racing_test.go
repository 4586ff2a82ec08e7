package load

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sandgate/gateway/client"
)

// The racing-create scenario: small budgets on four workers, eight agents
// with quotas of one to four live sandboxes and an operator (no quota),
// sandboxes of four sizes so every budget dimension is the one that binds
// at times, and creates that name a node beside those that let the
// gateway pick one.
var (
	racingNodes = []nodeBudget{
		{name: "worker-1", max: 3, cpuMHz: 1500, memoryMB: 2048},
		{name: "worker-2", max: 2, cpuMHz: 4000, memoryMB: 1024},
		{name: "worker-3", max: 4, cpuMHz: 1000, memoryMB: 4096},
		{name: "worker-4", max: 1, cpuMHz: 2000, memoryMB: 2048},
	}
	racingQuotas = []int64{1, 2, 3, 4, 1, 2, 3, 4}
	racingSizes  = []struct{ cpu, mem int64 }{{100, 64}, {250, 256}, {500, 512}, {1000, 1024}}
)

// Sixteen creators race for the last slots; more only queue longer on
// the store's write lock (a create's admission decision runs inside the
// reservation's write transaction), and on two cores 48 creators made a
// third of the creates per second that 16 make.
const (
	racingCreators  = 16
	racingDestroyer = 8 // workers that destroy what the creators made
)

// racer is one principal of the scenario.
type racer struct {
	name  string // the principal as records name it: "<role>:<subject>"
	c     *client.Client
	quota int64 // 0: none (the operator)
}

// live is a sandbox a create made and no destroy has ended yet.
type live struct{ id, principal string }

// tally counts the outcomes of the scenario.
type tally struct {
	created, refusedB1, refusedB3, destroyed, observations atomic.Int64
}

func TestRacingCreatesNeverOverrun(t *testing.T) {
	racingCreates := racingCreatesFor(t)
	// Allocations run at once: placement is not what races here.
	g := startGateway(t, options{nodes: racingNodes, runDelay: -1})
	ctx := t.Context()
	racers := []racer{{name: "operator:load-operator", c: g.operator}}
	for i, q := range racingQuotas {
		sub := fmt.Sprintf("racer-%d", i)
		racers = append(racers, racer{name: "agent:" + sub, c: g.mintAgent(ctx, sub, q), quota: q})
	}
	limits := map[string]nodeBudget{}
	for _, n := range racingNodes {
		limits[n.name] = n
	}
	quotas := map[string]int64{}
	for _, r := range racers {
		quotas[r.name] = r.quota
	}

	var (
		n       tally
		next    atomic.Int64 // create attempts handed out
		made    = make(chan live, 64)
		failMu  sync.Mutex
		failed  []string
		started = time.Now()
	)
	fail := func(format string, args ...any) {
		failMu.Lock()
		defer failMu.Unlock()
		if len(failed) < 20 {
			failed = append(failed, fmt.Sprintf(format, args...))
		}
	}

	// The observer checks every budget and quota from the API's own
	// views while the race runs: the live list (one store snapshot) and
	// each host's budget use.
	stopObserving := make(chan struct{})
	observerDone := make(chan struct{})
	go func() {
		defer close(observerDone)
		progress := time.NewTicker(5 * time.Second)
		defer progress.Stop()
		for {
			select {
			case <-stopObserving:
				return
			case <-progress.C:
				t.Logf("%s: %d of %d creates handed out, %d created, %d refused B1, %d refused B3, %d destroyed",
					time.Since(started).Round(time.Second), min(next.Load(), racingCreates), racingCreates,
					n.created.Load(), n.refusedB1.Load(), n.refusedB3.Load(), n.destroyed.Load())
			case <-time.After(50 * time.Millisecond):
			}
			if err := observe(ctx, g.operator, limits, quotas, false); err != nil {
				fail("observation %d: %v", n.observations.Load(), err)
			}
			n.observations.Add(1)
		}
	}()

	var creators, destroyers sync.WaitGroup
	for w := range racingCreators {
		creators.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 42)) //nolint:gosec // G404: a reproducible mix of requests, not secrets
			for next.Add(1) <= racingCreates {
				r := racers[rng.IntN(len(racers))]
				size := racingSizes[rng.IntN(len(racingSizes))]
				req := client.CreateRequest{CPUMHz: new(size.cpu), MemoryMB: new(size.mem), TTLSeconds: new(int64(600)),
					Labels: map[string]string{"load": "racing"}}
				if rng.IntN(16) == 0 { // a named node: admission alone judges its budget
					req.Node = new(racingNodes[rng.IntN(len(racingNodes))].name)
				}
				if rng.IntN(2) == 0 {
					req.WaitSeconds = new(int64) // answer while it is still starting
				}
				sb, err := r.c.CreateSandbox(ctx, req)
				if err == nil {
					n.created.Add(1)
					if _, ok := limits[sb.Node]; !ok || sb.CPUMHz != size.cpu || sb.MemoryMB != size.mem || sb.Principal != r.name ||
						(req.Node != nil && sb.Node != *req.Node) {
						fail("create by %s of %+v made %+v", r.name, req, sb)
					}
					made <- live{id: sb.ID, principal: sb.Principal}
					continue
				}
				p := problemOf(err)
				switch {
				case p == nil:
					fail("create by %s: %v", r.name, err)
				case p.Status != http.StatusTooManyRequests || p.Code != client.CodeBudgetExhausted || len(p.RuleIDs) == 0:
					fail("create by %s refused otherwise than a 429 budget_exhausted: %v (rules %v)", r.name, p, p.RuleIDs)
				case slices.Contains(p.RuleIDs, "B3") && r.quota == 0:
					fail("the operator refused by its quota (B3): %v", p)
				case !slices.ContainsFunc(p.RuleIDs, func(id string) bool { return id == "B1" || id == "B3" }) ||
					slices.ContainsFunc(p.RuleIDs, func(id string) bool { return id != "B1" && id != "B3" }):
					fail("a 429 naming %v, want B1 or B3: %v", p.RuleIDs, p)
				case slices.Contains(p.RuleIDs, "B3"):
					n.refusedB3.Add(1)
				default:
					n.refusedB1.Add(1)
				}
			}
		})
	}
	// Destroyers end sandboxes as they come, some at once and some after
	// a short while, with the session's principal's own token.
	byName := map[string]*client.Client{}
	for _, r := range racers {
		byName[r.name] = r.c
	}
	for w := range racingDestroyer {
		destroyers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7)) //nolint:gosec // G404: reproducible delays, not secrets
			for sb := range made {
				if d := rng.IntN(4); d > 0 {
					time.Sleep(time.Duration(d) * 5 * time.Millisecond)
				}
				c := byName[sb.principal]
				if c == nil {
					fail("a sandbox of an unknown principal %q", sb.principal)
					c = g.operator
				}
				if err := c.DestroySandbox(ctx, sb.id); err != nil {
					fail("destroy %s: %v", sb.id, err)
					continue
				}
				n.destroyed.Add(1)
			}
		})
	}
	creators.Wait()
	close(made)
	destroyers.Wait()
	elapsed := time.Since(started)
	close(stopObserving)
	<-observerDone

	// At rest: fill the nodes again, then the budget in use must equal the
	// sum over the live records; after destroying them, zero.
	for _, r := range racers {
		for i := range 6 {
			size := racingSizes[i%len(racingSizes)]
			if _, err := r.c.CreateSandbox(ctx, client.CreateRequest{CPUMHz: new(size.cpu), MemoryMB: new(size.mem)}); err != nil {
				if p := problemOf(err); p == nil || p.Status != http.StatusTooManyRequests {
					fail("filling up: %v", err)
				}
				break
			}
		}
	}
	if err := observe(ctx, g.operator, limits, quotas, true); err != nil {
		fail("at rest, filled: %v", err)
	}
	left, err := g.operator.ListSandboxes(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range left {
		if err := g.operator.DestroySandbox(ctx, sb.ID); err != nil {
			fail("destroy %s: %v", sb.ID, err)
		}
	}
	if err := observe(ctx, g.operator, limits, quotas, true); err != nil {
		fail("at rest, emptied: %v", err)
	}
	t.Logf("at rest: %d sandboxes filled the nodes again, then were destroyed", len(left))
	for _, f := range failed {
		t.Error(f)
	}
	t.Logf("%d creates in %s by %d workers (%d destroying): %d created, %d refused B1, %d refused B3, %d destroyed, %d observations",
		racingCreates, elapsed.Round(time.Millisecond), racingCreators, racingDestroyer,
		n.created.Load(), n.refusedB1.Load(), n.refusedB3.Load(), n.destroyed.Load(), n.observations.Load())
	if got := n.created.Load() + n.refusedB1.Load() + n.refusedB3.Load(); got != racingCreates && len(failed) == 0 {
		t.Errorf("%d creates accounted for, want %d", got, racingCreates)
	}
	if n.created.Load() < 100 || n.refusedB1.Load() == 0 || n.refusedB3.Load() == 0 {
		t.Errorf("the race did not exercise both budgets and quotas: %d created, %d B1, %d B3",
			n.created.Load(), n.refusedB1.Load(), n.refusedB3.Load())
	}
}

// racingCreatesFor is how many creates the race makes: 10,000, or 1,000
// under the race detector (which makes each policy decision about seven
// times slower: 10,000 would take six minutes of make test, 1,000 take
// about 40 s), or SANDGATE_RACING_CREATES; make soak runs the 10,000
// without the race detector.
func racingCreatesFor(t *testing.T) int64 {
	t.Helper()
	n := int64(10000)
	if raceEnabled {
		n = 1000
	}
	if v := os.Getenv("SANDGATE_RACING_CREATES"); v != "" {
		var err error
		if n, err = strconv.ParseInt(v, 10, 64); err != nil || n < 100 {
			t.Fatalf("SANDGATE_RACING_CREATES %q: want an integer of at least 100", v)
		}
	}
	return n
}

// observe reads the live sandboxes and the hosts and checks that no node
// holds more than its budget, no agent more than its quota, and each
// host's reported use is within its limits. atRest also requires that a
// host's use equals the sum over its live records (while creates race,
// the two views are read at different moments).
func observe(ctx context.Context, op *client.Client, limits map[string]nodeBudget, quotas map[string]int64, atRest bool) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sbs, err := op.ListSandboxes(ctx, false)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	type use struct{ n, cpu, mem int64 }
	perNode, perPrincipal := map[string]use{}, map[string]int64{}
	for _, sb := range sbs {
		if sb.State != client.StateStarting && sb.State != client.StateRunning {
			return fmt.Errorf("the live list holds %s in state %s", sb.ID, sb.State)
		}
		u := perNode[sb.Node]
		perNode[sb.Node] = use{u.n + 1, u.cpu + sb.CPUMHz, u.mem + sb.MemoryMB}
		perPrincipal[sb.Principal]++
	}
	for node, u := range perNode {
		l, ok := limits[node]
		if !ok {
			return fmt.Errorf("%d live sandboxes on %s, which is not enrolled", u.n, node)
		}
		if u.n > l.max || u.cpu > l.cpuMHz || u.mem > l.memoryMB {
			return fmt.Errorf("node %s overrun: %d sandboxes, %d MHz, %d MB live; budget %d, %d MHz, %d MB",
				node, u.n, u.cpu, u.mem, l.max, l.cpuMHz, l.memoryMB)
		}
	}
	for p, k := range perPrincipal {
		q, ok := quotas[p]
		if !ok {
			return fmt.Errorf("%d live sandboxes of the unknown principal %q", k, p)
		}
		if q > 0 && k > q {
			return fmt.Errorf("agent %s overran its quota: %d live, quota %d", p, k, q)
		}
	}
	hosts, err := op.ListHosts(ctx)
	if err != nil {
		return fmt.Errorf("hosts: %w", err)
	}
	for _, h := range hosts {
		l, ok := limits[h.Name]
		if !ok {
			continue
		}
		used, lim := h.Budget.Used, h.Budget.Limits
		if lim.MaxSandboxes != l.max || lim.CPUMHz != l.cpuMHz || lim.MemoryMB != l.memoryMB {
			return fmt.Errorf("host %s shows limits %+v, enrolled with %+v", h.Name, lim, l)
		}
		if used.Sandboxes > lim.MaxSandboxes || used.CPUMHz > lim.CPUMHz || used.MemoryMB > lim.MemoryMB || used.Sandboxes < 0 {
			return fmt.Errorf("host %s reports use %+v past its limits %+v", h.Name, used, lim)
		}
		if u := perNode[h.Name]; atRest && (used.Sandboxes != u.n || used.CPUMHz != u.cpu || used.MemoryMB != u.mem) {
			return fmt.Errorf("host %s: the store holds %+v in use, its live records sum to %+v", h.Name, used, u)
		}
	}
	return nil
}
