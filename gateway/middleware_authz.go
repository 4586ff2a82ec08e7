package gateway

import (
	"errors"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"sandgate/gateway/wire"
	"sandgate/internal/clip"
	"sandgate/policies"
	"sandgate/store"
)

// authorize decodes the route's body, loads the sandbox the route targets,
// and asks data.sandgate.authz.decision. Only an allow reaches the handler.
func (s *Server) authorize(newBody func() requestBody) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			ctx := c.Request().Context()
			cl := callerOf(c)
			if cl == nil { // authenticate did not run: refuse, never allow
				return unauthenticated("no authenticated caller")
			}
			if !rateChecked(c) { // no bucket admitted it (Q1): refuse, never allow
				return newProblem(http.StatusInternalServerError, wire.CodeInternalError, "the request passed no rate limit; it was refused")
			}
			in, rec, body, err := s.authzInput(c, cl.facts(), newBody)
			if err != nil {
				return err
			}
			d, err := s.decide(ctx, policies.Authz, in.Value(), &in, cl.principal(), factsOf(c))
			if err != nil {
				return err
			}
			if !d.Allow {
				return s.denial(d, rec, c.Param("id"), cl.active)
			}
			warn(c, d)
			if body != nil {
				if err := body.check(s); err != nil {
					return err
				}
				setBody(c, body)
			}
			setRecord(c, rec) // the target, or nil: never another sandbox's record
			return next(c)
		}
	}
}

// authzInput builds the authz input of the request c holds, for a caller
// with token facts tok: the route template and its parameters, the body
// the route takes (decoded, refusing what is malformed), the logs query,
// and the target sandbox's record from the store. It is the one builder:
// the live middleware and the dry run (POST /v1/policy/evaluate with a
// request) both call it, so a dry run decides exactly what a request
// would. The decoded body is returned for the handler.
func (s *Server) authzInput(c echo.Context, tok *policies.TokenFacts, newBody func() requestBody) (policies.AuthzInput, *store.Sandbox, requestBody, error) {
	in := policies.AuthzInput{
		Now: s.cfg.Now().Unix(),
		Request: policies.Request{
			Method: c.Request().Method,
			Route:  c.Path(),
			Params: pathParams(c),
		},
		Token: tok,
	}
	var body requestBody
	if newBody != nil {
		body = newBody()
		if err := decodeBody(c.Request().Body, body); err != nil {
			return in, nil, nil, err
		}
		in.Request.Body = body.policyBody()
	}
	in.Request.IdempotencyKey = c.Request().Header.Get(headerIdempotencyKey) != ""
	switch c.Path() {
	case "/v1/sandboxes/:id/logs":
		q, err := logsQuery(c)
		if err != nil {
			return in, nil, nil, err
		}
		in.Request.Query = q
	case filesRoute:
		fq, err := parseFilesQuery(c)
		if err != nil {
			return in, nil, nil, err
		}
		in.Request.Query, in.Request.File = fq.policyQuery(), fq.policyFile()
	}
	var rec *store.Sandbox
	if cached := cachedRecord(c); cached != nil && cached.ID == c.Param("id") {
		rec = cached // read by authenticate in this request
		in.Sandbox = policyRecord(*rec)
	} else if id := c.Param("id"); id != "" {
		r, err := s.cfg.Store.Get(c.Request().Context(), id)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return in, nil, nil, unavailable("the sandbox store could not be read; nothing was changed", err)
		default:
			rec = &r
			in.Sandbox = policyRecord(r)
		}
	}
	return in, rec, body, nil
}

func pathParams(c echo.Context) map[string]string {
	names := c.ParamNames()
	if len(names) == 0 {
		return nil
	}
	p := make(map[string]string, len(names))
	for i, n := range names {
		p[n] = c.ParamValues()[i]
	}
	return p
}

func policyRecord(r store.Sandbox) *policies.SandboxRecord {
	return &policies.SandboxRecord{
		ID: r.ID, JobID: r.JobID, Principal: r.Principal, State: string(r.State),
		Profile: r.Profile, Network: r.Network, Node: r.Node,
		CreatedAt: r.CreatedAt.Unix(), ExpiresAt: r.ExpiresAt.Unix(), CeilingAt: r.CeilingAt.Unix(),
	}
}

// denial maps an authz deny to a problem. A missing target is a 404 for
// every role (ids are random: this reveals nothing a 403 would not); a
// revoked token a 401 (before anything else: the caller must authenticate
// again); a target that ended or expired a 410 saying when and why, but
// only when T3 is the one ground of the denial: a caller the policy also
// refuses for another reason (T2: not its sandbox) gets the 403 and learns
// nothing of the record; everything else a 403.
func (s *Server) denial(d policies.Decision, rec *store.Sandbox, id string, tokenActive bool) error {
	rules := d.RuleIDs()
	onlyT3 := len(rules) > 0 && !slices.ContainsFunc(rules, func(r string) bool { return r != "T3" })
	var p *Problem
	switch {
	case id != "" && rec == nil:
		p = notFound(id)
	case slices.Contains(rules, "T4") && !tokenActive: // T4 also judges a mint request's body
		p = unauthenticated("the token has been revoked")
	case rec != nil && onlyT3 && !rec.State.Live():
		p = endedProblem(*rec)
	case rec != nil && onlyT3 && s.expired(*rec):
		at := rec.ExpiresAt
		if rec.CeilingAt.Before(at) {
			at = rec.CeilingAt
		}
		p = newProblem(http.StatusGone, wire.CodeSandboxExpired, "sandbox "+rec.ID+" expired at "+at.UTC().Format(timeFormat)+
			"; it is reaped shortly, create a new one")
	default:
		p = newProblem(http.StatusForbidden, wire.CodePolicyDenied, violationsDetail(d))
	}
	p.RuleIDs = rules
	p.Violations = violationsOf(d.Violations)
	p.DecisionID = d.ID
	return p
}

// endedProblem is the 410 for a terminal record: it says that the sandbox
// ended, when and why, from the record.
func endedProblem(r store.Sandbox) *Problem {
	reason, verb := r.EndReason, "ended"
	if r.State == store.StateFailed {
		verb = "failed"
	}
	if reason == "" {
		reason = string(r.State)
	}
	detail := "sandbox " + r.ID + " " + verb
	if !r.EndedAt.IsZero() {
		detail += " at " + r.EndedAt.UTC().Format(timeFormat)
	}
	detail += " (" + reason + ")"
	if r.LastError != "" {
		detail += ": " + clip.String(r.LastError, 512)
	}
	p := newProblem(http.StatusGone, wire.CodeSandboxEnded, detail+"; create a new one")
	p.EndReason = reason
	if !r.EndedAt.IsZero() {
		at := r.EndedAt.UTC()
		p.EndedAt = &at
	}
	return p
}

func (s *Server) expired(r store.Sandbox) bool {
	now := s.cfg.Now()
	return !r.State.Live() || !now.Before(r.ExpiresAt) || !now.Before(r.CeilingAt)
}
