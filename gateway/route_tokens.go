package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"sandgate/gateway/token"
	"sandgate/gateway/wire"
	"sandgate/policies"
	"sandgate/store"
)

// Operator and agent tokens: minted, listed and revoked by operators
// (rule T4). The policy judges the mint request (T4: role, lifetime, label
// and subject; B3: the agent quota) before the handler runs, and the
// offline mint (DecideOfflineMint) takes the same decision on the same
// input.

// routeTokens is the route of the tokens API.
const routeTokens = "/v1/tokens"

// subjectFloor is what the gateway itself demands of a subject, whatever
// the policy's tokens.subject_pattern says (T4 judges the pattern; this
// only adds a refusal): a subject names a principal as "<role>:<sub>" in
// records, filters and logs, so no colon, no white space, no control
// character, and a bounded length.
var subjectFloor = regexp.MustCompile(`^[^:\s\x00-\x1f\x7f]{1,128}$`)

// mintRequest is POST /v1/tokens.
type mintRequest wire.MintRequest

func (r *mintRequest) required() bool { return true }

func (r *mintRequest) policyBody() policies.RequestBody {
	// policies may import only OPA and the standard library: its MintQuota
	// is the same struct as wire.MintQuota, converted.
	return policies.RequestBody{Role: r.Role, TTLSeconds: r.TTLSeconds, Label: r.Label, Subject: r.Subject,
		Quota: (*policies.MintQuota)(r.Quota)}
}

func (r *mintRequest) check(*Server) error {
	if r.Subject != nil && !subjectFloor.MatchString(*r.Subject) {
		return invalid("subject", "must be 1 to 128 characters without a colon, white space or control characters (T4: tokens.subject_pattern)")
	}
	return nil
}

// mintInput builds the authz input of POST /v1/tokens for req minted by
// caller, through the route's own body decoding (decodeBody,
// mintRequest.policyBody): the input the REST route builds for the same
// request.
func mintInput(now time.Time, caller *policies.TokenFacts, req TokenRequest) (policies.AuthzInput, *mintRequest, error) {
	doc := map[string]any{"role": string(req.Role), "ttl_seconds": int64(math.Ceil(req.TTL.Seconds()))}
	if req.Subject != "" {
		doc["subject"] = req.Subject
	}
	if req.Label != "" {
		doc["label"] = req.Label
	}
	if req.MaxLiveSandboxes != 0 {
		doc["quota"] = map[string]any{"max_live_sandboxes": req.MaxLiveSandboxes}
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return policies.AuthzInput{}, nil, err
	}
	body := &mintRequest{}
	if err := decodeBody(bytes.NewReader(raw), body); err != nil {
		return policies.AuthzInput{}, nil, err
	}
	return policies.AuthzInput{
		Now:     now.Unix(),
		Request: policies.Request{Method: http.MethodPost, Route: routeTokens, Body: body.policyBody()},
		Token:   caller,
	}, body, nil
}

// OfflineCaller is the principal of an offline mint (sandgate token mint
// --offline): whoever holds the data dir's signing key, presented to the
// policy as an active operator token with the operator role's scopes, so
// T2 judges the route as for an operator and T4 and B3 judge the body.
const OfflineCaller = "offline"

// DecideOfflineMint takes the decision POST /v1/tokens would take on req
// (data.sandgate.authz.decision on the same input shape, built by the same
// code), for a mint made with the signing key while the gateway is
// stopped. A deny is a Decision with Allow false; an error means the
// policy could not decide or the request is malformed, and is a refusal
// too (fail closed). Only an allowed decision may be followed by MintToken.
func DecideOfflineMint(ctx context.Context, eng *policies.Engine, now time.Time, req TokenRequest) (policies.Decision, error) {
	caller := &policies.TokenFacts{
		Role: string(token.RoleOperator), Sub: OfflineCaller, Scopes: eng.Settings().RoleScopes(string(token.RoleOperator)),
		Exp: now.Add(time.Minute).Unix(), JTI: OfflineCaller, Active: true,
	}
	in, body, err := mintInput(now, caller, req)
	if err != nil {
		return policies.Decision{}, err
	}
	d, err := eng.Decide(ctx, policies.Authz, in.Value())
	if err != nil {
		return d, fmt.Errorf("the policy could not decide; nothing was minted (fail closed): %w", err)
	}
	if d.Allow {
		if err := body.check(nil); err != nil {
			return d, err
		}
	}
	return d, nil
}

// tokenViewOf is a token's metadata as the API shows it; Token (the
// secret) is set only in the mint answer.
func tokenViewOf(t store.Token) wire.Token {
	v := wire.Token{
		ID: t.JTI, Role: t.Role, Subject: t.Subject, Label: t.Label,
		CreatedAt: formatTime(t.CreatedAt), ExpiresAt: formatTime(t.ExpiresAt),
		LastUsed: formatTime(t.LastUsed), RevokedAt: formatTime(t.RevokedAt),
	}
	if t.MaxLiveSandboxes > 0 {
		v.Quota = &wire.Quota{MaxLiveSandboxes: t.MaxLiveSandboxes}
	}
	return v
}

// formatTime is RFC 3339 UTC, or "" for the zero time.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeFormat)
}

// TokenRequest is one operator, agent or reviewer token to mint.
type TokenRequest struct {
	Role    token.Role
	Subject string // empty: "<role>-<8 random characters>"
	Label   string
	TTL     time.Duration
	// MaxLiveSandboxes is an agent's quota (B3); 0: the policy default.
	MaxLiveSandboxes int64
}

// MintToken mints an operator, agent or reviewer token with the role's scopes from
// the bundle and records its metadata (a token the store does not know is
// refused, T4). It returns the token, shown once, and its record.
func MintToken(ctx context.Context, iss *token.Issuer, st store.Store, s policies.Settings, req TokenRequest) (string, store.Token, error) {
	if req.Role != token.RoleOperator && req.Role != token.RoleAgent && req.Role != token.RoleReviewer {
		return "", store.Token{}, fmt.Errorf("mint: role %q is not operator, agent or reviewer", req.Role)
	}
	if req.Subject == "" {
		req.Subject = string(req.Role) + "-" + strings.ToLower(rand.Text()[:8])
	}
	if !subjectFloor.MatchString(req.Subject) {
		return "", store.Token{}, fmt.Errorf("mint: subject %q has a colon, white space or control characters, or is longer than 128", req.Subject)
	}
	raw, claims, err := iss.Mint(token.MintRequest{
		Role: req.Role, Subject: req.Subject, Scopes: s.RoleScopes(string(req.Role)), TTL: req.TTL, Label: req.Label,
	})
	if err != nil {
		return "", store.Token{}, err
	}
	rec := store.Token{
		JTI: claims.ID, Role: string(req.Role), Subject: req.Subject, Label: req.Label,
		CreatedAt: claims.IssuedAt.UTC(), ExpiresAt: claims.ExpiresAt.UTC(),
		MaxLiveSandboxes: req.MaxLiveSandboxes,
	}
	if err := st.PutToken(ctx, rec); err != nil {
		return "", rec, fmt.Errorf("record token %s: %w", claims.ID, err)
	}
	return raw, rec, nil
}

// mintToken is POST /v1/tokens.
func (s *Server) mintToken(c echo.Context) error {
	body := bodyOf[*mintRequest](c)
	if body == nil || body.Role == nil || body.TTLSeconds == nil { // the policy refuses these (T4)
		return invalid("body", "role and ttl_seconds are required")
	}
	req := TokenRequest{
		Role: token.Role(*body.Role), Subject: deref(body.Subject, ""), Label: deref(body.Label, ""),
		TTL: time.Duration(*body.TTLSeconds) * time.Second,
	}
	if body.Quota != nil && body.Quota.MaxLiveSandboxes != nil {
		req.MaxLiveSandboxes = *body.Quota.MaxLiveSandboxes
	}
	raw, rec, err := MintToken(c.Request().Context(), s.cfg.Tokens, s.cfg.Store, s.cfg.Engine.Settings(), req)
	if err != nil {
		return unavailable("the token could not be minted and recorded; none was issued", err)
	}
	s.log.Info("token minted", "jti", rec.JTI, "role", rec.Role, "sub", rec.Subject, "by", callerOf(c).principal())
	v := tokenViewOf(rec)
	v.Token = raw
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, v)
}

// listTokens is GET /v1/tokens: metadata only, never a secret (the store
// has none).
func (s *Server) listTokens(c echo.Context) error {
	ts, err := s.cfg.Store.ListTokens(c.Request().Context())
	if err != nil {
		return unavailable("the token store could not be read", err)
	}
	out := make([]wire.Token, 0, len(ts))
	for _, t := range ts {
		out = append(out, tokenViewOf(t))
	}
	return c.JSON(http.StatusOK, wire.TokenList{Tokens: out})
}

// revokeToken is DELETE /v1/tokens/{id}: from the next request on, the
// token is refused (authn reads the record on every request).
func (s *Server) revokeToken(c echo.Context) error {
	jti := c.Param("jti")
	err := s.cfg.Store.RevokeToken(c.Request().Context(), jti, s.cfg.Now())
	if errors.Is(err, store.ErrNotFound) {
		return newProblem(http.StatusNotFound, wire.CodeTokenNotFound, fmt.Sprintf("no operator, agent or reviewer token has id %q", jti))
	}
	if err != nil {
		return unavailable("the token could not be revoked; retry", err)
	}
	s.log.Info("token revoked", "jti", jti, "by", callerOf(c).principal())
	return c.NoContent(http.StatusNoContent)
}
