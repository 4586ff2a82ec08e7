package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"

	"github.com/labstack/echo/v4"
	"github.com/open-policy-agent/opa/v1/ast"

	"sandgate/gateway/audit"
	"sandgate/policies"
)

// The two ways a decision cannot be made. decide returns them wrapped in a
// *DecisionError; the one error handler (fromError) answers both with a
// 503, and a background loop logs them and acts on nothing: either way
// sandgate fails closed.
var (
	// ErrUndecided: the engine returned an error (an evaluation error,
	// an undefined decision, a cancelled context).
	ErrUndecided = errors.New("the policy could not decide")
	// ErrDecisionLog: the decision was made but could not be logged, so
	// it is not acted on.
	ErrDecisionLog = errors.New("the decision log could not be written")
)

// DecisionError is a decision that could not be made or logged: Kind is
// ErrUndecided or ErrDecisionLog, Cause what went wrong, DecisionID the
// decision's id when the engine gave one.
type DecisionError struct {
	Kind       error
	Cause      error
	DecisionID string
}

func (e *DecisionError) Error() string { return e.Kind.Error() + ": " + e.Cause.Error() }

// Unwrap gives both Kind and Cause to errors.Is and errors.As.
func (e *DecisionError) Unwrap() []error { return []error{e.Kind, e.Cause} }

// requestFacts are what a decision line records of the HTTP request that
// asked for it; a background loop's decision has none.
type requestFacts struct {
	Method, Route, RequestID, ClientRequestID, SandboxID string
}

// factsOf reads c's request facts for the decision log; nil for a nil c
// (a decision asked for outside a request, such as Enroll at start).
func factsOf(c echo.Context) *requestFacts {
	if c == nil {
		return nil
	}
	return &requestFacts{
		Method: c.Request().Method, Route: c.Path(), SandboxID: c.Param("id"),
		RequestID: requestIDOf(c), ClientRequestID: clientRequestIDOf(c),
	}
}

// decide evaluates one entrypoint, logs the decision (allow or deny) and
// counts it. An evaluation error or an unwritable decision log is a
// *DecisionError and the decision must not be acted on: sandgate fails
// closed. req is the request that asked (nil for a background loop).
func (s *Server) decide(ctx context.Context, ep policies.Entrypoint, v ast.Value, doc any, principal string, req *requestFacts) (policies.Decision, error) {
	d, err := s.cfg.Engine.Decide(ctx, ep, v)
	s.metrics.observeDecision(d, err)
	docJSON, jerr := json.Marshal(doc)
	entry := audit.Entry{
		Time:       s.cfg.Now().UTC(),
		DecisionID: d.ID,
		Entrypoint: string(ep),
		Revision:   d.Revision,
		Allow:      err == nil && d.Allow,
		RuleIDs:    d.RuleIDs(),
		InputSHA:   inputDigest(docJSON, jerr),
		DurationUS: d.Duration.Microseconds(),
		Principal:  principal,
	}
	for _, vs := range [][]policies.Violation{d.Violations, d.Warnings, d.DryRun} {
		for _, v := range vs {
			entry.Violations = append(entry.Violations, audit.Violation{Rule: v.Rule, Msg: v.Msg, Mode: v.Mode})
		}
	}
	if s.cfg.LogInputs {
		// Only ever the masked document: an input that cannot be masked
		// is not logged, and the line says so.
		if masked, merr := audit.MaskInput(docJSON); jerr == nil && merr == nil {
			entry.Input = masked
		} else {
			entry.InputOmitted = "the input could not be masked"
		}
	}
	switch in := doc.(type) {
	case *policies.AdmissionInput:
		entry.SandboxID = in.Sandbox.ID
	case *policies.ReclaimInput:
		if in.Sandbox != nil {
			entry.SandboxID = in.Sandbox.ID
		}
	case *policies.LifecycleInput:
		if in.Sandbox != nil {
			entry.SandboxID = in.Sandbox.ID
		}
		entry.Action = in.Action + " " + in.Reason + " " + in.Job.ID
	}
	if req != nil {
		if req.SandboxID != "" {
			entry.SandboxID = req.SandboxID
		}
		entry.Method, entry.Route = req.Method, req.Route
		entry.RequestID, entry.ClientRequestID = req.RequestID, req.ClientRequestID
	}
	if err != nil {
		entry.Error = err.Error()
	}
	if lerr := s.cfg.Decisions.Write(entry); lerr != nil {
		return d, &DecisionError{Kind: ErrDecisionLog, Cause: lerr, DecisionID: d.ID}
	}
	if err != nil {
		return d, &DecisionError{Kind: ErrUndecided, Cause: err, DecisionID: d.ID}
	}
	return d, nil
}

// inputDigest is the hex SHA-256 of the input document's JSON.
func inputDigest(doc []byte, err error) string {
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(doc)
	return hex.EncodeToString(sum[:])
}

func violationsDetail(d policies.Decision) string {
	msg := ""
	for i, v := range d.Violations {
		if i == 3 {
			msg += "; ..."
			break
		}
		if i > 0 {
			msg += "; "
		}
		msg += v.Rule + ": " + v.Msg
	}
	return msg
}
