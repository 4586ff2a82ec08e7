package gateway

import (
	"github.com/labstack/echo/v4"

	"sandgate/store"
)

// The values a request carries from the middleware to its handler. Each
// has one key, one setter and one getter here, so its key and its type are
// written once.
const (
	ctxBody   = "sandgate.body"   // the route's decoded, checked body (authorize)
	ctxRecord = "sandgate.record" // the sandbox the route targets (authenticate, authorize)
	ctxToken  = "sandgate.token"  // the caller's token record, operator and agent tokens (authenticate)
)

// setBody keeps the body authorize decoded and checked for the handler.
func setBody(c echo.Context, b requestBody) { c.Set(ctxBody, b) }

// bodyOf is the body authorize decoded for the route, as the route's own
// type; the zero value (nil) when the route has none or it was empty.
func bodyOf[T requestBody](c echo.Context) T {
	b, _ := c.Get(ctxBody).(T)
	return b
}

// setRecord keeps the sandbox record the request targets, or nil; never
// another sandbox's record.
func setRecord(c echo.Context, rec *store.Sandbox) { c.Set(ctxRecord, rec) }

// cachedRecord is the record setRecord kept, or nil.
func cachedRecord(c echo.Context) *store.Sandbox {
	r, _ := c.Get(ctxRecord).(*store.Sandbox)
	return r
}

// setCallerToken keeps the caller's token record (operator and agent
// tokens; create reads the agent's quota from it, B3).
func setCallerToken(c echo.Context, t *store.Token) { c.Set(ctxToken, t) }

// callerToken is the token record setCallerToken kept, or nil.
func callerToken(c echo.Context) *store.Token {
	t, _ := c.Get(ctxToken).(*store.Token)
	return t
}
