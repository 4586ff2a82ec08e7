package gateway

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"sandgate/gateway/token"
	"sandgate/store"
)

// recordOf returns the target record the authz middleware loaded.
func recordOf(c echo.Context) (store.Sandbox, error) {
	r, ok := c.Get(ctxRecord).(*store.Sandbox)
	if !ok || r == nil {
		return store.Sandbox{}, notFound(c.Param("id"))
	}
	return *r, nil
}

// getSandbox is GET /v1/sandboxes/{id}: the record, never the token.
func (s *Server) getSandbox(c echo.Context) error {
	rec, err := recordOf(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, viewOf(rec))
}

// listSandboxes is GET /v1/sandboxes: an operator sees every sandbox, an
// agent its own. Terminal records are included with ?all=true.
func (s *Server) listSandboxes(c echo.Context) error {
	cl := callerOf(c)
	f := store.Filter{LiveOnly: c.QueryParam("all") != "true"}
	if cl.claims.Role != token.RoleOperator {
		f.Principal = cl.claims.Subject
	}
	recs, err := s.cfg.Store.List(c.Request().Context(), f)
	if err != nil {
		return unavailable("the sandbox store could not be read", err)
	}
	out := make([]sandboxView, 0, len(recs))
	for _, r := range recs {
		out = append(out, viewOf(r))
	}
	return c.JSON(http.StatusOK, map[string]any{"sandboxes": out})
}

// deleteSandbox is DELETE /v1/sandboxes/{id}: stop and purge the job,
// release the budget, revoke the session token. Idempotent: a terminal
// sandbox answers 204 again.
func (s *Server) deleteSandbox(c echo.Context) error {
	rec, err := recordOf(c)
	if err != nil {
		return err
	}
	if _, err := s.end(c.Request().Context(), rec.ID, "destroyed", callerOf(c).principal()); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// extendSandbox is POST /v1/sandboxes/{id}/extend: expiry becomes
// now+ttl_seconds, never past the lifetime ceiling (L2) and never earlier
// than it already is; clamped says whether the ceiling cut the request.
func (s *Server) extendSandbox(c echo.Context) error {
	rec, err := recordOf(c)
	if err != nil {
		return err
	}
	body, _ := c.Get(ctxBody).(*extendRequest)
	if body == nil || body.TTLSeconds == nil {
		return invalid("ttl_seconds", "is required")
	}
	if !rec.State.Live() {
		return notRunning(rec.ID, rec.State)
	}
	now := s.cfg.Now().UTC().Truncate(time.Second)
	want := now.Add(time.Duration(*body.TTLSeconds) * time.Second)
	clamped := false
	out, err := s.cfg.Store.Update(c.Request().Context(), rec.ID, func(r *store.Sandbox) error {
		if !r.State.Live() {
			return notRunning(r.ID, r.State)
		}
		exp := want
		if exp.After(r.CeilingAt) {
			exp, clamped = r.CeilingAt, true
		}
		if exp.After(r.ExpiresAt) {
			r.ExpiresAt = exp
		}
		return nil
	})
	if err != nil {
		var p *Problem
		if errors.As(err, &p) {
			return p
		}
		return unavailable("the sandbox record could not be updated; nothing was changed", err)
	}
	v := viewOf(out)
	v.Clamped = &clamped
	return c.JSON(http.StatusOK, v)
}
