package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/open-policy-agent/opa/v1/ast"

	"sandgate/gateway/audit"
	"sandgate/gateway/replay"
	"sandgate/policies"
)

// policyView is GET /v1/policy: the serving bundle as a reviewer reads it.
type policyView struct {
	Revision string `json:"revision"`
	// Digest identifies the bundle's files (policies.BundleDigest), so a
	// reviewer can tell the bundle in force from the one reviewed.
	Digest          string    `json:"digest"`
	DigestAlgorithm string    `json:"digest_algorithm"`
	LoadedAt        time.Time `json:"loaded_at"`
	// Signed says whether the bundle's signature was verified (a bundle
	// file served with policy.verification_key); Signer is the key id
	// that signed it.
	Signed bool   `json:"signed"`
	Signer string `json:"signer,omitempty"`
	// Rules are every annotated rule that can deny, sorted by entrypoint
	// and id, with its enforcement mode.
	Rules []policies.Rule `json:"rules"`
}

// getPolicy is GET /v1/policy: revision, digest, load time and every
// annotated rule of the bundle in force, read from one engine state.
func (s *Server) getPolicy(c echo.Context) error {
	info := s.cfg.Engine.Info()
	return c.JSON(http.StatusOK, policyView{
		Revision: info.Revision, Digest: info.Digest, DigestAlgorithm: policies.DigestAlgorithm,
		LoadedAt: info.LoadedAt, Signed: info.Signer != "", Signer: info.Signer, Rules: info.Rules,
	})
}

// evaluateRequest is POST /v1/policy/evaluate: either an entrypoint and
// its input document, or a request as a caller would send it, whose input
// the gateway builds with the live code.
type evaluateRequest struct {
	Entrypoint string          `json:"entrypoint"`
	Input      json.RawMessage `json:"input"`
	Request    *dryRequest     `json:"request"`
}

// dryRequest is "what would happen if this caller sent this".
type dryRequest struct {
	Method string `json:"method"`
	// Path is the request target, e.g. /v1/sandboxes/k7x2.../exec?stream=stdout.
	Path        string          `json:"path"`
	TokenClaims *dryClaims      `json:"token_claims"`
	Body        json.RawMessage `json:"body"`
}

// dryClaims are the verified claims of the token the request would carry.
// Scopes default to what the gateway mints for the role, exp to an hour
// from now, active to true.
type dryClaims struct {
	Role      string    `json:"role"`
	Sub       string    `json:"sub"`
	Scopes    *[]string `json:"scopes"`
	SandboxID string    `json:"sandbox_id"`
	Exp       int64     `json:"exp"`
	JTI       string    `json:"jti"`
	Active    *bool     `json:"active"`
}

// evaluateAnswer is the full decision, with the input it was made on.
type evaluateAnswer struct {
	Entrypoint string               `json:"entrypoint"`
	Allow      bool                 `json:"allow"`
	Violations []policies.Violation `json:"violations"`
	RuleIDs    []string             `json:"rule_ids"`
	DecisionID string               `json:"decision_id"`
	Revision   string               `json:"bundle_revision"`
	DurationUS int64                `json:"duration_us"`
	// Input is the document decided: the one given, or the one built.
	Input json.RawMessage `json:"input"`
	// DryRun is always true: nothing was changed or logged as a decision.
	DryRun bool `json:"dry_run"`
}

// maxEvaluateBytes bounds the evaluate body (an admission input holds a
// whole job).
const maxEvaluateBytes = 256 << 10

// evaluatePolicy is POST /v1/policy/evaluate: a dry run. It decides with
// the bundle in force and changes nothing; the decision is returned, not
// logged (the evaluate request's own authz decision is).
func (s *Server) evaluatePolicy(c echo.Context) error {
	raw, err := io.ReadAll(io.LimitReader(c.Request().Body, maxEvaluateBytes+1))
	if err != nil {
		return invalid("body", "could not be read")
	}
	if len(raw) > maxEvaluateBytes {
		return invalid("body", "is larger than %d bytes", maxEvaluateBytes)
	}
	var req evaluateRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return invalid("body", "must be {entrypoint, input} or {request: {method, path, token_claims, body}}: %s", truncate(err.Error(), 120))
	}
	ctx := c.Request().Context()
	var (
		ep  policies.Entrypoint
		in  ast.Value
		doc json.RawMessage
	)
	switch {
	case req.Request != nil && (req.Entrypoint != "" || req.Input != nil):
		return invalid("request", "give either request, or entrypoint and input, not both")
	case req.Request != nil:
		ai, err := s.dryRunInput(c, *req.Request)
		if err != nil {
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
			return invalid("input", "must be one JSON object: %s", truncate(err.Error(), 120))
		}
		doc = req.Input
	}
	d, err := s.cfg.Engine.Decide(ctx, ep, in)
	if err != nil {
		p := newProblem(http.StatusUnprocessableEntity, codeInvalidRequest, "the policy could not decide on this input, which is a deny: "+truncate(err.Error(), 200))
		p.DecisionID = d.ID
		return p
	}
	vs := d.Violations
	if vs == nil {
		vs = []policies.Violation{}
	}
	return c.JSON(http.StatusOK, evaluateAnswer{
		Entrypoint: string(ep), Allow: d.Allow, Violations: vs, RuleIDs: d.RuleIDs(), DecisionID: d.ID,
		Revision: d.Revision, DurationUS: d.Duration.Microseconds(), Input: doc, DryRun: true,
	})
}

// dryRunInput builds the authz input a request would get, through the
// live router and authzInput: the route template and parameters Echo
// finds for the path, the route's own body decoding, the logs query and
// the target's record from the store.
func (s *Server) dryRunInput(live echo.Context, r dryRequest) (policies.AuthzInput, error) {
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
	hr, err := http.NewRequestWithContext(live.Request().Context(), r.Method, target.RequestURI(), body)
	if err != nil {
		return policies.AuthzInput{}, invalid("request.method", "is not an HTTP method")
	}
	c := s.e.NewContext(hr, discardResponse{})
	s.e.Router().Find(r.Method, target.Path, c)
	rt, ok := s.routeOf(r.Method, c.Path())
	if !ok {
		return policies.AuthzInput{}, newProblem(http.StatusUnprocessableEntity, codeInvalidRequest,
			"request: "+r.Method+" "+truncate(target.Path, 80)+" matches no route of this gateway (it would answer 404 before any decision)")
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

// Bounds of POST /v1/policy/replay: a candidate is compiled in the
// gateway's process, so it is small, replays a bounded number of
// decisions within a deadline, and one replay runs at a time.
const (
	defaultReplayLimit = 5000
	maxReplayLimit     = 50000
	replayDeadline     = 60 * time.Second
)

// replayCandidate is POST /v1/policy/replay: the body is a candidate
// bundle tarball (`sandgate policy build`, `opa build`; unsigned is fine,
// nothing serves it), replayed against this gateway's decision log
// (?since=&until=&limit=). The candidate is compiled with the engine's
// restricted built-ins (no network, no environment) and never serves.
func (s *Server) replayCandidate(c echo.Context) error {
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
	raw, err := io.ReadAll(c.Request().Body)
	if err != nil || len(raw) == 0 {
		return invalid("body", "must be a candidate bundle tarball (sandgate policy build -o bundle.tar.gz)")
	}
	select {
	case s.replaying <- struct{}{}:
		defer func() { <-s.replaying }()
	default:
		p := newProblem(http.StatusTooManyRequests, codeBusy, "another replay is running; try again when it ends")
		p.retryAfter = 10
		return p
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), replayDeadline)
	defer cancel()
	candidate, err := policies.New(ctx, policies.Config{BundleData: raw})
	if err != nil {
		return newProblem(http.StatusUnprocessableEntity, codeInvalidRequest, "the candidate bundle does not load: "+truncate(err.Error(), 400))
	}
	r := replay.New(candidate, opts)
	err = s.cfg.Decisions.Each(func(e audit.Entry) error { return r.Add(ctx, e) })
	switch {
	case errors.Is(err, replay.ErrLimit):
	case errors.Is(err, context.DeadlineExceeded):
		p := newProblem(http.StatusServiceUnavailable, codeUnavailable, "the replay took longer than "+replayDeadline.String()+"; narrow it with since, until or limit")
		p.retryAfter = 5
		return p
	case err != nil:
		return unavailable("the decision log could not be read", err)
	}
	return c.JSON(http.StatusOK, r.Report())
}
