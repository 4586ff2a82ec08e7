package wire

import (
	"encoding/json"
	"time"
)

// Decision is one policy decision of the gateway's decision log, as GET
// /v1/decisions answers it and as the log keeps it (one JSON line each).
// Time is a time.Time, not text: the log is queried by time.
type Decision struct {
	// Time is when the decision was taken, RFC 3339 with the fraction of
	// a second.
	Time       time.Time `json:"time"`
	DecisionID string    `json:"decision_id"`
	Entrypoint string    `json:"entrypoint"`
	Revision   string    `json:"bundle_revision"`
	Allow      bool      `json:"allow"`
	RuleIDs    []string  `json:"rule_ids"`
	// Replica is the gateway that took the decision, among the replicas
	// of one deployment.
	Replica string `json:"replica,omitempty"`
	// InputSHA is the hex SHA-256 of the input document's JSON.
	InputSHA   string `json:"input_sha256"`
	DurationUS int64  `json:"duration_us"`
	Principal  string `json:"principal,omitempty"`
	Method     string `json:"method,omitempty"`
	Route      string `json:"route,omitempty"`
	// RequestID is the gateway's own id of the request.
	RequestID string `json:"request_id,omitempty"`
	// ClientRequestID is the caller's X-Request-Id when it was well-formed:
	// a claim by the caller, never the gateway's id.
	ClientRequestID string `json:"client_request_id,omitempty"`
	SandboxID       string `json:"sandbox_id,omitempty"`
	// Action is what a lifecycle, hosts or reclaim decision was about.
	Action string `json:"action,omitempty"`
	// Error is set when the engine failed (the request was refused).
	Error string `json:"error,omitempty"`
	// Violations are the decision's violations with their messages.
	Violations []Violation `json:"violations,omitempty"`
	// Input is the input document, masked, when inputs are logged and
	// asked for (inputs=true); InputOmitted says why an input that should
	// be here is not.
	Input        json.RawMessage `json:"input,omitempty"`
	InputOmitted string          `json:"input_omitted,omitempty"`
}

// DecisionPage is one page of GET /v1/decisions, newest first.
type DecisionPage struct {
	Decisions []Decision `json:"decisions"`
	// NextCursor continues with older decisions; empty when there are none.
	NextCursor string `json:"next_cursor,omitempty"`
}
