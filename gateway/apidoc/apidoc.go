// Package apidoc builds sandgate's OpenAPI 3.1 document, served as GET
// /openapi.json. openapi.yaml holds what the code knows (paths, schemas,
// descriptions, examples of answers); Build adds what the serving policy
// bundle's data says (enums, bounds and defaults of request fields, who may
// call each route, the titles of the rules that can refuse it, request
// examples within the bounds) and the MCP tools the endpoint registers.
// The gateway builds it once per bundle generation (Cache). Its tests
// validate the gateway's real answers against it, route by route, and fail
// on a route it lacks or on a bound that disagrees with the bundle.
package apidoc

import (
	"context"
	_ "embed" // for go:embed
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/getkin/kin-openapi/openapi3"

	"sandgate/policies"
)

//go:embed openapi.yaml
var source []byte

// Facts are what Build reads besides openapi.yaml: the serving bundle and
// the gateway's own settings.
type Facts struct {
	// Revision is the serving bundle's revision (x-sandgate-bundle-revision).
	Revision string
	// Settings are the bundle's data (data.sandgate.config).
	Settings policies.Settings
	// Rules are the bundle's annotated rules (titles in the descriptions).
	Rules []policies.Rule
	// Entrypoints name the bundle's decisions (evaluate, decision filters).
	Entrypoints []string
	// Tools are the MCP tools the /mcp endpoint registers.
	Tools []Tool
	// ProblemTitles maps each problem code the gateway answers to its title.
	ProblemTitles map[string]string
	// DefaultWaitSeconds and MaxWaitSeconds bound a create's wait_seconds
	// (the gateway's configuration, not the bundle's).
	DefaultWaitSeconds, MaxWaitSeconds int
	// DefaultProfile and DefaultNetwork are what a create without profile
	// or network gets (the renderer's defaults).
	DefaultProfile, DefaultNetwork string
}

// Tool is one MCP tool: its name and description as tools/list gives them
// and the REST route each call of it makes.
type Tool struct {
	Name, Description string
	Method, Route     string          // e.g. POST, /v1/sandboxes/:id/exec
	InputSchema       json.RawMessage // its arguments, as tools/list gives them
}

// Base parses openapi.yaml alone, without the bundle's facts (each call
// returns a new document the caller may change).
func Base() (*openapi3.T, error) {
	d, err := openapi3.NewLoader().LoadFromData(source)
	if err != nil {
		return nil, fmt.Errorf("apidoc: load openapi.yaml: %w", err)
	}
	return d, nil
}

// Build returns the document for f: openapi.yaml with the bundle's enums,
// bounds, defaults, route table, rule titles and request examples, and the
// MCP tools. It fails when the result is not a valid OpenAPI 3.1 document
// (its examples included: kin-openapi validates each against its schema).
func Build(ctx context.Context, f Facts) (*openapi3.T, error) {
	d, err := Base()
	if err != nil {
		return nil, err
	}
	if d.Info.Extensions == nil {
		d.Info.Extensions = map[string]any{}
	}
	d.Info.Extensions["x-sandgate-bundle-revision"] = f.Revision
	if err := bind(d, f); err != nil {
		return nil, err
	}
	if err := requestExamples(d, f); err != nil {
		return nil, err
	}
	describe(d, f)
	if err := d.Validate(ctx, openapi3.EnableExamplesValidation()); err != nil {
		return nil, fmt.Errorf("apidoc: the document for bundle %s is not a valid OpenAPI document: %w", f.Revision, err)
	}
	return d, nil
}

// Cache holds the encoded document of one bundle generation
// (policies.Engine.Generation): it is built once per reload, not per
// request.
type Cache struct {
	cur atomic.Pointer[cached]
}

type cached struct {
	gen  uint64
	body []byte
	err  error
}

// JSON returns the encoded document of generation gen, building it from
// facts() when the cached one is of another generation. Read gen before
// the facts: a reload in between then costs one more build, never a stale
// document kept under the new generation.
func (c *Cache) JSON(ctx context.Context, gen uint64, facts func() Facts) ([]byte, error) {
	if e := c.cur.Load(); e != nil && e.gen == gen {
		return e.body, e.err
	}
	e := &cached{gen: gen}
	d, err := Build(ctx, facts())
	if err == nil {
		e.body, err = json.Marshal(d)
	}
	e.err = err
	c.cur.Store(e)
	return e.body, e.err
}
