package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/open-policy-agent/opa/v1/ast"

	"sandgate/gateway/audit"
	"sandgate/gateway/wire"
	"sandgate/policies"
)

// decide evaluates one entrypoint, logs the decision (allow or deny) and
// counts it. An evaluation error or an unwritable decision log refuses the
// request: sandgate fails closed.
func (s *Server) decide(ctx context.Context, ep policies.Entrypoint, v ast.Value, doc any, principal string, c echo.Context) (policies.Decision, error) {
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
	if c != nil {
		if id := c.Param("id"); id != "" {
			entry.SandboxID = id
		}
		entry.Method = c.Request().Method
		entry.Route = c.Path()
		entry.RequestID = requestIDOf(c)
		entry.ClientRequestID = clientRequestIDOf(c)
	}
	if err != nil {
		entry.Error = err.Error()
	}
	if lerr := s.cfg.Decisions.Write(entry); lerr != nil {
		return d, unavailable("the decision log could not be written; the request was refused", lerr)
	}
	if err != nil {
		p := newProblem(http.StatusServiceUnavailable, wire.CodeUnavailable, "the policy could not decide; the request was refused (fail closed)")
		p.DecisionID = d.ID
		p.cause = err
		p.RetryAfter = 5 * time.Second
		return d, p
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
