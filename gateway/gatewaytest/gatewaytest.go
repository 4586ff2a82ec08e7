package gatewaytest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"sandgate/gateway"
	"sandgate/gateway/assemble"
	"sandgate/gateway/replay"
	"sandgate/gateway/token"
	"sandgate/nomad"
	"sandgate/nomad/nomadsim"
	"sandgate/policies"
	"sandgate/store"
)

// sharedEngine is the embedded bundle, compiled once per test binary: it
// takes seconds under -race.
var sharedEngine = sync.OnceValues(func() (*policies.Engine, error) {
	return policies.New(context.Background(), policies.Config{})
})

// SharedEngine returns the embedded bundle's engine, compiled on the first
// call of the test binary and shared by every later one.
func SharedEngine() (*policies.Engine, error) { return sharedEngine() }

// Gateway is one gateway in process and its parts. Close (or the test's
// cleanup) shuts it down.
type Gateway struct {
	t testing.TB

	// Server is the gateway.
	Server *gateway.Server
	// Engine is its policy engine.
	Engine *policies.Engine
	// Sim is the Nomad simulator; nil with Options.NomadURL.
	Sim *nomadsim.Server
	// SimURL is the simulator's own base URL (http://127.0.0.1:port),
	// behind any Options.Front; "" with Options.NomadURL.
	SimURL string
	// Nomad is the Nomad client the gateway uses.
	Nomad *nomad.Client
	// Store is the bare store (Options.WrapStore wraps only the
	// gateway's).
	Store store.Store
	// Issuer mints and verifies the gateway's tokens.
	Issuer *token.Issuer
	// Key is the issuer's signing key, for tokens forged outside it.
	Key ed25519.PrivateKey
	// Clock is Options.Clock (nil without it).
	Clock *Clock
	// URL is the API's base URL; "" with Options.NoListener.
	URL string
	// DataDir holds StoreFile and DecisionLogFile.
	DataDir string

	now       func() time.Time
	closers   []func()
	closeOnce sync.Once
}

// New builds a gateway as o describes and registers Close as a cleanup of
// t. Any failure fails t.
func New(t testing.TB, o Options) *Gateway {
	t.Helper()
	g := &Gateway{t: t, Clock: o.Clock, DataDir: o.DataDir, now: time.Now}
	if g.DataDir == "" {
		g.DataDir = t.TempDir() // before Close's cleanup, so removed after it
	}
	t.Cleanup(g.Close)
	switch {
	case o.Clock != nil && o.Now != nil:
		t.Fatal("gatewaytest: Options.Clock and Options.Now are both set")
	case o.Clock != nil:
		g.now = o.Clock.Now
	case o.Now != nil:
		g.now = o.Now
	}
	var err error
	switch {
	case o.Engine != nil:
		g.Engine = o.Engine
	case o.PolicyDir != "":
		g.Engine, err = policies.New(context.Background(), policies.Config{Dir: o.PolicyDir})
	default:
		g.Engine, err = SharedEngine()
	}
	if err != nil {
		t.Fatalf("gatewaytest: policy engine: %v", err)
	}

	nomadURL := o.NomadURL
	if nomadURL == "" {
		nomadURL = g.startSim(o)
	}
	if _, g.Key, err = ed25519.GenerateKey(rand.Reader); err != nil {
		t.Fatalf("gatewaytest: %v", err)
	}
	cfg := assemble.DefaultConfig()
	cfg.DataDir, cfg.Engine, cfg.WrapStore = g.DataDir, g.Engine, o.WrapStore
	cfg.Token.Key, cfg.Token.Now = g.Key, g.now
	cfg.Audit.Path = filepath.Join(g.DataDir, DecisionLogFile)
	if o.AuditConfig != nil {
		o.AuditConfig(&cfg.Audit)
	}
	cfg.Nomad.Address, cfg.Nomad.JobPrefix = nomadURL, g.Engine.Settings().Prefix
	cfg.Nomad.PollInterval = 10 * time.Millisecond
	if o.NomadConfig != nil {
		o.NomadConfig(&cfg.Nomad)
	}
	cfg.ObserveNomad = o.ObserveNomad
	cfg.Gateway = gateway.Config{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: g.now, Simulated: true,
		DefaultWait: 10 * time.Second,
	}
	if servesWorkers.Load() {
		cfg.Gateway.Policy.ReplayWorker = replay.SelfCommand()
	}
	cfg.AdjustGateway = o.Config
	parts, err := assemble.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("gatewaytest: %v", err)
	}
	g.closers = append(g.closers, parts.Close)
	g.Server, g.Store, g.Issuer, g.Nomad = parts.Server, parts.Store, parts.Issuer, parts.Nomad
	g.putNodes(o)
	if o.Run {
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { g.Server.Run(ctx); close(done) }()
		g.closers = append(g.closers, func() { stop(); <-done })
	}
	if !o.NoListener {
		// The http.Server of `sandgate serve`, with its deadlines.
		api := httptest.NewUnstartedServer(nil)
		api.Config = g.Server.HTTPServer()
		if o.HTTPServer != nil {
			o.HTTPServer(api.Config)
		}
		api.Start()
		g.URL = api.URL
		g.closers = append(g.closers, api.Close)
	}
	return g
}

// startSim starts the simulator on an httptest server, behind o.Front if
// set, and returns the URL the Nomad client uses.
func (g *Gateway) startSim(o Options) string {
	simCfg := nomadsim.DefaultConfig()
	simCfg.RunDelay = 20 * time.Millisecond
	if o.SimConfig != nil {
		o.SimConfig(&simCfg)
	}
	var err error
	if g.Sim, err = nomadsim.New(simCfg); err != nil {
		g.t.Fatalf("gatewaytest: %v", err)
	}
	h := g.Sim.Handler()
	if o.WrapSim != nil {
		h = o.WrapSim(h)
	}
	simHTTP := httptest.NewServer(h)
	g.SimURL = simHTTP.URL
	sim := g.Sim
	g.closers = append(g.closers, func() { sim.Close(); simHTTP.Close() }) // the simulator first: it ends followed log streams
	addr := simHTTP.Listener.Addr().String()
	if o.Front != nil {
		var closeFront func()
		addr, closeFront = o.Front(addr)
		g.closers = append(g.closers, closeFront)
	}
	g.Sim.SetAddress(addr)
	return "http://" + addr
}

// putNodes puts o's nodes (DefaultNodes when nil) into the bare store.
func (g *Gateway) putNodes(o Options) {
	nodes := o.Nodes
	if nodes == nil {
		nodes = DefaultNodes()
	}
	for _, n := range nodes {
		if err := g.Store.PutNode(context.Background(), n); err != nil {
			g.t.Fatalf("gatewaytest: %v", err)
		}
	}
}

// Close shuts everything down once, in order: the API server, the loops,
// the gateway, the decision log, the store, then whatever is in front of
// the simulator and the simulator. New registers it as a cleanup, so a
// caller may close early (to look for leaks) or not at all.
func (g *Gateway) Close() {
	g.closeOnce.Do(func() {
		for _, f := range slices.Backward(g.closers) {
			f()
		}
	})
}

// Now is the gateway's clock.
func (g *Gateway) Now() time.Time { return g.now() }

// Mint mints a token of role for sub with the role's scopes from the
// policy, valid for 24 hours, records it in the store (operator and agent
// tokens are accepted only when recorded) and returns the raw token.
func (g *Gateway) Mint(role token.Role, sub string) string {
	g.t.Helper()
	raw, _ := g.MintWith(token.MintRequest{Role: role, Subject: sub, Scopes: g.Engine.Settings().RoleScopes(string(role)), TTL: 24 * time.Hour}, 0)
	return raw
}

// MintWith mints req and records it with a quota of maxLive sandboxes (0:
// the policy's default); it returns the raw token and its jti.
func (g *Gateway) MintWith(req token.MintRequest, maxLive int64) (raw, jti string) {
	g.t.Helper()
	raw, c, err := g.Issuer.Mint(req)
	if err != nil {
		g.t.Fatal(err)
	}
	rec := store.Token{
		JTI: c.ID, Role: string(req.Role), Subject: req.Subject,
		CreatedAt: c.IssuedAt.Time, ExpiresAt: c.ExpiresAt.Time, MaxLiveSandboxes: maxLive,
	}
	if err := g.Store.PutToken(context.Background(), rec); err != nil {
		g.t.Fatal(err)
	}
	return raw, c.ID
}
