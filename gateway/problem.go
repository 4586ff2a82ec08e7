package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"sandgate/gateway/wire"
	"sandgate/nomad"
	"sandgate/policies"
	"sandgate/store"
)

// Problem is an RFC 9457 problem document with sandgate's extension members
// (wire.Problem, the members a client reads; its RetryAfter, in whole
// seconds, sets the Retry-After header) and how to answer it. Every error
// response of the API is one of these, written by Server.handleError;
// handlers just return errors.
type Problem struct {
	wire.Problem

	cause   error  // logged, never shown
	wwwAuth string // WWW-Authenticate challenge for 401s
}

// Error implements error.
func (p *Problem) Error() string {
	if p.Detail != "" {
		return p.Code + ": " + p.Detail
	}
	return p.Code
}

// Unwrap returns the underlying cause, if any.
func (p *Problem) Unwrap() error { return p.cause }

// problemTypeBase prefixes every problem type: a URN that names the code
// (documented in docs/api.md) and that no client is meant to dereference.
const problemTypeBase = "urn:sandgate:problem:"

func newProblem(status int, code, detail string) *Problem {
	return &Problem{Problem: wire.Problem{Type: problemTypeBase + code, Title: wire.Title(code), Status: status, Code: code, Detail: detail}}
}

// invalid is a 400 naming the field and the rule that was broken.
func invalid(field, format string, args ...any) *Problem {
	if field == "" {
		field = "body" // e.g. an unknown field named "": still name something
	}
	p := newProblem(http.StatusBadRequest, wire.CodeInvalidRequest, field+": "+fmt.Sprintf(format, args...))
	p.Field = field
	return p
}

func unauthenticated(detail string) *Problem {
	p := newProblem(http.StatusUnauthorized, wire.CodeUnauthenticated, detail)
	p.wwwAuth = `Bearer realm="sandgate"`
	return p
}

func notFound(id string) *Problem {
	return newProblem(http.StatusNotFound, wire.CodeSandboxNotFound, fmt.Sprintf("sandbox %q does not exist", id))
}

func notRunning(id string, state store.State) *Problem {
	return newProblem(http.StatusConflict, wire.CodeSandboxNotRunning, fmt.Sprintf("sandbox %q is %s", id, state))
}

// nomadUnavailable is a 503 with Retry-After: nothing was changed.
func nomadUnavailable(detail string, cause error) *Problem {
	p := newProblem(http.StatusServiceUnavailable, wire.CodeNomadUnavailable, detail)
	p.RetryAfter = 5 * time.Second
	p.cause = cause
	return p
}

func unavailable(detail string, cause error) *Problem {
	p := newProblem(http.StatusServiceUnavailable, wire.CodeUnavailable, detail)
	p.RetryAfter = 5 * time.Second
	p.cause = cause
	return p
}

// decisionProblem answers a decision that could not be made or logged:
// 503, retry in 5 s, nothing was changed (fail closed).
func decisionProblem(de *DecisionError) *Problem {
	detail := "the policy could not decide; the request was refused (fail closed)"
	if errors.Is(de.Kind, ErrDecisionLog) {
		detail = "the decision log could not be written; the request was refused"
	}
	p := unavailable(detail, de)
	if errors.Is(de.Kind, ErrUndecided) {
		// A decision that was not logged has no line to point at.
		p.DecisionID = de.DecisionID
	}
	return p
}

// fromError maps any error to a problem. Unknown errors become a 503 when
// they come from a dependency (store, Nomad) and a 500 otherwise: sandgate
// fails closed, and the cause is logged, never shown.
func fromError(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	var de *DecisionError
	if errors.As(err, &de) {
		return decisionProblem(de)
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusRequestEntityTooLarge:
			return newProblem(he.Code, wire.CodePayloadTooLarge, "the request body exceeds the 1 MiB limit")
		case http.StatusNotFound:
			return newProblem(he.Code, wire.CodeRouteNotFound, "no route matches this path")
		case http.StatusMethodNotAllowed:
			return newProblem(he.Code, wire.CodeMethodNotAllowed, "this path does not accept that method")
		case http.StatusUnauthorized:
			return unauthenticated(fmt.Sprint(he.Message))
		}
		if he.Code >= 400 && he.Code < 500 {
			return newProblem(he.Code, wire.CodeInvalidRequest, fmt.Sprint(he.Message))
		}
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return unavailable("the request was cancelled or timed out before it completed", err)
	case errors.Is(err, nomad.ErrUnavailable), errors.Is(err, nomad.ErrExecDropped):
		return nomadUnavailable("Nomad did not answer; nothing was changed, retry later", err)
	case errors.Is(err, store.ErrClosed):
		return unavailable("the store is closed", err)
	case errors.Is(err, store.ErrUnavailable):
		return unavailable("the gateway's database is unavailable (unreachable, too slow or read-only); retry later", err)
	}
	p = newProblem(http.StatusInternalServerError, wire.CodeInternalError, "an internal error occurred; the request was refused and nothing was changed")
	p.cause = err
	return p
}

// violationsOf is a decision's violations as a problem document carries them.
func violationsOf(vs []policies.Violation) []wire.Violation {
	if vs == nil {
		return nil
	}
	out := make([]wire.Violation, len(vs))
	for i, v := range vs {
		out[i] = wire.Violation(v)
	}
	return out
}

// handleError is the one place where errors become HTTP responses.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	p := fromError(err)
	if bodyTimedOut(c) {
		// Whatever the handler made of its failed read (a 400, a
		// cancelled context), the cause is the client's body.
		p = requestTimeout()
		c.Response().Header().Set(echo.HeaderConnection, "close")
	}
	out := *p
	out.RequestID = requestIDOf(c)
	if out.Status >= 500 || out.cause != nil {
		s.log.Error("request failed", "request_id", out.RequestID, "route", c.Path(),
			"status", out.Status, "code", out.Code, "err", err.Error(), "cause", out.cause)
	}
	h := c.Response().Header()
	if secs := int(out.RetryAfter / time.Second); secs > 0 {
		h.Set("Retry-After", strconv.Itoa(secs))
	}
	if out.wwwAuth != "" {
		h.Set(echo.HeaderWWWAuthenticate, out.wwwAuth)
	}
	h.Set(echo.HeaderContentType, "application/problem+json")
	c.Response().WriteHeader(out.Status)
	if c.Request().Method == http.MethodHead {
		return
	}
	if werr := jsonEncode(c.Response(), out); werr != nil {
		s.log.Debug("write problem", "err", werr)
	}
}
