package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"sandgate/gateway/mcpserver"
	"sandgate/gateway/token"
	"sandgate/policies"
	"sandgate/policies/policytest"
)

// patchedBundle is the embedded bundle with small tests and its data.json
// merge-patched, under revision rev.
func patchedBundle(t *testing.T, rev string, patch map[string]any) string {
	t.Helper()
	dir := policytest.CopyWithSmallTests(t, policies.EmbeddedBundle(), policies.EntrypointNames())
	policytest.SetRevision(t, dir, rev)
	return policytest.EditFile(t, dir, "data.json", func(b []byte) []byte {
		var data any
		if err := json.Unmarshal(b, &data); err != nil {
			t.Fatal(err)
		}
		out, err := json.Marshal(policytest.MergePatch(data, map[string]any{"sandgate": map[string]any{"config": patch}}))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}, nil)
}

// docFacts reads the enums and bounds a client generator would take from
// the served document.
type docFacts struct {
	revision              string
	profiles, images      []string
	roles, hostStates     []string
	ttlMin, ttlMax        float64
	timeoutMax, tokensMax float64
}

func factsOf(t *testing.T, d *openapi3.T) docFacts {
	t.Helper()
	prop := func(schema string, path ...string) *openapi3.Schema {
		s := d.Components.Schemas[schema]
		for _, p := range path {
			if s == nil || s.Value == nil {
				break
			}
			s = s.Value.Properties[p]
		}
		if s == nil || s.Value == nil {
			t.Fatalf("the document has no schema %s.%v", schema, path)
		}
		return s.Value
	}
	strs := func(s *openapi3.Schema) []string {
		var out []string
		for _, v := range s.Enum {
			out = append(out, v.(string))
		}
		return out
	}
	num := func(f *float64) float64 {
		if f == nil {
			t.Fatal("the document has no bound where the bundle has one")
		}
		return *f
	}
	rev, _ := d.Info.Extensions["x-sandgate-bundle-revision"].(string)
	return docFacts{
		revision: rev,
		profiles: strs(prop("CreateRequest", "profile")), images: strs(prop("CreateRequest", "image")),
		roles: strs(prop("MintRequest", "role")), hostStates: strs(prop("HostStateRequest", "state")),
		ttlMin: num(prop("CreateRequest", "ttl_seconds").Min), ttlMax: num(prop("CreateRequest", "ttl_seconds").Max),
		timeoutMax: num(prop("ExecRequest", "timeout_seconds").Max), tokensMax: num(prop("MintRequest", "ttl_seconds").Max),
	}
}

// The document's enums and bounds are the serving bundle's data: the
// gateway's own answers (capabilities' choices) agree with it, and a
// reload with other data changes the document served next, once.
func TestTheOpenAPIDocumentFollowsTheServingBundle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{policyDir: patchedBundle(t, "doc-a", nil)})
	before := factsOf(t, servedDoc(t, h))
	st := h.engine.Settings()
	choices := h.gw.Do(http.MethodGet, "/v1/capabilities", "", nil).JSON(t)["choices"].(map[string]any)
	var profiles []string
	for _, p := range choices["profiles"].([]any) {
		profiles = append(profiles, p.(string))
	}
	want := docFacts{
		revision: "doc-a", profiles: profiles, images: st.Images.Allowed, roles: st.Tokens.MintableRoles, hostStates: st.Hosts.States,
		ttlMin: float64(st.Lifetime.MinTTLSeconds), ttlMax: float64(st.Lifetime.CeilingSeconds),
		timeoutMax: float64(st.Exec.MaxTimeoutSeconds), tokensMax: float64(st.Tokens.MaxTTLSeconds),
	}
	if !equalFacts(before, want) {
		t.Fatalf("the document says %+v; the bundle %+v", before, want)
	}

	// Same generation: the same bytes, not a rebuild.
	a := h.gw.Do(http.MethodGet, "/openapi.json", "", nil).Body
	b := h.gw.Do(http.MethodGet, "/openapi.json", "", nil).Body
	if !bytes.Equal(a, b) {
		t.Fatal("two answers of one bundle differ")
	}

	// A reviewer's new data, reloaded.
	patch := map[string]any{
		"profiles": map[string]any{"builder": map[string]any{"cap_add": []any{}, "readonly_rootfs": true}},
		"images":   map[string]any{"allowed": []any{"ubuntu:24.04", "debian:12-slim"}},
		"lifetime": map[string]any{"min_ttl_seconds": 120, "ceiling_seconds": 7200},
		"exec":     map[string]any{"max_timeout_seconds": 90},
		"tokens":   map[string]any{"mintable_roles": []any{"agent", "reviewer"}, "max_ttl_seconds": 86400},
		"hosts":    map[string]any{"states": []any{"active", "frozen", "draining"}},
	}
	if err := h.engine.Reload(context.Background(), policies.Config{Dir: patchedBundle(t, "doc-b", patch)}); err != nil {
		t.Fatal(err)
	}
	after := factsOf(t, servedDoc(t, h))
	want = docFacts{
		revision: "doc-b", profiles: []string{"builder", "strict", "workspace"}, images: []string{"ubuntu:24.04", "debian:12-slim"},
		roles: []string{"agent", "reviewer"}, hostStates: []string{"active", "frozen", "draining"},
		ttlMin: 120, ttlMax: 7200, timeoutMax: 90, tokensMax: 86400,
	}
	if !equalFacts(after, want) {
		t.Fatalf("after the reload the document says %+v; want %+v", after, want)
	}
}

func equalFacts(a, b docFacts) bool {
	return a.revision == b.revision && slices.Equal(a.profiles, b.profiles) && slices.Equal(a.images, b.images) &&
		slices.Equal(a.roles, b.roles) && slices.Equal(a.hostStates, b.hostStates) &&
		a.ttlMin == b.ttlMin && a.ttlMax == b.ttlMax && a.timeoutMax == b.timeoutMax && a.tokensMax == b.tokensMax
}

// POST /mcp lists the tools a live MCP session offers, with their
// descriptions and the roles of each tool's route.
func TestTheOpenAPIDocumentListsTheMCPTools(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	doc := servedDoc(t, h)
	raw, err := json.Marshal(doc.Paths.Value("/mcp").Post.Extensions["x-sandgate-tools"])
	if err != nil {
		t.Fatal(err)
	}
	var documented []struct {
		Name, Description, Method, Route string
		Roles                            []string
		InputSchema                      any `json:"input_schema"`
	}
	if err := json.Unmarshal(raw, &documented); err != nil {
		t.Fatal(err)
	}
	docTools := map[string]string{}
	docSchemas := map[string]any{}
	for _, d := range documented {
		docTools[d.Name] = d.Description
		docSchemas[d.Name] = d.InputSchema
	}

	// The operator may call every route a tool calls: its tools/list is
	// every tool the endpoint registers.
	list, err := mcpSession(t, h, h.operator).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]string{}
	for _, tl := range list.Tools {
		live[tl.Name] = tl.Description
		var schema any
		raw, _ := json.Marshal(tl.InputSchema)
		if err := json.Unmarshal(raw, &schema); err != nil || schema == nil || !reflect.DeepEqual(schema, docSchemas[tl.Name]) {
			t.Errorf("%s: tools/list's inputSchema %s; the document's %v", tl.Name, raw, docSchemas[tl.Name])
		}
	}
	if !maps.Equal(live, docTools) {
		t.Fatalf("tools/list offers %v; the document lists %v", slices.Sorted(maps.Keys(live)), slices.Sorted(maps.Keys(docTools)))
	}
	if registered, err := mcpserver.Tools(); err != nil || len(registered) != len(live) {
		t.Fatalf("mcpserver.Tools() has %d tools (%v), tools/list %d", len(registered), err, len(live))
	}

	// Each tool's roles are its route's in the bundle's route table; a
	// session token's tools/list offers at most the tools of its role.
	routes := h.engine.Settings().Routes
	sessionTools := map[string]bool{}
	for _, d := range documented {
		if r := routes[d.Method][d.Route]; !slices.Equal(r.Roles, d.Roles) {
			t.Errorf("%s: documented roles %v, the route table's %v", d.Name, d.Roles, r.Roles)
		}
		if slices.Contains(d.Roles, string(token.RoleSession)) {
			sessionTools[d.Name] = true
		}
	}
	session := h.gw.Create(h.mint(token.RoleAgent, "doc-mcp"), nil).Token
	list, err = mcpSession(t, h, session).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range list.Tools {
		if _, ok := docTools[tl.Name]; !ok {
			t.Errorf("a session's tools/list offers %s, which the document does not list", tl.Name)
		}
	}
	if len(sessionTools) == 0 {
		t.Fatal("the document gives no tool to a session token")
	}
}
