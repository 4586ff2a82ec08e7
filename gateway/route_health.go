package gateway

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"sandgate/docs"
	"sandgate/gateway/wire"
	"sandgate/policies"
)

// gatewayCapabilities are advertised besides the policy's list: they are
// not route families the policy switches (C1).
var gatewayCapabilities = []string{"problem+json", "metrics", "dashboard.v1", "mcp.v1"}

// Capabilities lists what this gateway supports (rule C1), so clients and
// the dashboard can roll out in either order: the route families the
// policy bundle serves (data.sandgate.config.capabilities; authz refuses a
// route whose family is not listed) and the gateway's own.
func (s *Server) Capabilities() []string {
	return slices.Concat(s.cfg.Engine.Settings().Capabilities, gatewayCapabilities)
}

func (s *Server) capabilities(c echo.Context) error {
	return c.JSON(http.StatusOK, wire.Capabilities{
		Capabilities:   s.Capabilities(),
		Version:        s.cfg.Version,
		BundleRevision: s.cfg.Engine.Revision(),
		Simulated:      s.cfg.Simulated,
		Choices:        createChoices(s.cfg.Engine.Settings()),
	})
}

// createChoices are the values a create may name, from the serving
// bundle's data, so that a client can check its caller's choice before it
// asks (the policy still decides: H8, H10, H11, I5).
func createChoices(st policies.Settings) map[string][]string {
	return map[string][]string{
		"profiles": slices.Sorted(maps.Keys(st.Profiles)),
		"networks": slices.Sorted(maps.Keys(st.Networks)),
		"images":   slices.Clone(st.Images.Allowed),
	}
}

// llmsTxt serves the guide for agents (docs/llms.txt): how to
// authenticate, the lifecycle, exec, the errors, with lines to try.
func llmsTxt(c echo.Context) error {
	return c.Blob(http.StatusOK, "text/plain; charset=utf-8", docs.LLMsTxt)
}

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyCacheFor is how long a readiness verdict is reused: /readyz is
// unauthenticated, so a flood of probes costs at most one store ping and
// one Nomad call per period.
const readyCacheFor = time.Second

// readiness is the cached verdict of /readyz.
type readiness struct {
	mu     sync.Mutex
	at     time.Time
	ready  bool
	checks map[string]string
}

// readyz is 200 only when the store is open and Nomad answers; the checks
// are at most readyCacheFor old. It also names this replica and the one
// that holds the background lease (a replica that does not hold it is
// ready all the same: it serves the API).
func (s *Server) readyz(c echo.Context) error {
	ready, checks := s.readyChecks(c.Request().Context())
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
		c.Response().Header().Set("Retry-After", "5")
	}
	return c.JSON(status, map[string]any{"ready": ready, "checks": checks, "simulated": s.cfg.Simulated,
		"background": s.lease.status()})
}

// readyChecks runs the checks, or returns the verdict of a run less than
// readyCacheFor ago. Callers arriving during a run wait for it. The run
// does not depend on the caller staying connected.
func (s *Server) readyChecks(ctx context.Context) (bool, map[string]string) {
	r := &s.ready
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := s.cfg.Now(); r.checks != nil && now.Sub(r.at) < readyCacheFor && !now.Before(r.at) {
		return r.ready, r.checks
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	checks := map[string]string{"store": "ok", "nomad": "ok"}
	ready := true
	// The causes go to the log, not to this unauthenticated endpoint.
	if err := s.cfg.Store.Ping(ctx); err != nil {
		checks["store"], ready = "unavailable", false
		s.log.Warn("readyz: store", "err", err)
	}
	if _, err := s.cfg.Nomad.Ping(ctx); err != nil {
		checks["nomad"], ready = "unavailable", false
		s.log.Warn("readyz: nomad", "err", err)
	}
	r.at, r.ready, r.checks = s.cfg.Now(), ready, checks
	return ready, checks
}
