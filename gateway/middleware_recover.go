package gateway

import (
	"fmt"
	"net/http"
	"runtime/debug"

	"github.com/labstack/echo/v4"

	"sandgate/gateway/wire"
)

// recoverPanics turns a panic into a logged 500 problem: the request is
// refused and nothing half-done is reported as success.
func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				s.log.Error("panic in handler", "route", c.Path(), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				p := newProblem(http.StatusInternalServerError, wire.CodeInternalError, "an internal error occurred; the request was refused")
				p.cause = fmt.Errorf("panic: %v", r)
				err = p
			}
		}()
		return next(c)
	}
}
