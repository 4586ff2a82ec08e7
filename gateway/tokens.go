package gateway

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"sandgate/gateway/token"
	"sandgate/policies"
	"sandgate/store"
)

// Operator and agent tokens: minted, listed and revoked by operators
// (SPEC T4). The policy judges the mint request (T4: role and lifetime; B3:
// the agent quota) before the handler runs.

// subjectPattern bounds a token's subject: it names a principal in records
// and logs ("<role>:<sub>"), so no colon and no spaces.
var subjectPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$`)

// mintRequest is POST /v1/tokens.
type mintRequest struct {
	Role       *string             `json:"role"`
	TTLSeconds *int64              `json:"ttl_seconds"`
	Label      *string             `json:"label"`
	Subject    *string             `json:"subject"`
	Quota      *policies.MintQuota `json:"quota"`
}

func (r *mintRequest) required() bool { return true }

func (r *mintRequest) policyBody() policies.RequestBody {
	return policies.RequestBody{Role: r.Role, TTLSeconds: r.TTLSeconds, Label: r.Label, Quota: r.Quota}
}

func (r *mintRequest) check(*Server) error {
	if r.Subject != nil && !subjectPattern.MatchString(*r.Subject) {
		return invalid("subject", "must match %s", subjectPattern)
	}
	return nil
}

// tokenView is a token's metadata as the API shows it; Token (the secret)
// only in the mint answer.
type tokenView struct {
	ID        string     `json:"id"`
	Role      string     `json:"role"`
	Subject   string     `json:"subject"`
	Label     string     `json:"label"`
	CreatedAt string     `json:"created_at"`
	ExpiresAt string     `json:"expires_at"`
	LastUsed  string     `json:"last_used"`
	RevokedAt string     `json:"revoked_at"`
	Quota     *quotaView `json:"quota,omitempty"`
	Token     string     `json:"token,omitempty"`
}

type quotaView struct {
	MaxLiveSandboxes int64 `json:"max_live_sandboxes"`
}

func tokenViewOf(t store.Token) tokenView {
	v := tokenView{
		ID: t.JTI, Role: t.Role, Subject: t.Subject, Label: t.Label,
		CreatedAt: formatTime(t.CreatedAt), ExpiresAt: formatTime(t.ExpiresAt),
		LastUsed: formatTime(t.LastUsed), RevokedAt: formatTime(t.RevokedAt),
	}
	if t.MaxLiveSandboxes > 0 {
		v.Quota = &quotaView{MaxLiveSandboxes: t.MaxLiveSandboxes}
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
	body, _ := c.Get(ctxBody).(*mintRequest)
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
	out := make([]tokenView, 0, len(ts))
	for _, t := range ts {
		out = append(out, tokenViewOf(t))
	}
	return c.JSON(http.StatusOK, map[string]any{"tokens": out})
}

// revokeToken is DELETE /v1/tokens/{id}: from the next request on, the
// token is refused (authn reads the record on every request).
func (s *Server) revokeToken(c echo.Context) error {
	jti := c.Param("jti")
	err := s.cfg.Store.RevokeToken(c.Request().Context(), jti, s.cfg.Now())
	if errors.Is(err, store.ErrNotFound) {
		return newProblem(http.StatusNotFound, codeTokenNotFound, fmt.Sprintf("no operator, agent or reviewer token has id %q", jti))
	}
	if err != nil {
		return unavailable("the token could not be revoked; retry", err)
	}
	s.log.Info("token revoked", "jti", jti, "by", callerOf(c).principal())
	return c.NoContent(http.StatusNoContent)
}
