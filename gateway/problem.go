package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"sandgate/nomad"
	"sandgate/policies"
	"sandgate/store"
)

// Problem is an RFC 9457 problem document with sandgate's extension members.
// Every error response of the API is one of these, written by
// Server.handleError; handlers just return errors.
type Problem struct {
	Type    string   `json:"type"`
	Title   string   `json:"title"`
	Status  int      `json:"status"`
	Detail  string   `json:"detail,omitempty"`
	Code    string   `json:"code"`
	Field   string   `json:"field,omitempty"`
	RuleIDs []string `json:"rule_ids,omitempty"`
	// Violations are the policy's messages, one per broken rule check.
	Violations []policies.Violation `json:"violations,omitempty"`
	DecisionID string               `json:"decision_id,omitempty"`
	RequestID  string               `json:"request_id,omitempty"`
	// EndReason and EndedAt say why and when a sandbox ended (410 sandbox_ended).
	EndReason string     `json:"end_reason,omitempty"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	// Limit names the configured bound that refused the request, by its
	// configuration key (policy.evaluate.timeout, policy.replay.memory_bytes,
	// ...; docs/runbook.md).
	Limit string `json:"limit,omitempty"`
	// SandboxID names the sandbox a create made and that failed
	// (placement_failed): its record stays readable by id.
	SandboxID string `json:"sandbox_id,omitempty"`

	retryAfter int    // seconds; sets Retry-After when positive
	cause      error  // logged, never shown
	wwwAuth    string // WWW-Authenticate challenge for 401s
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

// Codes and their statuses. The code is the stable, machine-readable part.
const (
	codeInvalidRequest    = "invalid_request"
	codeUnauthenticated   = "unauthenticated"
	codeTokenExpired      = "token_expired"
	codePolicyDenied      = "policy_denied"
	codeNotFound          = "sandbox_not_found"
	codeRouteNotFound     = "not_found"
	codeMethodNotAllowed  = "method_not_allowed"
	codeNotRunning        = "sandbox_not_running"
	codeExpired           = "sandbox_expired"
	codeEnded             = "sandbox_ended"
	codeLost              = "sandbox_lost"
	codeTooLarge          = "payload_too_large"
	codeHeaderTooLarge    = "header_too_large"
	codeBudget            = "budget_exhausted"
	codeNomadUnavailable  = "nomad_unavailable"
	codeNoNode            = "no_enrolled_node"
	codeHostNotFound      = "host_not_found"
	codeNotEnrolled       = "host_not_enrolled"
	codeSandboxesLive     = "sandboxes_live"
	codeTokenNotFound     = "token_not_found"
	codeUnavailable       = "unavailable"
	codeInternal          = "internal_error"
	codePolicyBusy        = "policy_busy"
	codeDeadline          = "evaluation_deadline_exceeded"
	codeCandidateLimits   = "candidate_exceeded_limits"
	codeIdempotencyReused = "idempotency_key_reused"
	codeLengthRequired    = "length_required"
	codeFileNotFound      = "file_not_found"
	codePathEscapes       = "path_escapes_roots"
	codeIsDirectory       = "is_a_directory"
	codeNotDirectory      = "not_a_directory"
	codeDirNotEmpty       = "directory_not_empty"
	codeNotRegular        = "not_a_regular_file"
	codeFileTooLarge      = "file_too_large"
	codeIncompleteBody    = "incomplete_body"
	codeWriteFailed       = "write_failed"
	codeImageLacksTools   = "image_lacks_tools"
	codeFilesTimeout      = "files_timeout"
	codeRequestTimeout    = "request_timeout"
	codePlacementFailed   = "placement_failed"
	codeRateLimited       = "rate_limited"
)

var problemTitles = map[string]string{ //nolint:gosec // G101: titles of error codes, not credentials
	codeInvalidRequest:    "The request is invalid",
	codePolicyBusy:        "As many policy evaluations of this kind as allowed are running",
	codeDeadline:          "The evaluation ran past its deadline",
	codeCandidateLimits:   "The candidate bundle ran past a limit of its worker",
	codeIdempotencyReused: "The Idempotency-Key was used with another body",
	codeUnauthenticated:   "Authentication required",
	codeTokenExpired:      "The token has expired",
	codePolicyDenied:      "Denied by policy",
	codeNotFound:          "No such sandbox",
	codeRouteNotFound:     "No such route",
	codeMethodNotAllowed:  "Method not allowed",
	codeNotRunning:        "The sandbox is not running",
	codeExpired:           "The sandbox has expired",
	codeTooLarge:          "The request body is too large",
	codeHeaderTooLarge:    "The request headers are too large",
	codeEnded:             "The sandbox has ended",
	codeBudget:            "Budget exhausted",
	codeNomadUnavailable:  "Nomad is unavailable",
	codeNoNode:            "No node can host a sandbox",
	codeLost:              "The sandbox was lost",
	codeHostNotFound:      "No such host",
	codeNotEnrolled:       "The host is not enrolled",
	codeSandboxesLive:     "Sandboxes are live on the host",
	codeTokenNotFound:     "No such token",
	codeUnavailable:       "Service unavailable",
	codeInternal:          "Internal error",
	codeLengthRequired:    "Content-Length is required",
	codeFileNotFound:      "No such file or directory in the sandbox",
	codePathEscapes:       "The path leaves the allowed roots through a symbolic link",
	codeIsDirectory:       "The path is a directory",
	codeNotDirectory:      "A component of the path is not a directory",
	codeDirNotEmpty:       "The directory is not empty",
	codeNotRegular:        "The path is not a regular file or a directory",
	codeFileTooLarge:      "The file is larger than a read returns",
	codeIncompleteBody:    "The body ended before its Content-Length",
	codeWriteFailed:       "The sandbox's filesystem refused the write",
	codeImageLacksTools:   "The image lacks the tools file operations need",
	codeFilesTimeout:      "The file operation timed out",
	codeRequestTimeout:    "The request body did not arrive in time",
	codePlacementFailed:   "Nomad could not place or start the sandbox",
	codeRateLimited:       "Too many requests",
}

func newProblem(status int, code, detail string) *Problem {
	return &Problem{Type: problemTypeBase + code, Title: problemTitles[code], Status: status, Code: code, Detail: detail}
}

// invalid is a 400 naming the field and the rule that was broken.
func invalid(field, format string, args ...any) *Problem {
	if field == "" {
		field = "body" // e.g. an unknown field named "": still name something
	}
	p := newProblem(http.StatusBadRequest, codeInvalidRequest, field+": "+fmt.Sprintf(format, args...))
	p.Field = field
	return p
}

func unauthenticated(detail string) *Problem {
	p := newProblem(http.StatusUnauthorized, codeUnauthenticated, detail)
	p.wwwAuth = `Bearer realm="sandgate"`
	return p
}

func notFound(id string) *Problem {
	return newProblem(http.StatusNotFound, codeNotFound, fmt.Sprintf("sandbox %q does not exist", id))
}

func notRunning(id string, state store.State) *Problem {
	return newProblem(http.StatusConflict, codeNotRunning, fmt.Sprintf("sandbox %q is %s", id, state))
}

// nomadUnavailable is a 503 with Retry-After: nothing was changed.
func nomadUnavailable(detail string, cause error) *Problem {
	p := newProblem(http.StatusServiceUnavailable, codeNomadUnavailable, detail)
	p.retryAfter = 5
	p.cause = cause
	return p
}

func unavailable(detail string, cause error) *Problem {
	p := newProblem(http.StatusServiceUnavailable, codeUnavailable, detail)
	p.retryAfter = 5
	p.cause = cause
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
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusRequestEntityTooLarge:
			return newProblem(he.Code, codeTooLarge, "the request body exceeds the 1 MiB limit")
		case http.StatusNotFound:
			return newProblem(he.Code, codeRouteNotFound, "no route matches this path")
		case http.StatusMethodNotAllowed:
			return newProblem(he.Code, codeMethodNotAllowed, "this path does not accept that method")
		case http.StatusUnauthorized:
			return unauthenticated(fmt.Sprint(he.Message))
		}
		if he.Code >= 400 && he.Code < 500 {
			return newProblem(he.Code, codeInvalidRequest, fmt.Sprint(he.Message))
		}
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return unavailable("the request was cancelled or timed out before it completed", err)
	case errors.Is(err, nomad.ErrUnavailable), errors.Is(err, nomad.ErrExecDropped):
		return nomadUnavailable("Nomad did not answer; nothing was changed, retry later", err)
	case errors.Is(err, store.ErrClosed):
		return unavailable("the store is closed", err)
	}
	p = newProblem(http.StatusInternalServerError, codeInternal, "an internal error occurred; the request was refused and nothing was changed")
	p.cause = err
	return p
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
	if out.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(out.retryAfter))
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
