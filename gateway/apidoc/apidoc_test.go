package apidoc_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"sandgate/gateway/apidoc"
	"sandgate/gateway/mcpserver"
	"sandgate/policies"
)

// facts are the embedded bundle's, as the gateway gives them.
func facts(t testing.TB, e *policies.Engine) apidoc.Facts {
	t.Helper()
	info := e.Info()
	var tools []apidoc.Tool
	list, err := mcpserver.Tools()
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range list {
		tools = append(tools, apidoc.Tool{Name: tl.Name, Description: tl.Description, Method: tl.Method, Route: tl.Route, InputSchema: tl.InputSchema})
	}
	return apidoc.Facts{
		Revision: info.Revision, Settings: e.Settings(), Rules: info.Rules, Entrypoints: policies.EntrypointNames(),
		Tools: tools, ProblemTitles: map[string]string{"invalid_request": "The request is invalid"},
		DefaultWaitSeconds: 30, MaxWaitSeconds: 120, DefaultProfile: "strict", DefaultNetwork: "none",
	}
}

// sharedEngine is the embedded bundle, compiled once for the package.
var sharedEngine = sync.OnceValues(func() (*policies.Engine, error) {
	return policies.New(context.Background(), policies.Config{})
})

func embedded(t testing.TB) *policies.Engine {
	t.Helper()
	e, err := sharedEngine()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func build(t testing.TB, f apidoc.Facts) *openapi3.T {
	t.Helper()
	d, err := apidoc.Build(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestTheDocumentIsAValidOpenAPI31Document(t *testing.T) {
	t.Parallel()
	d := build(t, facts(t, embedded(t)))
	if !d.IsOpenAPI31OrLater() || d.Paths.Len() < 20 {
		t.Fatalf("openapi %q with %d paths", d.OpenAPI, d.Paths.Len())
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	// What is served loads and validates again, as a client's generator
	// would load it.
	again, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Validate(context.Background(), openapi3.EnableExamplesValidation()); err != nil {
		t.Fatal(err)
	}
	if again.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", again.OpenAPI)
	}
}

// Every operation has a summary, a description, an operationId and a tag;
// every property, parameter and header of the document has a description.
func TestEveryOperationAndFieldIsDescribed(t *testing.T) {
	t.Parallel()
	d := build(t, facts(t, embedded(t)))
	ids := map[string]string{}
	ops := 0
	for path, item := range d.Paths.Map() {
		for _, p := range item.Parameters {
			if p.Value.Description == "" {
				t.Errorf("%s: parameter %s has no description", path, p.Value.Name)
			}
		}
		for method, op := range item.Operations() {
			ops++
			where := method + " " + path
			if op.Summary == "" || op.Description == "" || op.OperationID == "" || len(op.Tags) == 0 {
				t.Errorf("%s: summary %q, description %d bytes, operationId %q, tags %v", where, op.Summary, len(op.Description), op.OperationID, op.Tags)
			}
			if other, dup := ids[op.OperationID]; dup {
				t.Errorf("%s: operationId %q is also %s's", where, op.OperationID, other)
			}
			ids[op.OperationID] = where
			if !strings.Contains(op.Description, "Who may call it:") {
				t.Errorf("%s: the description does not say who may call it", where)
			}
			for _, p := range op.Parameters {
				if p.Value.Description == "" {
					t.Errorf("%s: parameter %s has no description", where, p.Value.Name)
				}
				walkSchema(t, where+" parameter "+p.Value.Name, p.Value.Schema, map[*openapi3.Schema]bool{})
			}
			if rb := op.RequestBody; rb != nil {
				if rb.Value.Description == "" {
					t.Errorf("%s: the request body has no description", where)
				}
				for ct, mt := range rb.Value.Content {
					walkSchema(t, where+" request "+ct, mt.Schema, map[*openapi3.Schema]bool{})
				}
			}
			for status, r := range op.Responses.Map() {
				for name, h := range r.Value.Headers {
					if h.Value.Description == "" {
						t.Errorf("%s %s: header %s has no description", where, status, name)
					}
				}
				for ct, mt := range r.Value.Content {
					walkSchema(t, where+" "+status+" "+ct, mt.Schema, map[*openapi3.Schema]bool{})
				}
			}
		}
	}
	if ops < 32 {
		t.Errorf("%d operations; the gateway serves at least 32", ops)
	}
	for name, s := range d.Components.Schemas {
		walkSchema(t, "schema "+name, s, map[*openapi3.Schema]bool{})
	}
}

// walkSchema fails on a property without a description, at any depth.
func walkSchema(t *testing.T, where string, ref *openapi3.SchemaRef, seen map[*openapi3.Schema]bool) {
	t.Helper()
	if ref == nil || ref.Value == nil || seen[ref.Value] {
		return
	}
	s := ref.Value
	seen[s] = true
	for name, p := range s.Properties {
		if p.Value != nil && p.Value.Description == "" && p.Ref == "" {
			t.Errorf("%s: property %s has no description", where, name)
		}
		walkSchema(t, where+"."+name, p, seen)
	}
	walkSchema(t, where+"[]", s.Items, seen)
	if s.AdditionalProperties.Schema != nil {
		walkSchema(t, where+"{}", s.AdditionalProperties.Schema, seen)
	}
	for _, sub := range slices.Concat(s.AllOf, s.OneOf, s.AnyOf) {
		walkSchema(t, where, sub, seen)
	}
}

// Every example in the document, request or answer, validates against the
// schema beside it (kin-openapi), and the main request bodies and answers
// have one.
func TestEveryExampleValidatesAgainstItsSchema(t *testing.T) {
	t.Parallel()
	d := build(t, facts(t, embedded(t)))
	check := func(where string, mt *openapi3.MediaType) int {
		n := 0
		var values []any
		if mt.Example != nil {
			values = append(values, mt.Example)
		}
		for _, ex := range mt.Examples {
			values = append(values, ex.Value.Value)
		}
		for _, v := range values {
			n++
			raw, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			var generic any
			if err := json.Unmarshal(raw, &generic); err != nil {
				t.Fatal(err)
			}
			if err := mt.Schema.Value.VisitJSON(generic); err != nil {
				t.Errorf("%s: the example %s does not validate: %v", where, raw, err)
			}
		}
		return n
	}
	withExample := map[string]bool{}
	for path, item := range d.Paths.Map() {
		for method, op := range item.Operations() {
			if rb := op.RequestBody; rb != nil {
				for ct, mt := range rb.Value.Content {
					if check(method+" "+path+" request "+ct, mt) > 0 {
						withExample[method+" "+path+" request"] = true
					}
				}
			}
			for status, r := range op.Responses.Map() {
				for ct, mt := range r.Value.Content {
					if check(method+" "+path+" "+status+" "+ct, mt) > 0 {
						withExample[method+" "+path+" "+status] = true
					}
				}
			}
		}
	}
	for _, want := range []string{
		"POST /v1/sandboxes request", "POST /v1/sandboxes 201", "GET /v1/sandboxes 200", "GET /v1/sandboxes/{id} 200",
		"POST /v1/sandboxes/{id}/exec request", "POST /v1/sandboxes/{id}/exec 200", "POST /v1/sandboxes/{id}/extend request",
		"PUT /v1/sandboxes/{id}/files 200", "GET /v1/sandboxes/{id}/files 200",
		"POST /v1/tokens request", "POST /v1/tokens 201", "PUT /v1/hosts/{node}/enrollment request", "GET /v1/hosts 200",
		"POST /v1/hosts/{node}/state request", "POST /v1/policy/evaluate request", "GET /v1/decisions 200", "POST /mcp request",
	} {
		if !withExample[want] {
			t.Errorf("%s has no example", want)
		}
	}
}

// The document's enums and bounds are the bundle's: a bundle with other
// data gives a document that follows it.
func TestEnumsAndBoundsFollowTheBundleData(t *testing.T) {
	t.Parallel()
	e := embedded(t)
	f := facts(t, e)
	st := &f.Settings
	// Another bundle's data, as a reload would bring it.
	st.Profiles = maps.Clone(st.Profiles)
	st.Profiles["builder"] = policies.ProfileSettings{}
	st.Networks = map[string]policies.NetworkSettings{"none": st.Networks["none"]}
	st.Images.Allowed = []string{"alpine:3.20", "ubuntu:24.04"}
	st.Images.Default = "alpine:3.20"
	st.Lifetime = policies.LifetimeSettings{DefaultTTLSeconds: 1800, MinTTLSeconds: 120, CeilingSeconds: 7200}
	st.Sandbox.MinCPUMHz, st.Sandbox.MaxCPUMHz, st.Sandbox.DefaultCPUMHz = 250, 1500, 300
	st.Sandbox.MinMemoryMB, st.Sandbox.MaxMemoryMB, st.Sandbox.DefaultMemoryMB = 128, 2048, 256
	st.Exec.MaxTimeoutSeconds, st.Exec.DefaultTimeoutSeconds, st.Exec.MaxOutputBytes, st.Exec.MaxArgs = 90, 30, 4096, 16
	st.Exec.MaxLogsTailBytes = 2048
	st.Files.MaxReadBytes, st.Files.MaxPathBytes = 1<<20, 512
	st.Tokens.MintableRoles = []string{"agent"}
	st.Tokens.MinTTLSeconds, st.Tokens.MaxTTLSeconds = 300, 86400
	st.AgentQuota = policies.AgentQuotaSettings{DefaultMaxLiveSandboxes: 2, MaxLiveSandboxes: 9}
	st.Hosts.States = []string{"active", "draining"}
	st.Hosts.MaxSandboxesCeiling = 50
	d := build(t, f)

	prop := func(schema string, path ...string) *openapi3.Schema {
		s := d.Components.Schemas[schema]
		for _, p := range path {
			s = s.Value.Properties[p]
		}
		return s.Value
	}
	param := func(path, method, name string) *openapi3.Schema {
		op := d.Paths.Value(path).GetOperation(method)
		if p := op.Parameters.GetByInAndName("query", name); p != nil {
			return p.Schema.Value
		}
		return d.Paths.Value(path).Parameters.GetByInAndName("query", name).Schema.Value
	}
	enum := func(where string, s *openapi3.Schema, want []string, def any) {
		t.Helper()
		var got []string
		for _, v := range s.Enum {
			got = append(got, v.(string))
		}
		if !slices.Equal(got, want) || s.Default != def {
			t.Errorf("%s: enum %v default %v; want %v default %v", where, got, s.Default, want, def)
		}
	}
	bounds := func(where string, s *openapi3.Schema, lo, hi float64, def any) {
		t.Helper()
		if s.Min == nil || s.Max == nil || *s.Min != lo || *s.Max != hi || s.Default != def {
			t.Errorf("%s: [%v, %v] default %v; want [%v, %v] default %v", where, ptr(s.Min), ptr(s.Max), s.Default, lo, hi, def)
		}
	}
	enum("profile", prop("CreateRequest", "profile"), []string{"builder", "strict", "workspace"}, "strict")
	enum("network", prop("CreateRequest", "network"), []string{"none"}, "none")
	enum("image", prop("CreateRequest", "image"), []string{"alpine:3.20", "ubuntu:24.04"}, "alpine:3.20")
	bounds("ttl_seconds", prop("CreateRequest", "ttl_seconds"), 120, 7200, 1800)
	bounds("cpu_mhz", prop("CreateRequest", "cpu_mhz"), 250, 1500, 300)
	bounds("memory_mb", prop("CreateRequest", "memory_mb"), 128, 2048, 256)
	bounds("extend ttl_seconds", prop("ExtendRequest", "ttl_seconds"), 120, 7200, nil)
	bounds("timeout_seconds", prop("ExecRequest", "timeout_seconds"), 1, 90, 30)
	bounds("max_output_bytes", prop("ExecRequest", "max_output_bytes"), 1, 4096, 4096)
	if got := prop("ExecRequest", "argv").MaxItems; got == nil || *got != 16 {
		t.Errorf("argv maxItems %v; want 16", got)
	}
	bounds("tail_bytes", param("/v1/sandboxes/{id}/logs", "GET", "tail_bytes"), 1, 2048, 2048)
	bounds("length", param("/v1/sandboxes/{id}/files", "GET", "length"), 1, 1<<20, nil)
	if got := param("/v1/sandboxes/{id}/files", "GET", "path").MaxLength; got == nil || *got != 512 {
		t.Errorf("path maxLength %v; want 512", got)
	}
	if got := d.Components.Headers["MaxReadBytes"].Value.Schema.Value.Example; got != int64(1<<20) {
		t.Errorf("X-Sandgate-Max-Read-Bytes example %v; want %d", got, 1<<20)
	}
	enum("role", prop("MintRequest", "role"), []string{"agent"}, nil)
	bounds("token ttl_seconds", prop("MintRequest", "ttl_seconds"), 300, 86400, nil)
	bounds("quota", prop("MintRequest", "quota", "max_live_sandboxes"), 1, 9, 2)
	enum("host state", prop("HostStateRequest", "state"), []string{"active", "draining"}, nil)
	bounds("max_sandboxes", prop("EnrollRequest", "budget", "max_sandboxes"), 1, 50, 10)
	enum("entrypoint", prop("EvaluateRequest", "entrypoint"), policies.EntrypointNames(), "authz")

	// The request examples moved with the bounds (Build validated them).
	create := d.Paths.Value("/v1/sandboxes").Post.RequestBody.Value.GetMediaType("application/json").Example.(map[string]any)
	if create["image"] != "alpine:3.20" || create["ttl_seconds"] != float64(1800) {
		t.Errorf("create example %v", create)
	}

	// The served bundle's own values, for contrast: nothing above is
	// what openapi.yaml says by itself.
	base := build(t, facts(t, e))
	if p := base.Components.Schemas["CreateRequest"].Value.Properties["ttl_seconds"].Value; *p.Max != float64(e.Settings().Lifetime.CeilingSeconds) {
		t.Errorf("embedded bundle: ttl max %v, want %d", *p.Max, e.Settings().Lifetime.CeilingSeconds)
	}
}

func ptr(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}

// Each operation's description and x-sandgate-roles come from the bundle's
// route table, and every rule id openapi.yaml names is a rule of the
// embedded bundle (a renamed rule fails here, not silently).
func TestOperationsSayWhoMayCallThemFromTheRouteTable(t *testing.T) {
	t.Parallel()
	e := embedded(t)
	base, err := apidoc.Base()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, r := range e.Rules() {
		known[string(r.Entrypoint)+":"+r.ID] = true
	}
	for path, item := range base.Paths.Map() {
		for method, op := range item.Operations() {
			raw, _ := op.Extensions["x-sandgate-rules"].([]any)
			for _, k := range raw {
				if !known[k.(string)] {
					t.Errorf("%s %s: openapi.yaml names rule %v, which the bundle does not have", method, path, k)
				}
			}
			codes, _ := op.Extensions["x-sandgate-problems"].([]any)
			for _, code := range codes {
				if apidoc.ProblemStatus(code.(string)) == 0 {
					t.Errorf("%s %s: problem code %v has no status", method, path, code)
				}
			}
		}
	}

	f := facts(t, e)
	f.Settings.Routes = maps.Clone(f.Settings.Routes)
	post := maps.Clone(f.Settings.Routes["POST"])
	r := post["/v1/sandboxes/:id/exec"]
	r.Roles = []string{"operator"}
	post["/v1/sandboxes/:id/exec"] = r
	f.Settings.Routes["POST"] = post
	d := build(t, f)
	op := d.Paths.Value("/v1/sandboxes/{id}/exec").Post
	if roles, _ := op.Extensions["x-sandgate-roles"].([]string); !slices.Equal(roles, []string{"operator"}) || !strings.Contains(op.Description, "a token of role operator (scope exec") {
		t.Errorf("exec: roles %v, description:\n%s", op.Extensions["x-sandgate-roles"], op.Description)
	}
	if !strings.Contains(op.Description, "E2 (authz): Exec's timeout is bounded") {
		t.Errorf("exec: the description lacks E2's title:\n%s", op.Description)
	}
	if op.Responses.Value("403") == nil || op.Responses.Value("410") == nil {
		t.Errorf("exec: no 403 or 410 problem response")
	}
	// A tool follows its route's roles.
	for _, tl := range d.Paths.Value("/mcp").Post.Extensions["x-sandgate-tools"].([]map[string]any) {
		if tl["name"] == "exec" && !slices.Equal(tl["roles"].([]string), []string{"operator"}) {
			t.Errorf("the exec tool's roles are %v", tl["roles"])
		}
	}
}

// Build runs once per bundle generation: a second request of the same
// generation gets the same bytes, a new generation a new document.
func TestTheCacheBuildsOncePerGeneration(t *testing.T) {
	t.Parallel()
	e := embedded(t)
	var c apidoc.Cache
	builds := 0
	f := func() apidoc.Facts { builds++; return facts(t, e) }
	a, err := c.JSON(context.Background(), 1, f)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.JSON(context.Background(), 1, f)
	if builds != 1 || &a[0] != &b[0] {
		t.Fatalf("%d builds for one generation", builds)
	}
	if _, err := c.JSON(context.Background(), 2, f); err != nil || builds != 2 {
		t.Fatalf("%d builds after a new generation, %v", builds, err)
	}
}

func BenchmarkBuild(b *testing.B) {
	f := facts(b, embedded(b))
	for b.Loop() {
		if _, err := apidoc.Build(context.Background(), f); err != nil {
			b.Fatal(err)
		}
	}
}
