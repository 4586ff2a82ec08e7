package nomad

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/hashicorp/nomad/api"
)

// Sentinels that callers branch on with errors.Is. Every error a Client
// method returns is either one of the caller's context errors (wrapped) or an
// *Error whose Err is one of these sentinels, or nil for failures nobody
// branches on (an unexpected 4xx, a malformed answer, exec 1011).
var (
	// ErrNotFound: the job, allocation, evaluation or node does not exist (HTTP
	// 404, exec close 1008). Nomad also closes an exec with 1008 for other
	// non-500 failures such as a denied ACL, and answers logs of a task that
	// has not written yet with 404: both come back as ErrNotFound.
	ErrNotFound = errors.New("nomad: not found")
	// ErrUnavailable: Nomad could not be asked or did not answer properly:
	// connection refused, reset or dropped, the per-call Timeout, HTTP 429 and
	// every 5xx (including the 500 Nomad answers to an invalid job; the
	// *Error's Status and Msg say which).
	ErrUnavailable = errors.New("nomad: unavailable")
	// ErrNodeUnreachable: a client endpoint (exec, logs) could not reach the
	// allocation's node: its agent is down or disconnected. Nomad answers
	// "No path to node" (HTTP 404, or exec close 1008) at once, also while
	// the node still reads ready; the allocation may come back with it. It is
	// also an ErrUnavailable.
	ErrNodeUnreachable = errors.New("nomad: the allocation's node cannot be reached")
	// ErrForbiddenJob: the job is outside the gateway's JobPrefix (or
	// namespace); the client refused it without talking to Nomad (rule H9).
	ErrForbiddenJob = errors.New("nomad: job outside the gateway's prefix")
	// ErrExecDropped: the exec stream ended without an exit code. The command
	// may still be running inside the task.
	ErrExecDropped = errors.New("nomad: exec stream ended without an exit code")
	// ErrCommandNotStarted: exec reached the task but the command could not
	// be started (Nomad closes with 1011 "failed to start command: ...", e.g.
	// an executable that is not in the image). Nothing ran.
	ErrCommandNotStarted = errors.New("nomad: command could not be started")
	// ErrInvalidConfig: New refused the Config (an operator mistake).
	ErrInvalidConfig = errors.New("nomad: invalid config")
)

// Error is a failed Client call. It never contains the Nomad token.
type Error struct {
	// Op is the Client method that failed, one of the Op constants.
	Op string
	// Status is the HTTP status Nomad answered with or, for Exec, the
	// WebSocket close code (1008, 1011, ...; 1006 when the connection broke
	// without one). Zero when no status was received.
	Status int
	// Msg is Nomad's message (its response body or close reason) or the
	// transport failure, trimmed to 1 KiB.
	Msg string
	// Err is the sentinel the error stands for (ErrNotFound, ErrUnavailable,
	// ErrForbiddenJob, ErrExecDropped) or nil.
	Err error
}

// Error returns "nomad: <op>[: status <n>][: <sentinel>][: <msg>]".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("nomad: ")
	b.WriteString(e.Op)
	if e.Status != 0 {
		fmt.Fprintf(&b, ": status %d", e.Status)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(e.Err.Error(), "nomad: "))
	}
	if e.Msg != "" {
		b.WriteString(": ")
		b.WriteString(e.Msg)
	}
	return b.String()
}

// Unwrap returns the sentinel, so that errors.Is(err, ErrNotFound) and the
// like hold.
func (e *Error) Unwrap() error { return e.Err }

// Is makes an unreachable node also an ErrUnavailable: callers that only
// know "Nomad could not serve this" branch on that.
func (e *Error) Is(target error) bool {
	return target == ErrUnavailable && e.Err == ErrNodeUnreachable
}

// maxMsg bounds Error.Msg.
const maxMsg = 1024

// newError builds an *Error with a token-free, bounded message.
func (c *Client) newError(op string, status int, msg string, sentinel error) *Error {
	msg = strings.TrimSpace(c.redact(msg))
	if len(msg) > maxMsg {
		msg = msg[:maxMsg] + "..."
	}
	return &Error{Op: op, Status: status, Msg: msg, Err: sentinel}
}

// redact removes the token from s.
func (c *Client) redact(s string) string {
	if c.cfg.Token == "" {
		return s
	}
	return strings.ReplaceAll(s, c.cfg.Token, "<redacted>")
}

// statusError classifies an HTTP status: 404 is ErrNotFound, 429 and 5xx are
// ErrUnavailable, anything else carries no sentinel.
func (c *Client) statusError(op string, status int, body string) *Error {
	var sentinel error
	switch {
	case noPathToNode(body):
		sentinel = ErrNodeUnreachable
	case status == http.StatusNotFound:
		sentinel = ErrNotFound
	case status == http.StatusTooManyRequests, status >= 500:
		sentinel = ErrUnavailable
	}
	if strings.TrimSpace(body) == "" {
		body = http.StatusText(status)
	}
	return c.newError(op, status, body, sentinel)
}

// noPathToNode reports Nomad's wording for a client endpoint whose node it
// cannot reach (nomad/structs ErrNoNodeConn, "No path to node").
func noPathToNode(msg string) bool { return strings.Contains(msg, "No path to node") }

// classify turns an error of the api package (or of the transport) into the
// package's errors. ctx is the caller's context, callCtx the one bounded by
// the per-call Timeout.
func (c *Client) classify(ctx, callCtx context.Context, op string, err error) error {
	var own *Error
	if errors.As(err, &own) {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("nomad: %s: %w", op, ctx.Err())
	}
	var ure api.UnexpectedResponseError
	if errors.As(err, &ure) && ure.HasStatusCode() {
		return c.statusError(op, ure.StatusCode(), ure.Body())
	}
	if callCtx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return c.newError(op, 0, fmt.Sprintf("no answer within %s", c.cfg.Timeout), ErrUnavailable)
	}
	if isTransportError(err) {
		return c.newError(op, 0, err.Error(), ErrUnavailable)
	}
	return c.newError(op, 0, err.Error(), nil)
}

// isTransportError reports a failure to reach Nomad or to read its answer.
func isTransportError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE)
}

// configErr builds an error wrapping ErrInvalidConfig.
func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}
