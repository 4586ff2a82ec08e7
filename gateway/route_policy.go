package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/open-policy-agent/opa/v1/ast"

	"sandgate/gateway/replay"
	"sandgate/gateway/wire"
	"sandgate/internal/clip"
	"sandgate/policies"
)

// getPolicy is GET /v1/policy: revision, digest, load time and every
// annotated rule of the bundle in force, read from one engine state.
func (s *Server) getPolicy(c echo.Context) error {
	info := s.cfg.Engine.Info()
	return c.JSON(http.StatusOK, wire.Policy{
		Revision: info.Revision, Digest: info.Digest, DigestAlgorithm: policies.DigestAlgorithm,
		LoadedAt: info.LoadedAt.Format(time.RFC3339Nano), Signed: info.Signer != "", Signer: info.Signer,
		Rules: rulesView(info.Rules),
	})
}

// rulesView is the bundle's rules as the API shows them (nil stays nil).
func rulesView(rules []policies.Rule) []wire.PolicyRule {
	if rules == nil {
		return nil
	}
	out := make([]wire.PolicyRule, len(rules))
	for i, r := range rules {
		out[i] = wire.PolicyRule{
			ID: r.ID, Title: r.Title, Description: r.Description, Severity: r.Severity,
			Entrypoint: string(r.Entrypoint), Location: r.Location, Mode: r.Mode,
		}
	}
	return out
}

// ownBodyLimit are the routes that bound their bodies themselves, by
// Config.Policy, instead of Config.BodyLimit.
var ownBodyLimit = map[string]bool{"/v1/policy/evaluate": true, "/v1/policy/replay": true}

// readBounded reads a body of at most limit bytes; a longer one (by its
// Content-Length, before anything is read, or as read) is a 413 naming key.
func readBounded(c echo.Context, what, key string, limit int64) ([]byte, error) {
	if c.Request().ContentLength > limit {
		return nil, tooLarge(what, key, limit)
	}
	raw, err := io.ReadAll(io.LimitReader(c.Request().Body, limit+1))
	if err != nil {
		return nil, invalid("body", "could not be read")
	}
	if int64(len(raw)) > limit {
		return nil, tooLarge(what, key, limit)
	}
	return raw, nil
}

// evaluatePolicy is POST /v1/policy/evaluate: a dry run. It decides with
// the bundle in force and changes nothing; the decision is returned, not
// logged (the evaluate request's own authz decision is). Config.Policy
// bounds it: the body's size (413), the dry runs at once (429
// policy_busy) and the evaluation's time (422
// evaluation_deadline_exceeded): a well-formed input that costs seconds
// of CPU cannot hold the gateway's cores.
func (s *Server) evaluatePolicy(c echo.Context) error {
	lim := s.cfg.Policy
	raw, err := readBounded(c, "the dry run's body", keyEvaluateMaxBytes, lim.EvaluateMaxBytes)
	if err != nil {
		return err
	}
	var req wire.EvaluateRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return invalid("body", "must be {entrypoint, input} or {request: {method, path, token_claims, body}}: %s", clip.String(err.Error(), 120))
	}
	if !s.evaluating.tryAcquire() {
		return policyBusy("dry runs are", keyEvaluateConc, lim.EvaluateConcurrency, retryAfterOf(lim.EvaluateTimeout))
	}
	defer s.evaluating.release()
	parent := c.Request().Context()
	ctx, cancel := context.WithTimeout(parent, lim.EvaluateTimeout)
	defer cancel()
	// pastDeadline is the answer once the deadline, not the caller, ended ctx.
	pastDeadline := func(ep policies.Entrypoint, id string) error {
		if parent.Err() != nil {
			return parent.Err()
		}
		p := newProblem(http.StatusUnprocessableEntity, wire.CodeEvaluationDeadlineExceeded, fmt.Sprintf(
			"the %s decision on this input ran past %s (%s) and was stopped, which is a deny; nothing was changed", ep, lim.EvaluateTimeout, keyEvaluateTimeout))
		p.Limit, p.DecisionID = keyEvaluateTimeout, id
		return p
	}
	var (
		ep  policies.Entrypoint
		in  ast.Value
		doc json.RawMessage
	)
	switch {
	case req.Request != nil && (req.Entrypoint != "" || req.Input != nil):
		return invalid("request", "give either request, or entrypoint and input, not both")
	case req.Request != nil:
		ai, err := s.dryRunInput(ctx, *req.Request)
		if err != nil {
			if ctx.Err() != nil {
				return pastDeadline(policies.Authz, "")
			}
			return err
		}
		ep, in = policies.Authz, ai.Value()
		if doc, err = json.Marshal(ai); err != nil {
			return err
		}
	default:
		if ep, err = policies.ParseEntrypoint(req.Entrypoint); err != nil {
			return invalid("entrypoint", "must be one of authz, admission, lifecycle, hosts, reclaim, isolation")
		}
		if len(req.Input) == 0 {
			return invalid("input", "is required with entrypoint")
		}
		if in, err = policies.ParseInputBytes(req.Input); err != nil {
			return invalid("input", "must be one JSON object: %s", clip.String(err.Error(), 120))
		}
		doc = req.Input
	}
	d, err := s.cfg.Engine.Decide(ctx, ep, in)
	// OPA may finish a short evaluation on a context that just ended, or
	// fail one with its own cancellation error: ctx says which.
	if ctx.Err() != nil {
		return pastDeadline(ep, d.ID)
	}
	if err != nil {
		p := newProblem(http.StatusUnprocessableEntity, wire.CodeInvalidRequest, "the policy could not decide on this input, which is a deny: "+clip.String(err.Error(), 200))
		p.DecisionID = d.ID
		return p
	}
	vs := d.Violations
	if vs == nil {
		vs = []policies.Violation{}
	}
	return c.JSON(http.StatusOK, wire.Evaluation{
		Entrypoint: string(ep), Allow: d.Allow, Violations: violationsOf(vs), RuleIDs: d.RuleIDs(), DecisionID: d.ID,
		Revision: d.Revision, DurationUS: d.Duration.Microseconds(), Input: doc, DryRun: true,
	})
}

// dryRunInput builds the authz input a request would get, through the
// live router and authzInput: the route template and parameters Echo
// finds for the path, the route's own body decoding, the logs query and
// the target's record from the store.
func (s *Server) dryRunInput(ctx context.Context, r wire.DryRequest) (policies.AuthzInput, error) {
	if r.Method == "" || !strings.HasPrefix(r.Path, "/") {
		return policies.AuthzInput{}, invalid("request", "needs a method and an absolute path")
	}
	if r.TokenClaims == nil || r.TokenClaims.Role == "" {
		return policies.AuthzInput{}, invalid("request.token_claims", "needs at least a role")
	}
	target, err := url.ParseRequestURI(r.Path)
	if err != nil {
		return policies.AuthzInput{}, invalid("request.path", "is not a request target")
	}
	var body io.Reader = http.NoBody
	if len(r.Body) > 0 && string(r.Body) != "null" {
		body = bytes.NewReader(r.Body)
	}
	hr, err := http.NewRequestWithContext(ctx, r.Method, target.RequestURI(), body)
	if err != nil {
		return policies.AuthzInput{}, invalid("request.method", "is not an HTTP method")
	}
	c := s.e.NewContext(hr, discardResponse{})
	s.e.Router().Find(r.Method, target.Path, c)
	rt, ok := s.routeOf(r.Method, c.Path())
	if !ok {
		return policies.AuthzInput{}, newProblem(http.StatusUnprocessableEntity, wire.CodeInvalidRequest,
			"request: "+r.Method+" "+clip.String(target.Path, 80)+" matches no route of this gateway (it would answer 404 before any decision)")
	}
	if rt.body == nil && body != http.NoBody {
		return policies.AuthzInput{}, invalid("request.body", "the route takes no body")
	}
	tc := r.TokenClaims
	tok := &policies.TokenFacts{Role: tc.Role, Sub: tc.Sub, SandboxID: tc.SandboxID, Exp: tc.Exp, JTI: tc.JTI, Active: true}
	if tc.Scopes != nil {
		tok.Scopes = *tc.Scopes
	} else if tc.Role == "session" {
		tok.Scopes = s.cfg.Engine.Settings().SessionScopes()
	} else {
		tok.Scopes = s.cfg.Engine.Settings().RoleScopes(tc.Role)
	}
	if tok.Exp == 0 {
		tok.Exp = s.cfg.Now().Add(time.Hour).Unix()
	}
	if tc.Active != nil {
		tok.Active = *tc.Active
	}
	in, _, _, err := s.authzInput(c, tok, rt.body)
	return in, err
}

// routeOf returns the registered route of method and template.
func (s *Server) routeOf(method, path string) (route, bool) {
	for _, r := range s.routes() {
		if r.method == method && r.path == path && !r.public {
			return r, true
		}
	}
	return route{}, false
}

// discardResponse is the response of a request that is never served.
type discardResponse struct{}

// Header is a fresh, discarded header map.
func (discardResponse) Header() http.Header { return http.Header{} }

// Write discards b.
func (discardResponse) Write(b []byte) (int, error) { return len(b), nil }

// WriteHeader discards the status.
func (discardResponse) WriteHeader(int) {}

// Bounds of POST /v1/policy/replay's query.
const (
	defaultReplayLimit = 5000
	maxReplayLimit     = 50000
)

// retryAfterOf is the Retry-After of a busy policy route: the time one
// running request may take, in whole seconds, at most 10.
func retryAfterOf(d time.Duration) int {
	return int(min(max((d+time.Second-1)/time.Second, 1), 10))
}

// replayCandidate is POST /v1/policy/replay: the body is a candidate
// bundle tarball (`sandgate policy build`, `opa build`; unsigned is fine,
// nothing serves it), replayed against this gateway's decision log
// (?since=&until=&limit=). The candidate never loads in the gateway's
// process: a replay worker (the sandgate binary, re-executed) compiles it
// with the engine's restricted built-ins and replays the log, bounded in
// memory, CPU time and wall-clock time (Config.Policy); a candidate that
// runs past a bound ends its worker and is answered 422
// candidate_exceeded_limits naming the bound.
func (s *Server) replayCandidate(c echo.Context) error {
	lim := s.cfg.Policy
	var opts replay.Options
	for _, tf := range []struct {
		name string
		into *time.Time
	}{{"since", &opts.Since}, {"until", &opts.Until}} {
		if v := c.QueryParam(tf.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return invalid(tf.name, "must be an RFC 3339 time, e.g. 2026-12-01T09:00:00Z")
			}
			*tf.into = t
		}
	}
	opts.Limit = defaultReplayLimit
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxReplayLimit {
			return invalid("limit", "must be an integer from 1 to %d", maxReplayLimit)
		}
		opts.Limit = n
	}
	raw, err := readBounded(c, "the candidate bundle", keyReplayMaxBytes, lim.ReplayMaxBytes)
	if err != nil {
		return err
	}
	if len(raw) == 0 {
		return invalid("body", "must be a candidate bundle tarball (sandgate policy build -o bundle.tar.gz)")
	}
	if !s.replaying.tryAcquire() {
		return policyBusy("replays are", keyReplayConc, lim.ReplayConcurrency, 10)
	}
	defer s.replaying.release()
	if lim.ReplayWorker.Path == "" {
		return unavailable("candidate replay is off: this gateway has no replay worker configured, and a candidate never runs in the gateway's own process", nil)
	}
	limits := replay.Limits{Memory: lim.ReplayMemoryBytes, CPU: lim.ReplayCPU, Wall: lim.ReplayTimeout}
	rep, err := replay.Run(c.Request().Context(), lim.ReplayWorker, limits, raw, opts, s.cfg.Decisions.Each)
	var (
		ce *replay.CandidateError
		le *replay.LimitError
	)
	switch {
	case err == nil:
		return c.JSON(http.StatusOK, rep)
	case errors.As(err, &ce):
		return newProblem(http.StatusUnprocessableEntity, wire.CodeInvalidRequest, "the candidate bundle does not load: "+clip.String(ce.Reason, 400))
	case errors.As(err, &le):
		key := map[string]string{replay.LimitMemory: keyReplayMemory, replay.LimitCPU: keyReplayCPU, replay.LimitWall: keyReplayTimeout}[le.Limit]
		p := newProblem(http.StatusUnprocessableEntity, wire.CodeCandidateExceededLimits, fmt.Sprintf(
			"the candidate's replay worker ran past its %s limit (%s, %s) and was ended; the gateway and its state are unchanged. "+
				"A rule that grows without bound (a string doubled by concat, a comprehension over itself) does this; so can a log too long for the limit: narrow it with since, until or limit",
			le.Limit, le.Bound, key))
		p.Limit = key
		return p
	case errors.Is(err, replay.ErrUnsupported), errors.Is(err, replay.ErrWorker):
		return unavailable("the candidate could not be replayed, and nothing was changed: "+clip.String(err.Error(), 300), err)
	case c.Request().Context().Err() != nil:
		return err
	default:
		return unavailable("the decision log could not be read", err)
	}
}
