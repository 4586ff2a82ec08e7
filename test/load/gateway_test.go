package load

import (
	"context"
	"errors"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"sandgate/gateway"
	"sandgate/gateway/audit"
	"sandgate/gateway/client"
	"sandgate/gateway/gatewaytest"
	"sandgate/gateway/token"
	"sandgate/nomad"
	"sandgate/nomad/nomadsim"
	"sandgate/policies"
	"sandgate/store"
)

// nodeBudget is one simulated worker and the budget it is enrolled with.
type nodeBudget struct {
	name                  string
	max, cpuMHz, memoryMB int64
}

// options shape a test's gateway.
type options struct {
	nodes []nodeBudget
	// loops runs the reaper, reconcile and the usage monitor (Server.Run)
	// at these short intervals; zero leaves them off.
	loops time.Duration
	// runDelay is how long the simulator keeps an allocation pending
	// (nomadsim.Config.RunDelay: zero 20 ms, negative none).
	runDelay time.Duration
	// simProcess runs the simulator in a child process (sim_test.go),
	// with the default run delay.
	simProcess bool
}

// gw is one gateway, wired as `sandgate dev` wires it (embedded bundle,
// bbolt store, decision log, Ed25519 tokens) on its own Nomad simulator
// (in this process, or in a child one) with a control-plane node beside
// the workers, served on loopback. The operator token is minted offline,
// as `sandgate dev` does; nodes are enrolled and agent tokens minted over
// the API.
type gw struct {
	t        testing.TB
	url      string
	settings policies.Settings
	store    store.Store
	operator *client.Client
	// transport carries every test request; closed with the gateway.
	transport *http.Transport
	closeOnce sync.Once
	closers   []func()
}

func startGateway(t testing.TB, o options) *gw {
	t.Helper()
	dir := memDir(t)
	g := &gw{t: t, transport: &http.Transport{MaxIdleConnsPerHost: 128, IdleConnTimeout: 30 * time.Second}}
	t.Cleanup(g.close)
	g.closers = append(g.closers, g.transport.CloseIdleConnections)
	ctx := context.Background()
	// Rate limits (Q1) no load reaches: these tests measure throughput,
	// budgets and leaks, not fair use (gateway/middleware_ratelimit_test.go).
	engine, err := policies.New(ctx, policies.Config{Dir: gatewaytest.BundleWithRateLimits(t, gatewaytest.GenerousRateLimits())})
	if err != nil {
		t.Fatal(err)
	}
	g.settings = engine.Settings()

	var workers []string
	for _, n := range o.nodes {
		workers = append(workers, n.name)
	}
	nomadTransport := &http.Transport{MaxIdleConnsPerHost: 64}
	opts := gatewaytest.Options{
		Engine: engine, DataDir: dir, Nodes: []store.Node{}, // enrolled over the API below
		SimConfig:   func(c *nomadsim.Config) { *c = simConfig(workers, o.runDelay) },
		NomadConfig: func(c *nomad.Config) { c.HTTPClient = &http.Client{Transport: nomadTransport} },
		AuditConfig: func(c *audit.Config) { c.MaxBytes, c.Keep = 16<<20, 1 },
		Config: func(c *gateway.Config) {
			if o.loops > 0 {
				c.ReaperInterval, c.ReconcileInterval, c.ReclaimInterval = o.loops, 2*o.loops, o.loops
			}
		},
		Run: o.loops > 0,
		HTTPServer: func(s *http.Server) {
			s.ReadHeaderTimeout = 10 * time.Second
			s.MaxHeaderBytes = 1 << 16
		},
	}
	// Closed in reverse: the gateway with what gatewaytest started (the
	// API, the loops, the gateway, the decision log and the store, an
	// in-process simulator), then the Nomad client's connections and a
	// child simulator, then the test's transport.
	if o.simProcess {
		u, stop := startSimProcess(t, workers)
		opts.NomadURL = u
		g.closers = append(g.closers, func() { nomadTransport.CloseIdleConnections(); stop() })
	} else {
		g.closers = append(g.closers, nomadTransport.CloseIdleConnections)
	}
	gt := gatewaytest.New(t, opts)
	g.closers = append(g.closers, gt.Close)
	g.url, g.store = gt.URL, gt.Store

	raw, _, err := gateway.MintToken(ctx, gt.Issuer, g.store, g.settings, gateway.TokenRequest{
		Role: token.RoleOperator, Subject: "load-operator", Label: "load test", TTL: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	g.operator = g.client(raw)
	for _, n := range o.nodes {
		_, err := g.operator.Enroll(ctx, n.name, client.EnrollRequest{Budget: &client.BudgetRequest{
			MaxSandboxes: &n.max, CPUMHz: &n.cpuMHz, MemoryMB: &n.memoryMB}})
		if err != nil {
			t.Fatalf("enroll %s: %v", n.name, err)
		}
	}
	return g
}

// memDir is a temporary directory in memory (/dev/shm) where there is
// one, else t.TempDir: the store's fsyncs then cost nothing, so the tests
// load the gateway, not a disk that other work on the machine shares.
func memDir(t testing.TB) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "sandgate-load-"); err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// close shuts everything down in order, once; the test's cleanup calls it
// too, so a test may close early (to look for leaks) or not at all.
func (g *gw) close() {
	g.closeOnce.Do(func() {
		for _, f := range slices.Backward(g.closers) {
			f()
		}
	})
}

// client is an API client with tok over the test's transport.
func (g *gw) client(tok string) *client.Client {
	g.t.Helper()
	c, err := client.New(client.Config{Addr: g.url, Token: tok, UserAgent: "sandgate-load-test",
		HTTPClient: &http.Client{Transport: g.transport, Timeout: 3 * time.Minute}})
	if err != nil {
		g.t.Fatal(err)
	}
	return c
}

// mintAgent mints an agent token with a quota over the API.
func (g *gw) mintAgent(ctx context.Context, subject string, quota int64) *client.Client {
	g.t.Helper()
	req := client.MintRequest{Role: new(client.RoleAgent), TTLSeconds: new(int64(7200)), Subject: new(subject), Label: new("load")}
	if quota > 0 {
		req.Quota = &client.MintQuota{MaxLiveSandboxes: new(quota)}
	}
	tok, err := g.operator.MintToken(ctx, req)
	if err != nil {
		g.t.Fatalf("mint %s: %v", subject, err)
	}
	return g.client(tok.Token)
}

// problemOf returns err's *client.Problem, or nil.
func problemOf(err error) *client.Problem {
	var p *client.Problem
	if errors.As(err, &p) {
		return p
	}
	return nil
}
