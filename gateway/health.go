package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"runtime/debug"
	"slices"
	"time"

	"github.com/labstack/echo/v4"
)

// gatewayCapabilities are advertised besides the policy's list: they are
// not route families the policy switches (C1).
var gatewayCapabilities = []string{"problem+json", "metrics", "dashboard.v1"}

// Capabilities lists what this gateway supports (SPEC C1), so clients and
// the dashboard can roll out in either order: the route families the
// policy bundle serves (data.sandgate.config.capabilities; authz refuses a
// route whose family is not listed) and the gateway's own.
func (s *Server) Capabilities() []string {
	return slices.Concat(s.cfg.Engine.Settings().Capabilities, gatewayCapabilities)
}

func (s *Server) capabilities(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{
		"capabilities":    s.Capabilities(),
		"version":         s.cfg.Version,
		"bundle_revision": s.cfg.Engine.Revision(),
		"simulated":       s.cfg.Simulated,
	})
}

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz is 200 only when the store is open and Nomad answers.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 3*time.Second)
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
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
		c.Response().Header().Set("Retry-After", "5")
	}
	return c.JSON(status, map[string]any{"ready": ready, "checks": checks, "simulated": s.cfg.Simulated})
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// recoverPanics turns a panic into a logged 500 problem: the request is
// refused and nothing half-done is reported as success.
func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				s.log.Error("panic in handler", "route", c.Path(), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				p := newProblem(http.StatusInternalServerError, codeInternal, "an internal error occurred; the request was refused")
				p.cause = fmt.Errorf("panic: %v", r)
				err = p
			}
		}()
		return next(c)
	}
}
