package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"regexp"

	"github.com/labstack/echo/v4"

	"sandgate/gateway/wire"
)

// Request hygiene: what every request gets before routing, whoever sends it.

const (
	// DefaultMaxHeaderBytes bounds the request line's headers (names plus
	// values) that the API accepts; a bearer token is well under 2 KiB.
	DefaultMaxHeaderBytes = 16 << 10

	// headerClientRequestID is the response header that echoes a
	// well-formed client request id; X-Request-Id is always the server's.
	headerClientRequestID = "X-Client-Request-Id"

	ctxRequestID       = "sandgate.request_id"
	ctxClientRequestID = "sandgate.client_request_id"
)

// clientRequestIDPattern is what a caller's X-Request-Id must look like to
// be kept (as client_request_id, never as the request id): short, and made
// of characters that cannot break a log line or a header.
var clientRequestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// ServerHeaderLimit is the http.Server MaxHeaderBytes that goes with a
// gateway whose Config.MaxHeaderBytes is limit: net/http refuses past it
// with a bare 431 before sandgate sees the request; below it the gateway
// answers 431 problem+json itself. Twice the limit leaves room for the
// request line and header framing.
func ServerHeaderLimit(limit int) int { return 2 * limit }

// randomHex is n random bytes as hex: request and exec ids (12 bytes) and
// the decision id of an aggregated rate-limit line (16, the shape of the
// engine's decision ids).
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never returns an error
	return hex.EncodeToString(b)
}

// hygiene runs first on every request, routed or not. It gives the request
// a server-generated id (a caller's well-formed X-Request-Id is kept
// beside it as the client's, never in its place), refuses oversized
// headers with 431, and sets the headers every answer carries
// (Cache-Control: no-store among them, set again as the answer's header
// is written, so no handler can weaken it).
func (s *Server) hygiene(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := randomHex(12)
		c.Set(ctxRequestID, id)
		h := c.Response().Header()
		h.Set(echo.HeaderXRequestID, id)
		h.Set(echo.HeaderXContentTypeOptions, "nosniff")
		h.Set("Cache-Control", "no-store")
		// Whatever a handler set meanwhile (the MCP SDK's "no-cache,
		// no-transform", a stream's own), every answer leaves with
		// no-store: any of them may carry a token or a sandbox's output
		// (docs/api.md, Caching).
		c.Response().Before(func() { h.Set("Cache-Control", "no-store") })
		req := c.Request()
		if cid := req.Header.Get(echo.HeaderXRequestID); clientRequestIDPattern.MatchString(cid) {
			c.Set(ctxClientRequestID, cid)
			h.Set(headerClientRequestID, cid)
		}
		if n := headerBytes(req); n > s.cfg.MaxHeaderBytes {
			return newProblem(http.StatusRequestHeaderFieldsTooLarge, wire.CodeHeaderTooLarge,
				"the request headers are larger than the gateway accepts; nothing was changed")
		}
		return next(c)
	}
}

// headerBytes is the size of the request's header names and values, with
// the Host header and the request target (which Go keeps apart).
func headerBytes(r *http.Request) int {
	n := len(r.Host) + len(r.RequestURI)
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4 // ": " and CRLF
		}
	}
	return n
}

// requestIDOf is the server's id of the request.
func requestIDOf(c echo.Context) string {
	id, _ := c.Get(ctxRequestID).(string)
	return id
}

// clientRequestIDOf is the caller's well-formed X-Request-Id, or "".
func clientRequestIDOf(c echo.Context) string {
	id, _ := c.Get(ctxClientRequestID).(string)
	return id
}
