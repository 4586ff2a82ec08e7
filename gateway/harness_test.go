package gateway_test

import (
	"testing"
	"time"

	"sandgate/gateway"
	"sandgate/gateway/gatewaytest"
	"sandgate/gateway/token"
	"sandgate/nomad"
	"sandgate/nomad/nomadsim"
	"sandgate/policies"
	"sandgate/store"
)

// harness is the whole gateway in-process on the Nomad simulator, with a
// real bbolt file, real JWTs, the embedded bundle (or policyDir's) and a
// real decision log (gatewaytest builds it), under the names this
// package's tests use. Requests go through the gateway's own words:
// h.gw.Do, h.gw.Create, h.gw.Exec and apitest.ExpectProblem.
type harness struct {
	t        testing.TB
	gw       *gatewaytest.Gateway
	nc       *nomad.Client
	srv      *gateway.Server
	sim      *nomadsim.Server
	st       store.Store
	iss      *token.Issuer
	engine   *policies.Engine
	clock    *gatewaytest.Clock // nil unless harnessOptions.fake
	url      string
	dataDir  string
	operator string
	simAddr  string
}

func (h *harness) simURL() string { return h.simAddr }

type harnessOptions struct {
	policyDir string
	nodes     []store.Node
	fake      bool // a settable clock instead of the wall clock
	simConfig func(*nomadsim.Config)
	// startTimeout overrides Config.StartTimeout.
	startTimeout time.Duration
	// wrapStore, when set, wraps the store the gateway uses (the harness
	// keeps the bare one in h.st).
	wrapStore func(store.Store) store.Store
	// logInputs keeps the masked inputs in the decision log.
	logInputs bool
	// keepalive overrides Config.KeepaliveInterval of streaming execs.
	keepalive time.Duration
	// config, when set, adjusts the gateway's Config last.
	config func(*gateway.Config)
}

func newHarness(t testing.TB, o harnessOptions) *harness {
	t.Helper()
	g := gatewaytest.Options{
		PolicyDir: o.policyDir, Nodes: o.nodes, SimConfig: o.simConfig, WrapStore: o.wrapStore, ObserveNomad: true,
		Config: func(c *gateway.Config) {
			c.StartTimeout, c.LogInputs, c.KeepaliveInterval = o.startTimeout, o.logInputs, o.keepalive
			// Every create reads Nomad's allocations: tests place outside
			// jobs between creates (TestCreatesReuseARecentAllocationsRead
			// checks the cache).
			c.AllocatedTTL = -1
			if o.config != nil {
				o.config(c)
			}
		},
	}
	if o.fake {
		g.Clock = gatewaytest.NewClock(time.Now().UTC().Truncate(time.Second))
	}
	return harnessOf(t, gatewaytest.New(t, g))
}

// harnessOf names gw's parts as the tests do and mints the operator's
// token.
func harnessOf(t testing.TB, gw *gatewaytest.Gateway) *harness {
	t.Helper()
	h := &harness{
		t: t, gw: gw, nc: gw.Nomad, srv: gw.Server, sim: gw.Sim, st: gw.Store, iss: gw.Issuer, engine: gw.Engine,
		clock: gw.Clock, url: gw.URL, dataDir: gw.DataDir, simAddr: gw.SimURL,
	}
	h.operator = h.mint(token.RoleOperator, "ops")
	return h
}

// mint records and returns an operator or agent token.
func (h *harness) mint(role token.Role, sub string) string {
	h.t.Helper()
	return h.gw.Mint(role, sub)
}

// nomadClient is the client the gateway uses, for baselines.
func (h *harness) nomadClient() *nomad.Client { return h.nc }

// now is the harness clock.
func (h *harness) now() time.Time { return h.gw.Now() }
