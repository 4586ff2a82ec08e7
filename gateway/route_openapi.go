package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"sandgate/gateway/apidoc"
	"sandgate/gateway/mcpserver"
	"sandgate/gateway/wire"
	"sandgate/policies"
	"sandgate/render"
)

// openAPI serves the OpenAPI 3.1 document of the API (package apidoc),
// its enums and bounds from the serving bundle: built once per bundle
// generation, so a reload changes it and a request does not rebuild it.
func (s *Server) openAPI(c echo.Context) error {
	// A build is the generation's, not the request's: a client that goes
	// away does not cut it short.
	b, err := s.apidoc.JSON(context.WithoutCancel(c.Request().Context()), s.cfg.Engine.Generation(), s.OpenAPIFacts)
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, "application/json", b)
}

// OpenAPIFacts are what the OpenAPI document is built from: the serving
// bundle, the MCP tools the endpoint registers and the gateway's own
// limits.
func (s *Server) OpenAPIFacts() apidoc.Facts {
	info := s.cfg.Engine.Info()
	tools, err := mcpserver.Tools()
	if err != nil {
		s.log.Error("the MCP tools could not be listed for /openapi.json", "err", err)
	}
	docTools := make([]apidoc.Tool, len(tools))
	for i, t := range tools {
		docTools[i] = apidoc.Tool{Name: t.Name, Description: t.Description, Method: t.Method, Route: t.Route, InputSchema: t.InputSchema}
	}
	return apidoc.Facts{
		Revision:           info.Revision,
		Settings:           s.cfg.Engine.Settings(),
		Rules:              info.Rules,
		Entrypoints:        policies.EntrypointNames(),
		Tools:              docTools,
		ProblemTitles:      wire.Titles(),
		DefaultWaitSeconds: int(s.cfg.DefaultWait / time.Second),
		MaxWaitSeconds:     int(s.cfg.MaxWait / time.Second),
		DefaultProfile:     string(render.ProfileStrict),
		DefaultNetwork:     string(render.NetworkNone),
	}
}
