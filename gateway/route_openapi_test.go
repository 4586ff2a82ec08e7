package gateway_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"sandgate/gateway"
	"sandgate/gateway/apidoc"
	"sandgate/gateway/token"
	"sandgate/policies"
	"sandgate/policies/policytest"
)

// The dashboard's pages and scripts are text to the validator.
func init() {
	text := func(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		b, err := io.ReadAll(body)
		return string(b), err
	}
	for _, ct := range []string{"text/html", "text/javascript", "text/css"} {
		openapi3filter.RegisterBodyDecoder(ct, text)
	}
}

// docPath is the OpenAPI path of an Echo route template.
func docPath(echoPath string) string {
	parts := strings.Split(echoPath, "/")
	for i, p := range parts {
		switch {
		case strings.HasPrefix(p, ":"):
			parts[i] = "{" + p[1:] + "}"
		case p == "*":
			parts[i] = "{file}"
		}
	}
	return strings.Join(parts, "/")
}

// apiCall is one real request of the conformance walk.
type apiCall struct {
	method, template string // the Echo route it exercises
	path, token      string
	body             []byte
	header           map[string]string
}

// Every registered route is in the OpenAPI document, and a real answer of
// every route (and the problems of a few refusals) validates against it
// (kin-openapi): the document cannot drift from the code.
func TestEveryRouteAnswersAsTheOpenAPIDocumentSays(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{logInputs: true})
	doc := servedDoc(t, h)

	// The document covers every route.
	for _, rt := range h.srv.Echo().Routes() {
		if rt.Method == "echo_route_not_found" {
			continue
		}
		item := doc.Paths.Value(docPath(rt.Path))
		if item == nil || item.GetOperation(rt.Method) == nil {
			t.Errorf("route %s %s is not in gateway/apidoc/openapi.yaml (as %s)", rt.Method, rt.Path, docPath(rt.Path))
			continue
		}
		if apidoc.EchoPath(docPath(rt.Path)) != rt.Path {
			t.Errorf("apidoc.EchoPath(%s) = %s, want %s", docPath(rt.Path), apidoc.EchoPath(docPath(rt.Path)), rt.Path)
		}
	}

	agent := h.mint(token.RoleAgent, "openapi")
	id, session := h.gw.Create(agent, map[string]any{"labels": map[string]string{"doc": "yes"}}).IDToken()
	victim := h.gw.Create(agent, nil).ID
	mint := h.gw.Do(http.MethodPost, "/v1/tokens", h.operator, map[string]any{"role": "agent", "ttl_seconds": 3600, "label": "doc"}).JSON(t)
	jti, _ := mint["id"].(string)
	dir := policytest.CopyWithSmallTests(t, policies.EmbeddedBundle(), policies.EntrypointNames())
	var candidate bytes.Buffer
	if _, err := policies.Build(t.Context(), policies.BuildOptions{Dir: dir, Revision: "doc-1"}, &candidate); err != nil {
		t.Fatal(err)
	}
	j := func(s string) []byte { return []byte(s) }
	calls := []apiCall{
		{method: "GET", template: "/healthz", path: "/healthz"},
		{method: "GET", template: "/readyz", path: "/readyz"},
		{method: "GET", template: "/metrics", path: "/metrics"},
		{method: "GET", template: "/v1/capabilities", path: "/v1/capabilities"},
		{method: "GET", template: "/llms.txt", path: "/llms.txt"},
		{method: "GET", template: "/openapi.json", path: "/openapi.json"},
		{method: "GET", template: "/", path: "/"},
		{method: "GET", template: "/ui/*", path: "/ui/app.js"},
		{method: "GET", template: "/ui/*", path: "/ui/nothing.js"},
		{method: "POST", template: "/mcp", path: "/mcp", token: agent, body: j(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"doc","version":"1"}}}`),
			header: map[string]string{"Accept": "application/json, text/event-stream"}},
		{method: "POST", template: "/mcp", path: "/mcp", body: j(`{}`)},
		{method: "GET", template: "/mcp", path: "/mcp", token: agent},
		{method: "DELETE", template: "/mcp", path: "/mcp", token: agent},
		{method: "POST", template: "/v1/sandboxes", path: "/v1/sandboxes", token: agent, body: j(`{"ttl_seconds":600}`), header: map[string]string{"Idempotency-Key": "doc-1"}},
		{method: "POST", template: "/v1/sandboxes", path: "/v1/sandboxes", token: agent, body: j(`{"ttl_seconds":600}`), header: map[string]string{"Idempotency-Key": "doc-1"}},
		{method: "POST", template: "/v1/sandboxes", path: "/v1/sandboxes", token: agent, body: j(`{"image":"evil:latest"}`)},
		{method: "POST", template: "/v1/sandboxes", path: "/v1/sandboxes", token: session, body: j(`{}`)},
		{method: "POST", template: "/v1/sandboxes", path: "/v1/sandboxes", body: j(`{}`)},
		{method: "GET", template: "/v1/sandboxes", path: "/v1/sandboxes?limit=2", token: agent},
		{method: "GET", template: "/v1/sandboxes/:id", path: "/v1/sandboxes/" + id, token: session},
		{method: "GET", template: "/v1/sandboxes/:id", path: "/v1/sandboxes/abcdefgh12345678", token: h.operator},
		{method: "POST", template: "/v1/sandboxes/:id/exec", path: "/v1/sandboxes/" + id + "/exec", token: session, body: j(`{"argv":["sh","-c","exit 3"]}`)},
		{method: "POST", template: "/v1/sandboxes/:id/exec", path: "/v1/sandboxes/" + id + "/exec", token: session, body: j(`{"argv":"ls"}`)},
		{method: "POST", template: "/v1/sandboxes/:id/exec", path: "/v1/sandboxes/" + id + "/exec", token: session, body: j(`{"argv":["-rf"]}`)},
		{method: "GET", template: "/v1/sandboxes/:id/logs", path: "/v1/sandboxes/" + id + "/logs?tail_bytes=100", token: session},
		{method: "PUT", template: "/v1/sandboxes/:id/files", path: "/v1/sandboxes/" + id + "/files?path=/workspace/doc/a.txt&mode=0640", token: session, body: j("hello\n"),
			header: map[string]string{"Content-Type": "application/octet-stream"}},
		{method: "PUT", template: "/v1/sandboxes/:id/files", path: "/v1/sandboxes/" + id + "/files?path=/etc/passwd", token: session, body: j("x"),
			header: map[string]string{"Content-Type": "application/octet-stream"}},
		{method: "GET", template: "/v1/sandboxes/:id/files", path: "/v1/sandboxes/" + id + "/files?path=/workspace/doc/a.txt", token: session},
		{method: "GET", template: "/v1/sandboxes/:id/files", path: "/v1/sandboxes/" + id + "/files?path=/workspace/doc/a.txt&offset=2&length=3", token: session},
		{method: "GET", template: "/v1/sandboxes/:id/files", path: "/v1/sandboxes/" + id + "/files?path=/workspace", token: session},
		{method: "GET", template: "/v1/sandboxes/:id/files", path: "/v1/sandboxes/" + id + "/files?path=/workspace/none", token: session},
		{method: "DELETE", template: "/v1/sandboxes/:id/files", path: "/v1/sandboxes/" + id + "/files?path=/workspace/doc", token: session},
		{method: "DELETE", template: "/v1/sandboxes/:id/files", path: "/v1/sandboxes/" + id + "/files?path=/workspace/doc&recursive=true", token: session},
		{method: "POST", template: "/v1/sandboxes/:id/extend", path: "/v1/sandboxes/" + id + "/extend", token: h.operator, body: j(`{"ttl_seconds":900}`)},
		{method: "GET", template: "/v1/hosts", path: "/v1/hosts", token: h.operator},
		{method: "PUT", template: "/v1/hosts/:node/enrollment", path: "/v1/hosts/worker-1/enrollment", token: h.operator, body: j(`{"egress":false,"budget":{"max_sandboxes":8}}`)},
		{method: "PUT", template: "/v1/hosts/:node/enrollment", path: "/v1/hosts/control-1/enrollment", token: h.operator, body: j(`{"egress":false}`)},
		{method: "POST", template: "/v1/hosts/:node/state", path: "/v1/hosts/worker-2/state", token: h.operator, body: j(`{"state":"frozen"}`)},
		{method: "DELETE", template: "/v1/hosts/:node/enrollment", path: "/v1/hosts/worker-2/enrollment?reclaim=true", token: h.operator},
		{method: "POST", template: "/v1/tokens", path: "/v1/tokens", token: h.operator, body: j(`{"role":"reviewer","ttl_seconds":3600}`)},
		{method: "GET", template: "/v1/tokens", path: "/v1/tokens", token: h.operator},
		{method: "DELETE", template: "/v1/tokens/:jti", path: "/v1/tokens/" + jti, token: h.operator},
		{method: "GET", template: "/v1/decisions", path: "/v1/decisions?limit=5&inputs=true", token: h.operator},
		{method: "GET", template: "/v1/policy", path: "/v1/policy", token: h.operator},
		{method: "POST", template: "/v1/policy/evaluate", path: "/v1/policy/evaluate", token: h.operator, body: j(`{"entrypoint":"authz","input":{}}`)},
		{method: "POST", template: "/v1/policy/evaluate", path: "/v1/policy/evaluate", token: h.operator, body: j(`{"entrypoint":"authz","input":{"pad":"` + strings.Repeat("x", gateway.DefaultEvaluateMaxBytes) + `"}}`)},
		{method: "POST", template: "/v1/policy/replay", path: "/v1/policy/replay", token: h.operator, body: candidate.Bytes(), header: map[string]string{"Content-Type": "application/gzip"}},
		{method: "DELETE", template: "/v1/sandboxes/:id", path: "/v1/sandboxes/" + victim, token: agent},
		{method: "DELETE", template: "/v1/sandboxes/:id", path: "/v1/sandboxes/" + victim, token: agent},
	}
	exercised := map[string]bool{}
	statuses := map[string][]int{}
	for _, c := range calls {
		key := c.method + " " + c.template
		exercised[key] = true
		status := validateCall(t, h, doc, c)
		statuses[key] = append(statuses[key], status)
	}
	var routes []string
	for _, rt := range h.srv.Echo().Routes() {
		key := rt.Method + " " + rt.Path
		if rt.Method == "echo_route_not_found" || exercised[key] {
			continue
		}
		routes = append(routes, key)
	}
	sort.Strings(routes)
	if len(routes) > 0 {
		t.Errorf("routes the conformance walk never called: %v", routes)
	}
	t.Logf("statuses validated per route: %v", statuses)
}

// servedDoc is the document h serves at /openapi.json, loaded and
// validated as a client's generator would.
func servedDoc(t *testing.T, h *harness) *openapi3.T {
	t.Helper()
	r := h.gw.Do(http.MethodGet, "/openapi.json", "", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("/openapi.json: %d %s", r.Status, r.Body)
	}
	doc, err := openapi3.NewLoader().LoadFromData(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(t.Context(), openapi3.EnableExamplesValidation()); err != nil {
		t.Fatalf("/openapi.json is not a valid OpenAPI 3.1 document: %v", err)
	}
	return doc
}

// validateCall sends c and validates its answer against the operation the
// document gives its route; it returns the status.
func validateCall(t *testing.T, h *harness, doc *openapi3.T, c apiCall) int {
	t.Helper()
	var body io.Reader
	if c.body != nil {
		body = bytes.NewReader(c.body)
	}
	req, err := http.NewRequestWithContext(t.Context(), c.method, h.url+c.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)

	item := doc.Paths.Value(docPath(c.template))
	if item == nil {
		t.Errorf("%s %s: no path %s in the document", c.method, c.path, docPath(c.template))
		return resp.StatusCode
	}
	op := item.GetOperation(c.method)
	params := map[string]string{}
	tpl, concrete := strings.Split(docPath(c.template), "/"), strings.Split(strings.SplitN(c.path, "?", 2)[0], "/")
	for i, p := range tpl {
		if strings.HasPrefix(p, "{") && i < len(concrete) {
			params[strings.Trim(p, "{}")] = concrete[i]
		}
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params,
			Route: &routers.Route{Spec: doc, Path: docPath(c.template), PathItem: item, Method: c.method, Operation: op},
		},
		Status: resp.StatusCode,
		Header: resp.Header,
		Body:   io.NopCloser(bytes.NewReader(data)),
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true, // a status the document does not list fails
		},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s %s: %d %s does not match the document: %v\n%.400s", c.method, c.path, resp.StatusCode, resp.Header.Get("Content-Type"), err, data)
	}
	return resp.StatusCode
}
