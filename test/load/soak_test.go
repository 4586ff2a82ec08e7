package load

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"sandgate/gateway/client"
)

// The soak: 50 agents (quota 3 each) on four workers with room for all of
// them, for SANDGATE_SOAK_DURATION (default 5m), each looping over the
// life of a sandbox and a handful of requests that must be refused.
const (
	soakAgents = 50
	soakQuota  = 3
	// rssEvery is how often the resident set is sampled.
	rssEvery = 2 * time.Second
	// rssMargin is the fixed part of the bound: peak RSS after warm-up
	// must stay within 2x the RSS at the end of warm-up plus rssMargin.
	rssMargin = 64 << 20
	// soakCPU and soakMemory are each sandbox's size (MHz, MB).
	soakCPU, soakMemory = 100, 128
)

// soakNodes hold 40 sandboxes of soakCPU and soakMemory each: 160 in all,
// above the 150 that 50 agents at their quota of 3 can hold, so B1 never
// refuses and B3 does.
var soakNodes = []nodeBudget{
	{name: "worker-1", max: 40, cpuMHz: 8000, memoryMB: 16384},
	{name: "worker-2", max: 40, cpuMHz: 8000, memoryMB: 16384},
	{name: "worker-3", max: 40, cpuMHz: 8000, memoryMB: 16384},
	{name: "worker-4", max: 40, cpuMHz: 8000, memoryMB: 16384},
}

// soakStats counts requests by what they were and how they were answered.
type soakStats struct {
	mu     sync.Mutex
	counts map[string]int
	total  atomic.Int64
	bad    []string
}

func (s *soakStats) ok(what string) {
	s.total.Add(1)
	s.mu.Lock()
	s.counts[what]++
	s.mu.Unlock()
}

func (s *soakStats) fail(format string, args ...any) {
	s.total.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts["unexpected"]++
	if len(s.bad) < 30 {
		s.bad = append(s.bad, fmt.Sprintf(format, args...))
	}
}

// expect records err, which must be nil (want == 0) or a problem with
// status want, code and, when given, exactly the rule ids rules.
func (s *soakStats) expect(what string, err error, want int, code string, rules ...string) bool {
	if err == nil && want == 0 {
		s.ok(what)
		return true
	}
	if ctxDone(err) {
		return false // the soak is over; the request was cut short
	}
	p := problemOf(err)
	switch {
	case want == 0:
		s.fail("%s: %v", what, err)
	case err == nil:
		s.fail("%s: succeeded, want a %d %s", what, want, code)
	case p == nil || p.Status != want || p.Code != code || (len(rules) > 0 && !slices.Equal(p.RuleIDs, rules)):
		s.fail("%s: %v (rules %v), want a %d %s %v", what, err, problemRules(p), want, code, rules)
	default:
		s.ok(what + fmt.Sprintf(" (%d)", want))
		return true
	}
	return false
}

func problemRules(p *client.Problem) []string {
	if p == nil {
		return nil
	}
	return p.RuleIDs
}

func ctxDone(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func TestSoak(t *testing.T) {
	if os.Getenv("SANDGATE_SOAK") != "1" {
		t.Skip("the soak runs with SANDGATE_SOAK=1 (make soak)")
	}
	duration := 5 * time.Minute
	if v := os.Getenv("SANDGATE_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Second {
			t.Fatalf("SANDGATE_SOAK_DURATION %q: want a duration of at least 10s", v)
		}
		duration = d
	}
	warmUp := min(30*time.Second, duration/5)
	// Registered first, so it runs last: after the gateway, its loops,
	// the simulator and every connection are closed. What ran before the
	// gateway started (the test framework's own) is not the gateway's.
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	goroutinesBefore := runtime.NumGoroutine()

	// The simulator runs in a child process: the resident set below is
	// the gateway's and the test clients'.
	g := startGateway(t, options{nodes: soakNodes, loops: 2 * time.Second, simProcess: true})
	setup := context.Background()
	agents := make([]*client.Client, soakAgents)
	for i := range agents {
		agents[i] = g.mintAgent(setup, fmt.Sprintf("soak-%02d", i), soakQuota)
	}

	stats := &soakStats{counts: map[string]int{}}
	ctx, stop := context.WithTimeout(t.Context(), duration)
	defer stop()
	start := time.Now()
	rss := newRSSWatch(t, start.Add(warmUp))
	rssDone := make(chan struct{})
	go func() { defer close(rssDone); rss.run(ctx) }()

	var wg sync.WaitGroup
	for i, a := range agents {
		other := agents[(i+1)%len(agents)]
		seed := uint64(i) //nolint:gosec // G115: i counts the 50 agents
		wg.Go(func() { soakAgent(ctx, g, a, other, seed, stats) })
	}
	// The operator looks on: hosts, the live list, the recent decisions.
	wg.Go(func() {
		for ctx.Err() == nil {
			_, err := g.operator.ListHosts(ctx)
			stats.expect("operator hosts", err, 0, "")
			_, err = g.operator.ListSandboxes(ctx, true)
			stats.expect("operator list all", err, 0, "")
			_, err = g.operator.Decisions(ctx, 100)
			stats.expect("operator decisions", err, 0, "")
			sleepCtx(ctx, time.Second)
		}
	})
	wg.Wait()
	<-rssDone
	elapsed := time.Since(start)
	goroutinesPeak := rss.peakGoroutines

	// Destroy what is left, then close the gateway: the goleak cleanup
	// checks that nothing it started outlives it.
	end, cancelEnd := context.WithTimeout(context.Background(), time.Minute)
	defer cancelEnd()
	left, err := g.operator.ListSandboxes(end, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range left {
		if err := g.operator.DestroySandbox(end, sb.ID); err != nil {
			t.Errorf("destroy %s at the end: %v", sb.ID, err)
		}
	}
	hosts, err := g.operator.ListHosts(end)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		if h.Budget.Used != (client.BudgetUsed{}) {
			t.Errorf("host %s still holds %+v after every sandbox was destroyed", h.Name, h.Budget.Used)
		}
	}
	goroutinesLive := runtime.NumGoroutine()
	beforeClose, err := procStatus()
	if err != nil {
		t.Fatal(err)
	}
	g.close()
	rssEnd, err := readRSS()
	if err != nil {
		t.Fatal(err)
	}

	names := make([]string, 0, len(stats.counts))
	for k := range stats.counts {
		names = append(names, k)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, "\n  %-64s %7d", k, stats.counts[k])
	}
	total := stats.total.Load()
	t.Logf("soak of %s (warm-up %s): %d requests, %.0f/s, by %d agents and an operator:%s",
		elapsed.Round(time.Second), warmUp, total, float64(total)/elapsed.Seconds(), soakAgents, b.String())
	t.Logf("RSS: start %s, after warm-up %s, peak %s (bound %s), %s before the gateway closed (anonymous %s, mapped files %s: the store), %s after; %d samples",
		mib(rss.start), mib(rss.base), mib(rss.peak), mib(rss.bound()), mib(beforeClose["VmRSS"]),
		mib(beforeClose["RssAnon"]), mib(beforeClose["RssFile"]), mib(rssEnd), rss.samples)
	t.Logf("goroutines: %d before the gateway, peak %d while the agents ran, %d with the gateway idle, %d after it closed",
		goroutinesBefore, goroutinesPeak, goroutinesLive, runtime.NumGoroutine())
	for _, s := range stats.bad {
		t.Error(s)
	}
	if rss.base == 0 {
		t.Errorf("no RSS sample after the warm-up of %s", warmUp)
	} else if rss.peak > rss.bound() {
		t.Errorf("RSS peaked at %s, past the bound of 2 x %s + %s", mib(rss.peak), mib(rss.base), mib(rssMargin))
	}
	if total < int64(soakAgents)*10 {
		t.Errorf("only %d requests in %s", total, elapsed)
	}
}

// soakAgent loops until ctx is done: create (waiting or not), status, an
// exec that succeeds and one whose command fails, logs, its own list, the
// refusals an agent and a session meet (E1, E3, H11, T2, B3 at the
// quota), destroy, and the session token refused afterwards (401).
func soakAgent(ctx context.Context, g *gw, a, other *client.Client, seed uint64, s *soakStats) {
	rng := rand.New(rand.NewPCG(seed, 1)) //nolint:gosec // G404: a reproducible mix of requests, not secrets
	// mine are the agent's live sandboxes.
	var mine []string
	destroy := func(id string) {
		s.expect("destroy", a.DestroySandbox(ctx, id), 0, "")
		mine = slices.DeleteFunc(mine, func(v string) bool { return v == id })
	}
	for ctx.Err() == nil {
		req := client.CreateRequest{TTLSeconds: new(int64(600)), CPUMHz: new(int64(soakCPU)), MemoryMB: new(int64(soakMemory)), Labels: map[string]string{"load": "soak"}}
		if rng.IntN(3) == 0 {
			req.WaitSeconds = new(int64)
		}
		sb, err := a.CreateSandbox(ctx, req)
		p := problemOf(err)
		budget := p != nil && p.Status == http.StatusTooManyRequests && p.Code == client.CodeBudgetExhausted
		switch {
		case len(mine) >= soakQuota:
			// B3, and B1 beside it when the picked node is full too.
			if budget && slices.Contains(p.RuleIDs, "B3") {
				s.ok("create at the quota (429 B3)")
			} else if !ctxDone(err) {
				s.fail("create at the quota: %v, want a 429 naming B3", err)
			}
			destroy(mine[rng.IntN(len(mine))])
			continue
		case budget && slices.Equal(p.RuleIDs, []string{"B1"}):
			// The node the gateway picked filled up between the pick and
			// the reservation (another agent's create won it), though
			// other nodes had room: a 429 the caller retries.
			s.ok("create refused by its picked node, filled meanwhile (429 B1)")
			continue
		case !s.expect("create", err, 0, ""):
			continue
		}
		mine = append(mine, sb.ID)
		session := g.client(sb.Token)
		for sb.State == client.StateStarting && ctx.Err() == nil {
			sleepCtx(ctx, 50*time.Millisecond)
			got, err := session.GetSandbox(ctx, sb.ID)
			if !s.expect("status while starting", err, 0, "") {
				break
			}
			sb = got
		}
		if ctx.Err() != nil {
			break
		}
		_, err = a.GetSandbox(ctx, sb.ID)
		s.expect("status", err, 0, "")
		res, err := session.Exec(ctx, sb.ID, client.ExecRequest{Argv: []string{"echo", "soak"}})
		if s.expect("exec", err, 0, "") && (res.ExitCode == nil || *res.ExitCode != 0 || res.Stdout != "soak\n") {
			s.fail("exec echo: %+v", res)
		}
		res, err = a.Exec(ctx, sb.ID, client.ExecRequest{Argv: []string{"sh", "-c", "exit 3"}, TimeoutSeconds: new(int64(10))})
		if s.expect("exec exit 3", err, 0, "") && (res.ExitCode == nil || *res.ExitCode != 3) {
			s.fail("exec exit 3: %+v", res)
		}
		_, err = session.Logs(ctx, sb.ID, client.LogsOptions{Stream: "stdout", TailBytes: 1024})
		s.expect("logs", err, 0, "")
		_, err = a.ListSandboxes(ctx, rng.IntN(4) == 0)
		s.expect("list", err, 0, "")

		switch rng.IntN(5) { // one refusal each round
		case 0:
			_, err = session.Exec(ctx, sb.ID, client.ExecRequest{Argv: []string{"-rf"}})
			s.expect("exec of an option", err, http.StatusForbidden, client.CodePolicyDenied, "E1")
		case 1:
			_, err = session.Logs(ctx, sb.ID, client.LogsOptions{TailBytes: 1 << 20})
			s.expect("logs past the tail bound", err, http.StatusForbidden, client.CodePolicyDenied, "E3")
		case 2:
			_, err = a.CreateSandbox(ctx, client.CreateRequest{Image: new("evil:latest")})
			s.expect("create of an image not allowed", err, http.StatusForbidden, client.CodePolicyDenied, "H11")
		case 3:
			_, err = session.ListSandboxes(ctx, false)
			s.expect("list with a session token", err, http.StatusForbidden, client.CodePolicyDenied, "T2")
		case 4:
			_, err = other.GetSandbox(ctx, sb.ID)
			s.expect("another agent's sandbox", err, http.StatusForbidden, client.CodePolicyDenied, "T2")
		}
		// Most sandboxes are destroyed in the round that made them; some
		// stay, so the agent reaches its quota and meets B3.
		if rng.IntN(3) > 0 {
			destroy(sb.ID)
			_, err = session.GetSandbox(ctx, sb.ID)
			s.expect("the session token after destroy", err, http.StatusUnauthorized, client.CodeUnauthenticated)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// rssWatch samples this process's resident set (VmRSS) and goroutines.
type rssWatch struct {
	t              testing.TB
	warmEnd        time.Time
	start, base    int64 // the first sample; the first after warm-up
	peak           int64 // the largest after warm-up
	samples        int
	peakGoroutines int
}

func newRSSWatch(t testing.TB, warmEnd time.Time) *rssWatch {
	t.Helper()
	v, err := readRSS()
	if err != nil {
		t.Fatal(err)
	}
	return &rssWatch{t: t, warmEnd: warmEnd, start: v}
}

func (w *rssWatch) bound() int64 { return 2*w.base + rssMargin }

func (w *rssWatch) run(ctx context.Context) {
	tick := time.NewTicker(rssEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			v, err := readRSS()
			if err != nil {
				w.t.Error(err)
				return
			}
			w.samples++
			w.peakGoroutines = max(w.peakGoroutines, runtime.NumGoroutine())
			if now.Before(w.warmEnd) {
				continue
			}
			if w.base == 0 {
				w.base = v
			}
			w.peak = max(w.peak, v)
		}
	}
}

// readRSS is VmRSS of /proc/self/status, in bytes.
func readRSS() (int64, error) {
	st, err := procStatus()
	return st["VmRSS"], err
}

// procStatus reads the kB figures of /proc/self/status (VmRSS, RssAnon,
// RssFile: the store's file is mapped, so its pages count too), in bytes.
func procStatus() (map[string]int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return nil, fmt.Errorf("RSS: %w", err)
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if v, unit := strings.CutSuffix(strings.TrimSpace(v), " kB"); ok && unit {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				out[k] = n << 10
			}
		}
	}
	if out["VmRSS"] == 0 {
		return nil, errors.New("no VmRSS in /proc/self/status")
	}
	return out, sc.Err()
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
