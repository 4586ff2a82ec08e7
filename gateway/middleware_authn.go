package gateway

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"sandgate/gateway/token"
	"sandgate/gateway/wire"
	"sandgate/policies"
	"sandgate/store"
)

// touchInterval is how stale a token's last use may get before the gateway
// records a new one (token listings show it to the minute).
const touchInterval = time.Minute

// caller is the authenticated principal of a request.
type caller struct {
	claims token.Claims
	// active is the store's verdict: the token is known and not revoked,
	// and a session token's digest matches its live sandbox record.
	active bool
}

// principal names the caller in records, the list filter and logs:
// "<role>:<sub>", role and subject together (rule B3). The policy derives
// the same from the token's claims (authz _token_principal).
func (c *caller) principal() string {
	return policies.PrincipalFacts{Role: string(c.claims.Role), Sub: c.claims.Subject}.ID()
}

func (c *caller) facts() *policies.TokenFacts {
	var exp int64
	if c.claims.ExpiresAt != nil {
		exp = c.claims.ExpiresAt.Unix()
	}
	return &policies.TokenFacts{
		Role:      string(c.claims.Role),
		Sub:       c.claims.Subject,
		Scopes:    c.claims.Scopes,
		SandboxID: c.claims.SandboxID,
		Exp:       exp,
		JTI:       c.claims.ID,
		Active:    c.active,
	}
}

const ctxCaller = "sandgate.caller"

func callerOf(c echo.Context) *caller {
	v, _ := c.Get(ctxCaller).(*caller)
	return v
}

// authenticate verifies the bearer token and looks up whether it is still
// active. A missing, malformed, forged or expired token is a 401; a store
// failure is a 503. Nothing downstream runs on an error.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		claims, raw, err := s.bearerClaims(c.Request())
		if err != nil {
			return err
		}
		active, err := s.tokenActive(c, claims, raw)
		if err != nil {
			return unavailable("the token store could not be read; nothing was changed", err)
		}
		c.Set(ctxCaller, &caller{claims: claims, active: active})
		return next(c)
	}
}

// bearerClaims reads the request's bearer token with token.ParseBearer,
// the one parser of REST and /mcp, and verifies it. Any failure is a 401
// problem with its WWW-Authenticate challenge: a missing header, any other
// spelling than "Bearer", one space and the token (a tab, a no-break
// space, two spaces, a trailing space, an empty token), and a token that
// is forged, malformed or expired.
func (s *Server) bearerClaims(r *http.Request) (token.Claims, string, error) {
	raw, err := token.ParseBearer(r.Header.Get(echo.HeaderAuthorization))
	switch {
	case errors.Is(err, token.ErrNoAuthorization):
		return token.Claims{}, "", unauthenticated("missing Authorization: Bearer <token> header")
	case err != nil:
		p := unauthenticated(`the Authorization header must be "Bearer <token>": the word Bearer, one space, the token, nothing else`)
		p.wwwAuth = `Bearer realm="sandgate", error="invalid_request"`
		return token.Claims{}, "", p
	}
	claims, err := s.cfg.Tokens.Verify(raw)
	if err != nil {
		if errors.Is(err, token.ErrExpired) {
			p := newProblem(http.StatusUnauthorized, wire.CodeTokenExpired, "the token has expired; ask for a new one")
			p.wwwAuth = `Bearer realm="sandgate", error="invalid_token"`
			return token.Claims{}, "", p
		}
		detail := "the token is not valid"
		var ve *token.VerifyError
		if errors.As(err, &ve) {
			detail = "the token is not valid: " + ve.Reason
		}
		p := unauthenticated(detail)
		p.wwwAuth = `Bearer realm="sandgate", error="invalid_token"`
		return token.Claims{}, "", p
	}
	return claims, raw, nil
}

// tokenActive decides, from the store, whether a verified token may still
// be used (T4): an operator or agent token must be recorded and not revoked;
// a session token's digest must match the live record of its sandbox (a
// destroyed sandbox has no digest left).
func (s *Server) tokenActive(c echo.Context, claims token.Claims, raw string) (bool, error) {
	active, rec, t, err := s.activeToken(c.Request().Context(), claims, raw)
	if rec != nil {
		setRecord(c, rec) // authorize reuses it when the route targets this sandbox
	}
	if !active || err != nil || t == nil {
		return active, err
	}
	setCallerToken(c, t) // create reads the agent's quota from it (B3)
	return true, nil
}

// activeToken is tokenActive's verdict, with the record it read: the
// session token's sandbox, or the operator or agent token's own record
// (when active).
func (s *Server) activeToken(ctx context.Context, claims token.Claims, raw string) (bool, *store.Sandbox, *store.Token, error) {
	if claims.Role == token.RoleSession {
		rec, err := s.cfg.Store.Get(ctx, claims.SandboxID)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil, nil, nil
		}
		if err != nil {
			return false, nil, nil, err
		}
		return rec.TokenDigest != "" && rec.TokenJTI == claims.ID &&
			token.DigestEqual(rec.TokenDigest, token.Digest(raw)), &rec, nil, nil
	}
	t, err := s.cfg.Store.GetToken(ctx, claims.ID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil, nil, nil
	}
	if err != nil {
		return false, nil, nil, err
	}
	if !t.RevokedAt.IsZero() || t.Role != string(claims.Role) || t.Subject != claims.Subject {
		return false, nil, nil, nil
	}
	// The record just read says when the token was last used: touch it only
	// when that is stale, so a busy token costs no second store access.
	if now := s.cfg.Now(); now.Sub(t.LastUsed) >= touchInterval {
		if err := s.cfg.Store.TouchToken(ctx, claims.ID, now); err != nil {
			s.log.Warn("record token use", "jti", claims.ID, "err", err)
		}
	}
	return true, nil, &t, nil
}
