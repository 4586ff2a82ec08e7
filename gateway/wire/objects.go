package wire

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The API's objects, field for field as docs/api.md and the OpenAPI
// document (gateway/apidoc/openapi.yaml) show them. Times are the RFC 3339
// UTC strings the gateway sends (empty when unset), kept as text so an
// object prints back exactly as it was received.

// Violation is one rule a decision found violated.
type Violation struct {
	Rule string `json:"rule"`
	Msg  string `json:"msg"`
	// Mode is set on warnings ("warn") and dry runs ("dryrun"); a
	// violation that refuses has none.
	Mode string `json:"mode,omitempty"`
}

// Problem is the RFC 9457 problem document every error answer of the API
// carries, with sandgate's extension members. The client reads a non-2xx
// answer into one: when the body was not a problem document (a proxy's
// error page, say), Status still holds the HTTP status, Title its text and
// Detail a short excerpt of the body.
type Problem struct {
	Type  string `json:"type"`
	Title string `json:"title"`
	// Status is the HTTP status of the answer (the client takes it from
	// the answer, over the document's own member).
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Code is the stable, machine-readable part: one of the Code* constants.
	Code string `json:"code"`
	// Field names the request field a 400 is about.
	Field string `json:"field,omitempty"`
	// RuleIDs are the policy rules that decided, e.g. ["T2"].
	RuleIDs []string `json:"rule_ids,omitempty"`
	// Violations are the policy's messages, one per broken rule check.
	Violations []Violation `json:"violations,omitempty"`
	DecisionID string      `json:"decision_id,omitempty"`
	RequestID  string      `json:"request_id,omitempty"`
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
	// RetryAfter is the answer's Retry-After header (429, 503), in whole
	// seconds on the wire; zero when absent.
	RetryAfter time.Duration `json:"-"`
}

// Error reads "403 policy_denied: T2: session token is bound to another sandbox".
func (p *Problem) Error() string {
	what := p.Code
	if what == "" {
		what = strings.ToLower(http.StatusText(p.Status))
	}
	s := fmt.Sprintf("%d %s", p.Status, what)
	if p.Detail != "" {
		s += ": " + p.Detail
	}
	return s
}

// Denied reports whether a policy decided this answer: a 403
// policy_denied, or a 409 or 429 that names the rules it broke (a budget
// or a node state). A 401 (a bad, expired or revoked token) is not a denial.
func (p *Problem) Denied() bool {
	if p.Code == CodePolicyDenied {
		return true
	}
	switch p.Status {
	case http.StatusForbidden, http.StatusConflict, http.StatusTooManyRequests:
		return len(p.RuleIDs) > 0
	}
	return false
}

// Sandbox states.
const (
	StateStarting = "starting"
	StateRunning  = "running"
	StateFailed   = "failed"
	StateEnded    = "ended"
)

// Sandbox is the sandbox object.
type Sandbox struct {
	// Warnings are the rules in warn mode the request violated. The
	// gateway never fills it: its JSON serializer puts the member first
	// into any object it answers; a client reads it here.
	Warnings  []Violation       `json:"warnings,omitempty"`
	ID        string            `json:"id"`
	State     string            `json:"state"`
	Node      string            `json:"node"`
	Profile   string            `json:"profile"`
	Network   string            `json:"network"`
	Image     string            `json:"image"`
	CPUMHz    int64             `json:"cpu_mhz"`
	MemoryMB  int64             `json:"memory_mb"`
	Principal string            `json:"principal"`
	CreatedAt string            `json:"created_at"`
	ExpiresAt string            `json:"expires_at"`
	CeilingAt string            `json:"ceiling_at"`
	Labels    map[string]string `json:"labels"`
	EndedAt   string            `json:"ended_at,omitempty"`
	EndReason string            `json:"end_reason,omitempty"`
	LastError string            `json:"last_error,omitempty"`
	// Token is the session token: in the create answer only, and only
	// when the sandbox did not fail.
	Token string `json:"token,omitempty"`
	// Clamped is in the extend answer only: true when the lifetime
	// ceiling cut the requested TTL.
	Clamped *bool `json:"clamped,omitempty"`
	// TokenReissued is in the answer to a repeated keyed create only: true
	// when Token is a fresh session token (the old one is revoked).
	TokenReissued *bool `json:"token_reissued,omitempty"`
}

// SandboxPage is one page of GET /v1/sandboxes. Its members stand in the
// order the gateway has always written them (by name).
type SandboxPage struct {
	// NextCursor reads the next page with the same filters; empty on the
	// last one.
	NextCursor string    `json:"next_cursor,omitempty"`
	Sandboxes  []Sandbox `json:"sandboxes"`
}

// Token is an operator or agent token's record.
type Token struct {
	ID        string `json:"id"`
	Role      string `json:"role"`
	Subject   string `json:"subject"`
	Label     string `json:"label"`
	CreatedAt string `json:"created_at"`
	ExpiresAt string `json:"expires_at"`
	LastUsed  string `json:"last_used"`
	RevokedAt string `json:"revoked_at"`
	Quota     *Quota `json:"quota,omitempty"`
	// Token is the secret: in the mint answer only.
	Token string `json:"token,omitempty"`
}

// TokenList is GET /v1/tokens: operator and agent tokens, never their
// secrets.
type TokenList struct {
	Tokens []Token `json:"tokens"`
}

// Quota bounds an agent principal (B3).
type Quota struct {
	MaxLiveSandboxes int64 `json:"max_live_sandboxes"`
}
