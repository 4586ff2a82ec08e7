package client

import (
	"encoding/json"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"sandgate/gateway/wire"
)

// Problem codes of docs/api.md ("Errors"), declared once in
// sandgate/gateway/wire for the gateway and the client. Branch on
// Problem.Code.
const (
	CodeInvalidRequest    = wire.CodeInvalidRequest
	CodeUnauthenticated   = wire.CodeUnauthenticated
	CodeTokenExpired      = wire.CodeTokenExpired
	CodePolicyDenied      = wire.CodePolicyDenied
	CodeSandboxNotFound   = wire.CodeSandboxNotFound
	CodeRouteNotFound     = wire.CodeRouteNotFound
	CodeMethodNotAllowed  = wire.CodeMethodNotAllowed
	CodeRequestTimeout    = wire.CodeRequestTimeout
	CodeSandboxNotRunning = wire.CodeSandboxNotRunning
	CodeNoEnrolledNode    = wire.CodeNoEnrolledNode
	CodeSandboxExpired    = wire.CodeSandboxExpired
	CodeSandboxEnded      = wire.CodeSandboxEnded
	CodeSandboxLost       = wire.CodeSandboxLost
	CodeHeaderTooLarge    = wire.CodeHeaderTooLarge
	CodePayloadTooLarge   = wire.CodePayloadTooLarge
	CodeBudgetExhausted   = wire.CodeBudgetExhausted
	CodeRateLimited       = wire.CodeRateLimited
	CodeInternalError     = wire.CodeInternalError
	CodeNomadUnavailable  = wire.CodeNomadUnavailable
	CodeUnavailable       = wire.CodeUnavailable
	// CodePlacementFailed: Nomad refused to place the sandbox (429 when the
	// node was full, 503 otherwise) or its task failed to start; nothing
	// is left and the budget is released. Retry-After says when to retry.
	CodePlacementFailed = wire.CodePlacementFailed

	// Hosts and tokens.
	CodeHostNotFound    = wire.CodeHostNotFound
	CodeHostNotEnrolled = wire.CodeHostNotEnrolled
	CodeSandboxesLive   = wire.CodeSandboxesLive
	CodeTokenNotFound   = wire.CodeTokenNotFound

	// Policy evaluation and idempotency.
	CodePolicyBusy                 = wire.CodePolicyBusy
	CodeEvaluationDeadlineExceeded = wire.CodeEvaluationDeadlineExceeded
	CodeCandidateExceededLimits    = wire.CodeCandidateExceededLimits
	CodeIdempotencyKeyReused       = wire.CodeIdempotencyKeyReused

	// The files API's (WriteFile, ReadFile, ListFiles, DeleteFile).
	CodeLengthRequired    = wire.CodeLengthRequired    // 411: a write without its size
	CodeFileNotFound      = wire.CodeFileNotFound      // 404
	CodePathEscapesRoots  = wire.CodePathEscapesRoots  // 403: a symbolic link leads out of files.roots
	CodeIsDirectory       = wire.CodeIsDirectory       // 409: a write onto a directory
	CodeNotDirectory      = wire.CodeNotDirectory      // 409: a component on the way is a file
	CodeDirectoryNotEmpty = wire.CodeDirectoryNotEmpty // 409: a delete without recursive
	CodeNotRegularFile    = wire.CodeNotRegularFile    // 422: a FIFO, socket or device
	CodeFileTooLarge      = wire.CodeFileTooLarge      // 422: beyond files.max_read_bytes
	CodeImageLacksTools   = wire.CodeImageLacksTools   // 422: the image has no sh, cat, stat...
	CodeIncompleteBody    = wire.CodeIncompleteBody    // 400: fewer bytes than the size arrived; nothing written
	CodeWriteFailed       = wire.CodeWriteFailed       // 409: a read-only or full filesystem, no permission
	CodeFilesTimeout      = wire.CodeFilesTimeout      // 504: beyond files.timeout_seconds
)

// Violation is one broken policy rule check; Mode is "warn" on a warning.
type Violation = wire.Violation

// Problem is a non-2xx answer of the API: the RFC 9457 problem document
// the gateway wrote, with sandgate's extension members (wire.Problem).
// When the body was not a problem document (a proxy's error page, say),
// Status still holds the HTTP status, Title its text and Detail a short
// excerpt of the body; RetryAfter is the Retry-After header. Error and
// Denied read it.
type Problem = wire.Problem

// maxProblemBody bounds how much of an error body is read.
const maxProblemBody = 64 << 10

// excerptLen is how much of a non-problem body Detail keeps.
const excerptLen = 200

// readProblem turns a non-2xx answer into a *Problem.
func readProblem(resp *http.Response) *Problem {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxProblemBody))
	p := &Problem{}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "application/problem+json" || mt == "application/json" {
		if err := json.Unmarshal(data, p); err != nil || (p.Code == "" && p.Title == "" && p.Detail == "") {
			p = &Problem{Detail: excerpt(data)}
		}
		printableMembers(p)
	} else {
		p.Detail = excerpt(data)
	}
	p.Status = resp.StatusCode
	if p.Title == "" {
		p.Title = http.StatusText(resp.StatusCode)
	}
	p.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	return p
}

// excerpt is the start of a body as one line of printable text.
func excerpt(b []byte) string {
	if len(b) > excerptLen {
		// a rune cut in half becomes RuneError below, then a space
		b = append(b[:excerptLen:excerptLen], "..."...)
	}
	return strings.Join(strings.Fields(Printable(string(b))), " ")
}

// Printable is s as text a terminal shows as it is: white space and
// invalid bytes become a plain space, and every other character that is not
// printable is dropped (wire.Printable). A problem's members pass through
// it, so a detail that quotes a task's error cannot steer the terminal that
// prints it.
func Printable(s string) string { return wire.Printable(s) }

// printableMembers passes every text member of p through Printable.
func printableMembers(p *Problem) {
	for _, f := range []*string{&p.Type, &p.Code, &p.Title, &p.Detail, &p.Field, &p.DecisionID, &p.RequestID, &p.EndReason, &p.Limit, &p.SandboxID} {
		*f = Printable(*f)
	}
	for i := range p.RuleIDs {
		p.RuleIDs[i] = Printable(p.RuleIDs[i])
	}
	for i := range p.Violations {
		v := &p.Violations[i]
		v.Rule, v.Msg, v.Mode = Printable(v.Rule), Printable(v.Msg), Printable(v.Mode)
	}
}

// retryAfter reads delay-seconds or an HTTP date; zero when absent or bad.
// A delay longer than a Duration holds is the longest Duration, never a
// wrapped one.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		switch {
		case n < 0:
			return 0
		case int64(n) > math.MaxInt64/int64(time.Second):
			return math.MaxInt64
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
