package gateway

import (
	"context"
	"time"

	"github.com/labstack/echo/v4"

	"sandgate/gateway/mcpserver"
)

// serveMCP is /mcp (package mcpserver). The bearer token is read by the
// one parser of every route (token.ParseBearer) and checked as every route
// checks it, before the transport: a header of any other spelling, a
// forged or expired token, and a token that is revoked or whose sandbox
// has ended open no session, with the same 401 problem document and
// WWW-Authenticate challenge as REST (a 503 when the store cannot be
// read). The SDK's own bearer check, which splits on any white space,
// then only ever sees the canonical spelling.
func (s *Server) serveMCP(c echo.Context) error {
	claims, raw, err := s.bearerClaims(c.Request())
	if err != nil {
		return err
	}
	active, _, _, err := s.activeToken(c.Request().Context(), claims, raw)
	switch {
	case err != nil:
		return unavailable("the token store could not be read; nothing was changed", err)
	case !active:
		p := unauthenticated("the token is revoked, or its sandbox has ended")
		p.wwwAuth = `Bearer realm="sandgate", error="invalid_token"`
		return p
	}
	s.mcp.ServeHTTP(c.Response(), c.Request())
	return nil
}

// verifyBearer checks a bearer token's signature and expiry for /mcp,
// names its principal and says which routes the route table of the bundle
// in force lets it call (tools/list offers only those tools). serveMCP
// has already refused a token the store no longer holds as active; the
// REST route each tool call makes decides again, and what the token may do.
func (s *Server) verifyBearer(_ context.Context, raw string) (mcpserver.Caller, error) {
	claims, err := s.cfg.Tokens.Verify(raw)
	if err != nil {
		return mcpserver.Caller{}, err
	}
	var exp time.Time
	if claims.ExpiresAt != nil {
		exp = claims.ExpiresAt.Time
	}
	st := s.cfg.Engine.Settings()
	role, scopes := string(claims.Role), claims.Scopes
	return mcpserver.Caller{
		Principal: (&caller{claims: claims}).principal(),
		Expires:   exp,
		MayCall:   func(method, route string) bool { return st.RouteOpen(method, route, role, scopes) },
	}, nil
}
