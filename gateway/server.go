package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"sandgate/gateway/apidoc"
	"sandgate/gateway/audit"
	"sandgate/gateway/dashboard"
	"sandgate/gateway/mcpserver"
	"sandgate/gateway/token"
	"sandgate/nomad"
	"sandgate/policies"
	"sandgate/render"
	"sandgate/store"
)

// Nomad is what the gateway needs from a Nomad cluster; *nomad.Client
// implements it.
type Nomad interface {
	Ping(ctx context.Context) (nomad.Agent, error)
	Nodes(ctx context.Context) ([]nomad.Node, error)
	Node(ctx context.Context, name string) (nomad.Node, error)
	NodeUsage(ctx context.Context, nodeID string) (nomad.Usage, error)
	NodeAllocated(ctx context.Context, nodeID string) (nomad.Allocated, error)
	Servers(ctx context.Context) ([]nomad.ServerMember, error)
	Register(ctx context.Context, job *api.Job) (string, error)
	Job(ctx context.Context, id string) (nomad.JobInfo, error)
	ListJobs(ctx context.Context) ([]nomad.JobInfo, error)
	JobAllocations(ctx context.Context, jobID string) ([]nomad.Alloc, error)
	Purge(ctx context.Context, id string) error
	WaitPlacement(ctx context.Context, jobID, evalID string) (nomad.Placement, error)
	Exec(ctx context.Context, allocID, task string, argv []string, stdin []byte, stdout, stderr io.Writer) (int, error)
	ExecReader(ctx context.Context, allocID, task string, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error)
	Logs(ctx context.Context, allocID, task, stream string, tailBytes int64) ([]byte, error)
	TaskDirUsage(ctx context.Context, allocID, task string, lim nomad.WalkLimits) (nomad.TaskDirUsage, error)
}

var _ Nomad = (*nomad.Client)(nil)

// Config wires the gateway's parts. Engine, Store, Nomad, Tokens and
// Decisions are required.
type Config struct {
	Engine    *policies.Engine
	Store     store.Store
	Nomad     Nomad
	Tokens    *token.Issuer
	Decisions *audit.Log
	// LogInputs keeps each decision's input, masked, in the decision log
	// (decision_log.include_inputs), so candidate bundles can be replayed
	// against real decisions.
	LogInputs bool
	// Registry receives the gateway's metrics; nil means a private registry.
	Registry *prometheus.Registry
	// Logger for operational events; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock (tests inject a fake one); nil means time.Now.
	Now func() time.Time
	// BodyLimit caps request bodies; default 1 MiB.
	BodyLimit int64
	// MaxHeaderBytes caps the request target plus headers; past it the
	// answer is 431. Default DefaultMaxHeaderBytes (16 KiB). The HTTP
	// server should refuse well before reading more (ServerHeaderLimit).
	MaxHeaderBytes int
	// DefaultWait is how long a create waits for its allocation to run
	// when the request does not say (wait_seconds); default 30 s.
	DefaultWait time.Duration
	// MaxWait bounds wait_seconds; default 120 s.
	MaxWait time.Duration
	// StartTimeout is how long a sandbox may stay starting, in the
	// background after the create answered, before it is failed; default 5 min.
	StartTimeout time.Duration
	// AllocatedTTL is how long a create may use what Nomad last reported
	// the allocations on a node hold (B1's node.capacity) before listing
	// them again; default 1 s, negative: every create lists them.
	AllocatedTTL time.Duration
	// ExecGrace is added to an exec's timeout before the gateway gives up
	// on the stream (the in-sandbox timeout fires first); default 10 s.
	ExecGrace time.Duration
	// ReadHeaderTimeout bounds reading a request's line and headers;
	// default 10 s (http.read_header_timeout in docs/runbook.md).
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the time the gateway waits for a request's body:
	// the count runs while it waits for the client, and starts again with
	// every 64 KiB of a file upload; past it the answer is 408
	// request_timeout. Default 30 s (http.read_timeout).
	ReadTimeout time.Duration
	// WriteTimeout bounds each write of an answer to the client (a
	// stream gets a new bound with each write); default 30 s
	// (http.write_timeout).
	WriteTimeout time.Duration
	// IdleTimeout is how long a kept-alive connection may wait for its
	// next request; default 2 min (http.idle_timeout).
	IdleTimeout time.Duration
	// KeepaliveInterval is how often a streaming exec (SSE) of a quiet
	// command sends a keepalive event; default 15 s.
	KeepaliveInterval time.Duration
	// ReaperInterval is how often expired sandboxes are purged (L1); default 30 s.
	ReaperInterval time.Duration
	// ReconcileInterval is how often the gateway reconciles with Nomad (L4); default 5 min.
	ReconcileInterval time.Duration
	// Retention is how long a terminal (ended or failed) record is kept
	// after it ended; the reaper prunes older ones. Default 7 days;
	// negative keeps them forever. The decision log keeps the audit trail.
	Retention time.Duration
	// DecisionRetention is how long the shared decision log (the one the
	// replicas of a PostgreSQL store write) keeps a decision; the reaper
	// prunes older ones. Default 30 days; negative keeps them forever. A
	// gateway's own file rotates by size instead.
	DecisionRetention time.Duration
	// ReclaimInterval is how often the usage monitor reads the usage and
	// drain state of nodes holding sandboxes (R2, R3); default 30 s.
	ReclaimInterval time.Duration
	// Namespace is the Nomad namespace sandbox jobs are rendered into; it
	// must be the Nomad client's (whose Register refuses any other). ""
	// means "default".
	Namespace string
	// Simulated marks a gateway running on the built-in Nomad simulator;
	// /v1/capabilities and /readyz say so.
	Simulated bool
	// Version is reported by /v1/capabilities.
	Version string
	// Policy bounds the dry runs and candidate replays of the policy
	// routes (deadlines, body sizes, concurrency, the replay worker and its
	// resource limits); zero fields take their defaults.
	Policy PolicyLimits
	// TrustedProxies are the reverse proxies whose X-Forwarded-For is
	// believed when a route that takes no token is limited per client
	// address (Q1, docs/runbook.md); empty believes no header, and the
	// peer's address is the client's.
	TrustedProxies []netip.Prefix
	// RateLimitWindow is how often the requests a rate limit refused are
	// reported, in one log line per principal or address; default 10 s.
	RateLimitWindow time.Duration
	// RateLimitMaxKeys bounds the buckets held at once; past it, new
	// principals or addresses of a class share one bucket. Default 100,000.
	RateLimitMaxKeys int
	// Replica names this gateway among the replicas of one deployment:
	// in its decision-log lines, /readyz and the background lease.
	// Default: the host name and the process id.
	Replica string
	// LeaseTTL is how long the background lease lasts without renewal on
	// a store several replicas share; the holder renews it every quarter
	// of it, so another replica takes over within 1.25 LeaseTTL of the
	// holder's death. Default: two thirds of the shorter of ReaperInterval
	// and ReclaimInterval, so that takeover happens within one interval.
	LeaseTTL time.Duration
}

func (c *Config) defaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	setDur := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.BodyLimit == 0 {
		c.BodyLimit = 1 << 20
	}
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	setDur(&c.DefaultWait, 30*time.Second)
	setDur(&c.MaxWait, 120*time.Second)
	setDur(&c.StartTimeout, 5*time.Minute)
	setDur(&c.ExecGrace, 10*time.Second)
	setDur(&c.AllocatedTTL, time.Second)
	setDur(&c.ReadHeaderTimeout, 10*time.Second)
	setDur(&c.ReadTimeout, 30*time.Second)
	setDur(&c.WriteTimeout, 30*time.Second)
	setDur(&c.IdleTimeout, 2*time.Minute)
	setDur(&c.KeepaliveInterval, 15*time.Second)
	setDur(&c.ReaperInterval, 30*time.Second)
	setDur(&c.ReconcileInterval, 5*time.Minute)
	setDur(&c.ReclaimInterval, 30*time.Second)
	setDur(&c.Retention, 7*24*time.Hour)
	setDur(&c.DecisionRetention, 30*24*time.Hour)
	setDur(&c.RateLimitWindow, 10*time.Second)
	if c.RateLimitMaxKeys == 0 {
		c.RateLimitMaxKeys = 100_000
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.Replica == "" {
		c.Replica = DefaultReplica()
	}
	setDur(&c.LeaseTTL, 2*min(c.ReaperInterval, c.ReclaimInterval)/3)
	c.Policy.defaults()
}

func (c *Config) validate() error {
	switch {
	case c.Engine == nil:
		return errors.New("gateway: Config.Engine is required")
	case c.Store == nil:
		return errors.New("gateway: Config.Store is required")
	case c.Nomad == nil:
		return errors.New("gateway: Config.Nomad is required")
	case c.Tokens == nil:
		return errors.New("gateway: Config.Tokens is required")
	case c.Decisions == nil:
		return errors.New("gateway: Config.Decisions is required")
	case c.BodyLimit < 1024:
		return fmt.Errorf("gateway: BodyLimit %d is below 1 KiB", c.BodyLimit)
	case c.MaxHeaderBytes < 4096:
		return fmt.Errorf("gateway: MaxHeaderBytes %d is below 4 KiB", c.MaxHeaderBytes)
	case c.DefaultWait > c.MaxWait:
		return errors.New("gateway: DefaultWait exceeds MaxWait")
	case c.ReadHeaderTimeout < 0 || c.ReadTimeout < 0 || c.WriteTimeout < 0 || c.IdleTimeout < 0:
		return errors.New("gateway: ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout must be positive")
	case c.RateLimitWindow < time.Second:
		return fmt.Errorf("gateway: RateLimitWindow %s is below 1 s", c.RateLimitWindow)
	case c.LeaseTTL < 0:
		return fmt.Errorf("gateway: LeaseTTL %s is negative", c.LeaseTTL)
	case c.RateLimitMaxKeys < 1:
		return fmt.Errorf("gateway: RateLimitMaxKeys %d is below 1", c.RateLimitMaxKeys)
	}
	return c.Policy.validate()
}

// Server is the sandgate REST gateway.
type Server struct {
	cfg Config
	e   *echo.Echo
	// evaluating and replaying hold a token per running dry run and
	// replay (Config.Policy's concurrency limits).
	evaluating, replaying semaphore
	log                   *slog.Logger
	metrics               *metrics
	nodes                 *nodeCache
	allocated             *allocatedCache
	// limits holds the rate-limit buckets (Q1, middleware_ratelimit.go).
	limits *rateLimiter
	ready  readiness
	// taskName is the task every rendered job runs, computed once: exec
	// and logs address it on every request.
	taskName string
	// mcp serves /mcp: every tool call is a request to e.
	mcp http.Handler
	// apidoc is /openapi.json, built once per bundle generation.
	apidoc apidoc.Cache

	// lease decides whether this replica runs the background loops.
	lease *backgroundLease

	// inflight holds the ids of sandboxes whose create is between reserve
	// and a settled placement: reconcile must not end them.
	inflight sync.Map
	// bg tracks background work (placement watchers) for Close.
	bg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

// New builds the gateway. It registers every route with its middleware;
// call Run for the background loops and Handler or Echo to serve.
func New(cfg Config) (*Server, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel}
	s.lease = newBackgroundLease(cfg.Store, cfg.Replica, cfg.LeaseTTL, cfg.Now)
	m, err := newMetrics(cfg.Registry, cfg.Store)
	if err != nil {
		cancel()
		return nil, err
	}
	s.metrics = m
	if err := m.registerLease(s.lease); err != nil {
		cancel()
		return nil, err
	}
	for _, r := range s.routes() {
		m.routes[r.path] = true
	}
	m.initSeries(cfg.Engine.Rules())
	s.nodes = newNodeCache(cfg.Nomad, 2*time.Second, cfg.Now)
	s.allocated = &allocatedCache{nomad: cfg.Nomad, ttl: cfg.AllocatedTTL}
	s.limits = newRateLimiter(cfg.Engine, cfg.Now, cfg.RateLimitWindow, cfg.RateLimitMaxKeys)
	s.limits.onTable, s.limits.onLimited = m.initRateLimited, m.countRateLimited
	s.limits.current() // the metric's series exist from the start
	s.taskName = render.DefaultConfig().TaskName
	s.evaluating = make(semaphore, cfg.Policy.EvaluateConcurrency)
	s.replaying = make(semaphore, cfg.Policy.ReplayConcurrency)
	s.mcp = mcpserver.Handler(mcpserver.Config{API: s.Handler, Verify: s.verifyBearer, Version: cfg.Version})
	s.e = s.newEcho()
	return s, nil
}

// Handler returns the HTTP handler of the API.
func (s *Server) Handler() http.Handler { return s.e }

// Echo returns the underlying Echo instance (tests walk its routes).
func (s *Server) Echo() *echo.Echo { return s.e }

// Close stops background work started by the server.
func (s *Server) Close() {
	s.cancel()
	s.bg.Wait()
}

// route is one entry of the API surface.
type route struct {
	method, path string
	handler      echo.HandlerFunc
	// public routes take no token and no policy decision.
	public bool
	// body returns a fresh request body to decode into, or nil when the
	// route takes none.
	body func() requestBody
}

func (s *Server) routes() []route {
	return []route{
		{method: http.MethodGet, path: "/healthz", handler: s.healthz, public: true},
		{method: http.MethodGet, path: "/readyz", handler: s.readyz, public: true},
		{method: http.MethodGet, path: "/metrics", handler: echo.WrapHandler(s.metrics.handler()), public: true},
		{method: http.MethodGet, path: "/v1/capabilities", handler: s.capabilities, public: true},
		{method: http.MethodGet, path: "/llms.txt", handler: llmsTxt, public: true},
		{method: http.MethodGet, path: "/openapi.json", handler: s.openAPI, public: true},
		// MCP: bearer authentication of its own; each tool call is a
		// request to the routes below, with their middleware.
		{method: http.MethodPost, path: "/mcp", handler: s.serveMCP, public: true},
		{method: http.MethodGet, path: "/mcp", handler: s.serveMCP, public: true},
		{method: http.MethodDelete, path: "/mcp", handler: s.serveMCP, public: true},
		{method: http.MethodGet, path: "/", handler: echo.WrapHandler(dashboard.Handler()), public: true},
		{method: http.MethodGet, path: "/ui/*", handler: echo.WrapHandler(dashboard.Handler()), public: true},

		{method: http.MethodPost, path: "/v1/sandboxes", handler: s.createSandbox, body: func() requestBody { return &createRequest{} }},
		{method: http.MethodGet, path: "/v1/sandboxes", handler: s.listSandboxes},
		{method: http.MethodGet, path: "/v1/sandboxes/:id", handler: s.getSandbox},
		{method: http.MethodDelete, path: "/v1/sandboxes/:id", handler: s.deleteSandbox},
		{method: http.MethodPost, path: "/v1/sandboxes/:id/exec", handler: s.execSandbox, body: func() requestBody { return &execRequest{} }},
		{method: http.MethodGet, path: "/v1/sandboxes/:id/logs", handler: s.sandboxLogs},
		{method: http.MethodPost, path: "/v1/sandboxes/:id/extend", handler: s.extendSandbox, body: func() requestBody { return &extendRequest{} }},
		{method: http.MethodGet, path: filesRoute, handler: s.getFile},
		{method: http.MethodPut, path: filesRoute, handler: s.putFile},
		{method: http.MethodDelete, path: filesRoute, handler: s.deleteFile},

		{method: http.MethodGet, path: "/v1/hosts", handler: s.listHosts},
		{method: http.MethodPut, path: "/v1/hosts/:node/enrollment", handler: s.enrollHost, body: func() requestBody { return &enrollRequest{} }},
		{method: http.MethodDelete, path: "/v1/hosts/:node/enrollment", handler: s.unenrollHost},
		{method: http.MethodPost, path: "/v1/hosts/:node/state", handler: s.setHostState, body: func() requestBody { return &stateRequest{} }},

		{method: http.MethodPost, path: routeTokens, handler: s.mintToken, body: func() requestBody { return &mintRequest{} }},
		{method: http.MethodGet, path: routeTokens, handler: s.listTokens},
		{method: http.MethodDelete, path: "/v1/tokens/:jti", handler: s.revokeToken},

		{method: http.MethodGet, path: "/v1/decisions", handler: s.listDecisions},
		{method: http.MethodGet, path: "/v1/policy", handler: s.getPolicy},
		{method: http.MethodPost, path: "/v1/policy/evaluate", handler: s.evaluatePolicy},
		{method: http.MethodPost, path: "/v1/policy/replay", handler: s.replayCandidate},
	}
}

func (s *Server) newEcho() *echo.Echo {
	e := echo.New()
	e.JSONSerializer = warningSerializer{}
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	e.Use(s.deadlines)
	e.Use(s.hygiene)
	e.Use(s.recoverPanics)
	e.Use(s.observeRequests)
	e.Use(middleware.BodyLimitWithConfig(middleware.BodyLimitConfig{
		Limit: fmt.Sprintf("%dB", s.cfg.BodyLimit),
		// A file PUT is bounded by the policy instead (F2 on its
		// Content-Length, which net/http then holds the body to); the
		// policy routes by Config.Policy (413 naming the key).
		Skipper: func(c echo.Context) bool {
			return (c.Path() == filesRoute && c.Request().Method == http.MethodPut) || ownBodyLimit[c.Path()]
		},
	}))
	for _, r := range s.routes() {
		if r.public { // limited per client address (Q1)
			e.Add(r.method, r.path, r.handler, s.limitAddress)
			continue
		}
		e.Add(r.method, r.path, r.handler, s.middleware(r)...)
	}
	return e
}

// middleware is the chain of a route that takes a token. The principal's
// bucket (Q1) sits between authentication and the decision: a refused
// request costs no evaluation and no decision line.
func (s *Server) middleware(r route) []echo.MiddlewareFunc {
	mw := []echo.MiddlewareFunc{s.authenticate, s.limitPrincipal, s.authorize(r.body)}
	if r.path == filesRoute {
		mw = append([]echo.MiddlewareFunc{s.filesLimits}, mw...)
	}
	return mw
}

// DefaultReplica names a replica by its host and process: unique among
// the replicas of a deployment, and readable in a log line.
func DefaultReplica() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "sandgate"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}
