package gatewaytest

import (
	"net/http"
	"time"

	"sandgate/gateway"
	"sandgate/gateway/assemble"
	"sandgate/gateway/audit"
	"sandgate/nomad"
	"sandgate/nomad/nomadsim"
	"sandgate/policies"
	"sandgate/store"
)

// The files New keeps in Options.DataDir.
const (
	// StoreFile is the bbolt store, opened as it is if it exists.
	StoreFile = assemble.StoreFile
	// DecisionLogFile is the decision log.
	DecisionLogFile = assemble.DecisionLogFile
)

// DefaultNodes are the nodes New puts into the store when Options.Nodes
// is nil: the simulator's two workers, the second enrolled for egress.
func DefaultNodes() []store.Node {
	return []store.Node{
		{Name: "worker-1", Enrollment: "sandbox", State: "active"},
		{Name: "worker-2", Enrollment: "sandbox+egress", State: "active"},
	}
}

// Options are what the callers of New vary. The zero value is the
// embedded bundle (SharedEngine), DefaultNodes, the wall clock, a new
// t.TempDir(), a simulator with a RunDelay of 20 ms, a Nomad client that
// polls every 10 ms, no background loops and an httptest server.
type Options struct {
	// Engine is the policy engine. Nil compiles the bundle in PolicyDir,
	// or with PolicyDir "" takes SharedEngine.
	Engine *policies.Engine
	// PolicyDir is a bundle directory compiled for this gateway alone
	// when Engine is nil.
	PolicyDir string

	// Nodes are put into the store before the gateway starts. Nil puts
	// DefaultNodes; an empty, non-nil slice puts none (a caller that
	// enrolls nodes itself, or whose store file holds them already).
	Nodes []store.Node

	// Clock, when set, is the clock of the gateway and of the token
	// issuer, and Gateway.Clock.
	Clock *Clock
	// Now, when set, is that clock instead, for a clock of another kind
	// (Clock must then be nil). With neither, the wall clock.
	Now func() time.Time

	// DataDir holds StoreFile and DecisionLogFile; "" is t.TempDir().
	DataDir string
	// AuditConfig, when set, adjusts the decision log's config (its Path
	// already set) before it is opened.
	AuditConfig func(*audit.Config)
	// WrapStore, when set, wraps the store the gateway uses;
	// Gateway.Store stays the bare one.
	WrapStore func(store.Store) store.Store

	// SimConfig, when set, adjusts the simulator's config:
	// nomadsim.DefaultConfig() with a RunDelay of 20 ms.
	SimConfig func(*nomadsim.Config)
	// WrapSim, when set, wraps the simulator's handler, e.g. in a layer
	// that injects faults.
	WrapSim func(http.Handler) http.Handler
	// Front, when set, starts something in front of the simulator's
	// listener at addr (host:port), such as a proxy that can cut
	// connections, and returns the host:port that the Nomad client and
	// the simulator's exec and log addresses use instead, and the func
	// that closes it (Close calls it before closing the simulator).
	Front func(addr string) (string, func())
	// NomadURL, when set, is the Nomad API the client talks to (a
	// simulator in another process, say): no simulator is started, and
	// Gateway.Sim is nil. The caller stops what serves it.
	NomadURL string
	// NomadConfig, when set, adjusts the Nomad client's config (its
	// Address, JobPrefix and a PollInterval of 10 ms already set; the
	// JobPrefix is the policy's, and New fails on another).
	NomadConfig func(*nomad.Config)
	// ObserveNomad feeds the Nomad client's call timings and errors to
	// Server.ObserveNomad, as `sandgate serve` wires them.
	ObserveNomad bool

	// Config, when set, adjusts the gateway's config after New has
	// filled it: the parts above, a logger that discards, the clock,
	// Simulated and a DefaultWait of 10 s (assemble.Config.AdjustGateway).
	Config func(*gateway.Config)
	// Run runs the gateway's loops (Server.Run: reaper, reconcile and the
	// rest) until Close.
	Run bool
	// NoListener serves no HTTP (Gateway.URL is ""), for a caller that
	// drives Server.Handler() in process.
	NoListener bool
	// HTTPServer, when set, adjusts the API server's http.Server before
	// it starts.
	HTTPServer func(*http.Server)
}
