package gateway

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"sandgate/gateway/testhook"
	"sandgate/gateway/token"
	"sandgate/gateway/wire"
	"sandgate/internal/clip"
	"sandgate/policies"
	"sandgate/store"
)

// recordOf returns the target record the authz middleware loaded.
func recordOf(c echo.Context) (store.Sandbox, error) {
	r := cachedRecord(c)
	if r == nil {
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

// listSandboxes is GET /v1/sandboxes: one page, newest last, of the
// records the caller may see: an operator every principal's (or one
// principal's with ?principal=), an agent its own. Filters: ?state= (comma
// list; default the live states, all of them with ?all=true), ?node=,
// ?label=key=value (repeatable, all must match); ?limit= (1-1000, default
// 100) and ?cursor= (next_cursor of the previous page). The store answers
// from its indexes, so a page costs the same however long the history.
func (s *Server) listSandboxes(c echo.Context) error {
	q, err := listQuery(c, callerOf(c))
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	want := q.Limit
	out := make([]wire.Sandbox, 0, min(want, 128))
	// A page may come back short when filters reject many records: read on
	// until it is full or the history ends, within a bound.
	next := ""
	for range maxListRounds {
		page, err := s.cfg.Store.ListPage(ctx, q)
		if errors.Is(err, store.ErrInvalid) && q.Cursor != "" {
			return invalid("cursor", "is not a cursor of this listing; start again without it")
		}
		if err != nil {
			return unavailable("the sandbox store could not be read", err)
		}
		for _, r := range page.Items {
			out = append(out, viewOf(r))
		}
		next = page.Next
		if next == "" || len(out) >= want {
			break
		}
		q.Cursor, q.Limit = next, want-len(out)
	}
	return c.JSON(http.StatusOK, wire.SandboxPage{Sandboxes: out, NextCursor: next})
}

// maxListRounds bounds the store reads of one list request.
const maxListRounds = 8

// listQuery reads the list's query parameters into a store query. Every
// bad value is a 400 naming the parameter.
func listQuery(c echo.Context, cl *caller) (store.Query, error) {
	qp := c.QueryParams()
	for k := range qp {
		switch k {
		case "all", "state", "node", "label", "limit", "cursor", "principal":
		default:
			return store.Query{}, invalid(clip.String(k, 32), "is not a parameter of this listing (all, state, node, label, limit, cursor, principal)")
		}
	}
	q := store.Query{Node: c.QueryParam("node"), Cursor: c.QueryParam("cursor"), Limit: store.DefaultPageLimit}
	switch all := c.QueryParam("all"); all {
	case "", "false":
		for _, st := range store.States() {
			if st.Live() {
				q.States = append(q.States, st)
			}
		}
	case "true":
	default:
		return q, invalid("all", "must be true or false")
	}
	if v := c.QueryParam("state"); v != "" {
		q.States = nil
		for _, name := range strings.Split(v, ",") {
			st := store.State(name)
			if !st.Valid() || slices.Contains(q.States, st) {
				return q, invalid("state", "must be a comma list of distinct states from %v", store.States())
			}
			q.States = append(q.States, st)
		}
	}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxPageLimit {
			return q, invalid("limit", "must be an integer from 1 to %d", store.MaxPageLimit)
		}
		q.Limit = n
	}
	for _, kv := range qp["label"] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !labelKey.MatchString(k) || len(v) > maxLabelValueSize {
			return q, invalid("label", "must be key=value with a label key matching %s", labelKey)
		}
		if q.Labels == nil {
			q.Labels = map[string]string{}
		}
		if old, dup := q.Labels[k]; dup && old != v {
			return q, invalid("label", "names %q twice with different values", k)
		}
		q.Labels[k] = v
	}
	if len(q.Labels) > maxLabels {
		return q, invalid("label", "at most %d label filters", maxLabels)
	}
	if len(q.Cursor) > 1024 {
		return q, invalid("cursor", "is not a cursor of this listing; start again without it")
	}
	// Agents see their own records only: the filter is theirs, whatever
	// they ask; asking for another principal's is refused, not ignored.
	p := c.QueryParam("principal")
	if cl.claims.Role != token.RoleOperator {
		if p != "" && p != cl.principal() {
			return q, invalid("principal", "an agent lists only its own sandboxes (%s)", cl.principal())
		}
		p = cl.principal()
	}
	q.Principal = p
	return q, nil
}

// deleteSandbox is DELETE /v1/sandboxes/{id}: stop and purge the job,
// release the budget, revoke the session token. Idempotent: a terminal
// sandbox answers 204 again.
func (s *Server) deleteSandbox(c echo.Context) error {
	testhook.Pause(testhook.DestroyAuthorized)
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
	body := bodyOf[*extendRequest](c)
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

// extendRequest is POST /v1/sandboxes/{id}/extend.
type extendRequest wire.ExtendRequest

func (r *extendRequest) required() bool { return true }

func (r *extendRequest) policyBody() policies.RequestBody {
	return policies.RequestBody{TTLSeconds: r.TTLSeconds}
}

func (r *extendRequest) check(*Server) error {
	if r.TTLSeconds == nil {
		return invalid("ttl_seconds", "is required")
	}
	return nil
}
