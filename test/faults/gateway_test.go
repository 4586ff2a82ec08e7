package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sandgate/gateway"
	"sandgate/gateway/apitest"
	"sandgate/gateway/client"
	"sandgate/gateway/gatewaytest"
	"sandgate/gateway/token"
	"sandgate/nomad"
	"sandgate/nomad/nomadsim"
	"sandgate/store"
)

// The gateway's timings in these tests: every Nomad call gives up after
// nomadTimeout (with room for a loaded machine and the race detector),
// and the loops run every loopInterval.
const (
	nomadTimeout = 3 * time.Second
	loopInterval = 100 * time.Millisecond
	// slow is a latency well beyond nomadTimeout; a delayed request ends
	// as soon as the gateway gives up on it.
	slow = time.Minute
	node = "worker-1"
)

// options shape a test's gateway.
type options struct {
	// startTimeout is Config.StartTimeout (default 5 min).
	startTimeout time.Duration
	// runDelay is the simulator's RunDelay (default 20 ms).
	runDelay time.Duration
}

// gw is one gateway in-process, wired as `sandgate serve` wires it, on its
// own simulator behind the faulty layers, with its loops running.
type gw struct {
	t        testing.TB
	sim      *nomadsim.Server
	faults   *faultyNomad
	agentNet *proxy
	store    store.Store
	srv      *gateway.Server
	clock    *clock
	logs     *syncBuffer // the gateway's log
	prefix   string
	url      string
	operator *client.Client
	agent    *client.Client // an agent principal's
	// api is the API as the test speaks it; agentToken is agent's token.
	api        *apitest.API
	agentToken string
}

func startGateway(t testing.TB, o options) *gw {
	t.Helper()
	ctx := context.Background()
	g := &gw{t: t, clock: &clock{}, logs: &syncBuffer{}}
	// Registered before the gateway's cleanup, so it runs once the gateway
	// has closed.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", g.logs.String())
		}
	})
	gt := gatewaytest.New(t, gatewaytest.Options{
		Nodes: []store.Node{}, // enrolled below
		Now:   g.clock.now,
		SimConfig: func(c *nomadsim.Config) {
			if o.runDelay != 0 {
				c.RunDelay = o.runDelay
			}
		},
		WrapSim: func(h http.Handler) http.Handler { g.faults = &faultyNomad{next: h}; return g.faults },
		Front: func(addr string) (string, func()) {
			g.agentNet = newProxy(t, addr)
			return g.agentNet.addr(), g.agentNet.close // exec and logs go through the proxy too
		},
		NomadConfig: func(c *nomad.Config) { c.Timeout = nomadTimeout },
		Config: func(c *gateway.Config) {
			c.Logger = slog.New(slog.NewTextHandler(g.logs, nil))
			c.DefaultWait, c.StartTimeout, c.ExecGrace = 5*time.Second, o.startTimeout, time.Second
			c.ReaperInterval, c.ReconcileInterval, c.ReclaimInterval = loopInterval, loopInterval, loopInterval
		},
		Run: true,
	})
	g.sim, g.store, g.srv, g.url, g.prefix = gt.Sim, gt.Store, gt.Server, gt.URL, gt.Engine.Settings().Prefix

	raw, _, err := gateway.MintToken(ctx, gt.Issuer, g.store, gt.Engine.Settings(), gateway.TokenRequest{
		Role: token.RoleOperator, Subject: "faults-operator", TTL: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	g.operator = g.client(raw)
	if err := g.srv.Enroll(ctx, gateway.EnrollRequest{Node: node, Budget: map[string]int64{}}); err != nil {
		t.Fatal(err)
	}
	tok, err := g.operator.MintToken(ctx, client.MintRequest{Role: new(client.RoleAgent), Subject: new("faults-agent"), TTLSeconds: new(int64(24 * 3600))})
	if err != nil {
		t.Fatal(err)
	}
	g.agent, g.agentToken = g.client(tok.Token), tok.Token
	g.api = &apitest.API{T: t, URL: g.url, HTTP: &http.Client{Timeout: time.Minute}}
	return g
}

// client is an API client with tok.
func (g *gw) client(tok string) *client.Client {
	g.t.Helper()
	c, err := client.New(client.Config{Addr: g.url, Token: tok, HTTPClient: &http.Client{Timeout: time.Minute}})
	if err != nil {
		g.t.Fatal(err)
	}
	return c
}

// create makes a running sandbox on the node with the agent token.
func (g *gw) create() apitest.Created {
	g.t.Helper()
	sb := g.api.Create(g.agentToken, createRequest())
	if sb.State != client.StateRunning {
		g.t.Fatalf("create: state %q, last error %v", sb.State, sb.Body["last_error"])
	}
	return sb
}

func createRequest() client.CreateRequest {
	return client.CreateRequest{Node: new(node), CPUMHz: new(int64(100)), MemoryMB: new(int64(128))}
}

// clearFaults removes every fault of every layer: the simulator's, the
// faulty handler's, the proxy's.
func (g *gw) clearFaults() {
	g.sim.ClearFaults()
	g.faults.clear()
	g.agentNet.restart()
}

// sandboxJobs lists the prefixed jobs Nomad holds.
func (g *gw) sandboxJobs() []string {
	var out []string
	for _, j := range g.sim.Jobs() {
		if strings.HasPrefix(j, g.prefix) {
			out = append(out, j)
		}
	}
	return out
}

// waitNothingLeft waits, while the gateway's loops run, until the store and
// Nomad agree (see checkNothingLeft).
func (g *gw) waitNothingLeft(when string) {
	g.t.Helper()
	var last error
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if last = g.nothingLeft(); last == nil {
			return
		}
	}
	g.t.Fatalf("%s: %v", when, last)
}

// waitRecord waits until the record of id satisfies cond and returns it.
func (g *gw) waitRecord(id, what string, cond func(store.Sandbox) bool) store.Sandbox {
	g.t.Helper()
	var rec store.Sandbox
	var err error
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if rec, err = g.store.Get(context.Background(), id); err == nil && cond(rec) {
			return rec
		}
	}
	g.t.Fatalf("sandbox %s not %s within 15 s: %v, state %s, end reason %q, last error %q", id, what, err, rec.State, rec.EndReason, rec.LastError)
	return rec
}

// errProbe aborts the reservation that reads a principal's budget use.
var errProbe = errors.New("probe: read the use and write nothing")

// nothingLeft reports the first disagreement: a record left starting, a
// prefixed job no live record claims (an orphan), a live record whose job
// Nomad lacks (a ghost), or a node's or principal's budget use other than
// the sum over its live records.
func (g *gw) nothingLeft() error {
	ctx := context.Background()
	all, err := g.store.List(ctx, store.Filter{})
	if err != nil {
		return err
	}
	byNode, byPrincipal := map[string]store.Usage{}, map[string]store.Usage{}
	var liveJobs []string
	for _, r := range all {
		if _, ok := byPrincipal[r.Principal]; !ok {
			byPrincipal[r.Principal] = store.Usage{}
		}
		if !r.State.Live() {
			continue
		}
		if r.State == store.StateStarting {
			return fmt.Errorf("sandbox %s is still starting", r.ID)
		}
		liveJobs = append(liveJobs, r.JobID)
		add := func(u store.Usage) store.Usage {
			u.Sandboxes++
			u.CPUMHz += r.CPUMHz
			u.MemoryMB += r.MemoryMB
			return u
		}
		byNode[r.Node] = add(byNode[r.Node])
		byPrincipal[r.Principal] = add(byPrincipal[r.Principal])
	}
	jobs := g.sandboxJobs()
	for _, j := range jobs {
		if !slices.Contains(liveJobs, j) {
			return fmt.Errorf("orphan job %s (live records' jobs %v)", j, liveJobs)
		}
	}
	for _, j := range liveJobs {
		if !slices.Contains(jobs, j) {
			return fmt.Errorf("ghost record: job %s is not in Nomad (%v)", j, jobs)
		}
	}
	for _, n := range []string{"worker-1", "worker-2"} {
		u, err := g.store.NodeUsage(ctx, n)
		if err != nil {
			return err
		}
		if u != byNode[n] {
			return fmt.Errorf("node %s holds %+v of its budget, its live records %+v", n, u, byNode[n])
		}
	}
	for p, want := range byPrincipal {
		var got store.Usage
		err := g.store.Reserve(ctx, store.Sandbox{ID: "faults-probe", JobID: g.prefix + "faults-probe", Node: node, Principal: p, State: store.StateStarting},
			func(f store.ReserveFacts) error { got = f.Principal; return errProbe })
		if !errors.Is(err, errProbe) {
			return fmt.Errorf("probe the use of %s: %w", p, err)
		}
		if got != want {
			return fmt.Errorf("principal %s holds %+v, its live records %+v", p, got, want)
		}
	}
	return nil
}

// laterRequestsSucceed creates a sandbox, runs a command in it and
// destroys it, then checks that nothing is left again.
func (g *gw) laterRequestsSucceed(ctx context.Context) {
	g.t.Helper()
	sb := g.create()
	res, err := g.client(sb.Token).Exec(ctx, sb.ID, client.ExecRequest{Argv: []string{"echo", "again"}})
	if err != nil || res.Stdout != "again\n" {
		g.t.Fatalf("exec after the fault: %v %+v", err, res)
	}
	if err := g.client(sb.Token).DestroySandbox(ctx, sb.ID); err != nil {
		g.t.Fatalf("destroy after the fault: %v", err)
	}
	g.waitNothingLeft("after the later requests")
}

// want is an expected answer: 0 status for success.
type want struct {
	status int
	code   string
}

var ok = want{}

// expect checks err against w: nil for ok, else a problem with w's status
// and code, a title and a detail, and Retry-After on a 503.
func expect(t testing.TB, what string, err error, w want) {
	t.Helper()
	if w == ok {
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return
	}
	var p *client.Problem
	if !errors.As(err, &p) {
		t.Fatalf("%s: want %d %s, got %v", what, w.status, w.code, err)
	}
	if p.Status != w.status || p.Code != w.code || !strings.HasPrefix(p.Type, "urn:sandgate:problem:") || p.Title == "" || p.Detail == "" {
		t.Fatalf("%s: want a problem document %d %s with a title and a detail, got %+v", what, w.status, w.code, p)
	}
	if w.status == http.StatusServiceUnavailable && p.RetryAfter <= 0 {
		t.Fatalf("%s: a 503 without Retry-After: %+v", what, p)
	}
	t.Logf("%s: %v", what, p)
}

// clock is the gateway's clock: the wall clock plus an offset a test
// advances (the gateway's tickers and Nomad's timeouts stay real).
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// syncBuffer is a bytes.Buffer safe for the gateway's concurrent logging.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
