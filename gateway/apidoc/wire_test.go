package apidoc_test

import (
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"sandgate/gateway/apidoc"
	"sandgate/gateway/wire"
)

// The document's objects are the wire types the gateway writes and the
// client reads: every JSON member of each type is a property of its schema,
// and every property a member of the type, down through the members that
// are objects themselves.
func TestTheSchemasAreTheWireTypes(t *testing.T) {
	t.Parallel()
	d, err := apidoc.Base()
	if err != nil {
		t.Fatal(err)
	}
	schema := func(name string) *openapi3.Schema {
		ref := d.Components.Schemas[name]
		if ref == nil {
			t.Fatalf("the document has no %s schema", name)
		}
		return ref.Value
	}
	// answer is the JSON schema of an operation's 200 answer.
	answer := func(method, path string) *openapi3.Schema {
		item := d.Paths.Find(path)
		if item == nil || item.GetOperation(method) == nil {
			t.Fatalf("the document has no %s %s", method, path)
		}
		res := item.GetOperation(method).Responses.Status(200)
		if res == nil || res.Value.Content.Get("application/json") == nil {
			t.Fatalf("the document has no JSON 200 answer of %s %s", method, path)
		}
		return res.Value.Content.Get("application/json").Schema.Value
	}
	for _, c := range []struct {
		name    string
		schemas []*openapi3.Schema // the schema and those that extend it (allOf)
		typ     reflect.Type
	}{
		{"Sandbox", []*openapi3.Schema{schema("Sandbox")}, reflect.TypeFor[wire.Sandbox]()},
		{"Problem", []*openapi3.Schema{schema("Problem")}, reflect.TypeFor[wire.Problem]()},
		{"Violation", []*openapi3.Schema{schema("Violation")}, reflect.TypeFor[wire.Violation]()},
		{"Token", []*openapi3.Schema{schema("Token"), schema("MintedToken")}, reflect.TypeFor[wire.Token]()},
		{"Capabilities", []*openapi3.Schema{schema("Capabilities")}, reflect.TypeFor[wire.Capabilities]()},
		{"ExecResult", []*openapi3.Schema{schema("ExecResult")}, reflect.TypeFor[wire.ExecResult]()},
		{"ExecStart", []*openapi3.Schema{schema("ExecStart")}, reflect.TypeFor[wire.ExecStart]()},
		{"ExecOutput", []*openapi3.Schema{schema("ExecOutput")}, reflect.TypeFor[wire.ExecOutput]()},
		{"ExecKeepalive", []*openapi3.Schema{schema("ExecKeepalive")}, reflect.TypeFor[wire.ExecKeepalive]()},
		{"ExecExit", []*openapi3.Schema{schema("ExecExit")}, reflect.TypeFor[wire.ExecExit]()},
		{"StreamError", []*openapi3.Schema{schema("StreamError")}, reflect.TypeFor[wire.StreamError]()},
		{"FileInfo", []*openapi3.Schema{schema("FileInfo")}, reflect.TypeFor[wire.FileInfo]()},
		{"Listing", []*openapi3.Schema{schema("Listing")}, reflect.TypeFor[wire.Listing]()},
		{"GET /v1/sandboxes", []*openapi3.Schema{answer("GET", "/v1/sandboxes")}, reflect.TypeFor[wire.SandboxPage]()},
		{"Host", []*openapi3.Schema{schema("Host")}, reflect.TypeFor[wire.Host]()},
		{"HostChange", []*openapi3.Schema{schema("HostChange")}, reflect.TypeFor[wire.HostChange]()},
		{"GET /v1/hosts", []*openapi3.Schema{answer("GET", "/v1/hosts")}, reflect.TypeFor[wire.HostList]()},
		{"Policy", []*openapi3.Schema{schema("Policy")}, reflect.TypeFor[wire.Policy]()},
		{"Evaluation", []*openapi3.Schema{schema("Evaluation")}, reflect.TypeFor[wire.Evaluation]()},
		{"LoggedDecision", []*openapi3.Schema{schema("LoggedDecision")}, reflect.TypeFor[wire.Decision]()},
		{"GET /v1/decisions", []*openapi3.Schema{answer("GET", "/v1/decisions")}, reflect.TypeFor[wire.DecisionPage]()},
		{"EnrollRequest", []*openapi3.Schema{schema("EnrollRequest")}, reflect.TypeFor[wire.EnrollRequest]()},
		{"HostStateRequest", []*openapi3.Schema{schema("HostStateRequest")}, reflect.TypeFor[wire.HostStateRequest]()},
		{"ExtendRequest", []*openapi3.Schema{schema("ExtendRequest")}, reflect.TypeFor[wire.ExtendRequest]()},
		{"CreateRequest", []*openapi3.Schema{schema("CreateRequest")}, reflect.TypeFor[wire.CreateRequest]()},
		{"ExecRequest", []*openapi3.Schema{schema("ExecRequest")}, reflect.TypeFor[wire.ExecRequest]()},
		{"MintRequest", []*openapi3.Schema{schema("MintRequest")}, reflect.TypeFor[wire.MintRequest]()},
		{"EvaluateRequest", []*openapi3.Schema{schema("EvaluateRequest")}, reflect.TypeFor[wire.EvaluateRequest]()},
	} {
		compare(t, c.name, c.schemas, c.typ, true)
	}
	// A list of tokens holds Token, checked above with the secret that
	// only MintedToken adds: the list itself is checked alone.
	compare(t, "GET /v1/tokens", []*openapi3.Schema{answer("GET", "/v1/tokens")}, reflect.TypeFor[wire.TokenList](), false)
}

// compare checks the JSON members of typ against the properties of
// schemas (a schema and those that extend it), then, deep, each member
// that is an object against its property's schema, where that declares
// properties.
func compare(t *testing.T, where string, schemas []*openapi3.Schema, typ reflect.Type, deep bool) {
	t.Helper()
	var doc []string
	for _, s := range schemas {
		doc = append(doc, properties(s)...)
	}
	slices.Sort(doc)
	doc = slices.Compact(doc)
	members := jsonMembers(typ)
	for _, m := range members {
		if !slices.Contains(doc, m.name) {
			t.Errorf("%s: %s has member %q; the schema does not", where, typ, m.name)
		}
	}
	for _, p := range doc {
		if !slices.ContainsFunc(members, func(m member) bool { return m.name == p }) {
			t.Errorf("%s: the schema has property %q; %s does not", where, p, typ)
		}
	}
	for _, m := range members {
		inner, ok := object(m.typ)
		if !ok || !deep {
			continue
		}
		var ps []*openapi3.Schema
		for _, s := range schemas {
			if p := property(s, m.name); p != nil {
				if p.Type.Is("array") && p.Items != nil {
					p = p.Items.Value
				}
				if len(properties(p)) > 0 {
					ps = append(ps, p)
				}
			}
		}
		if len(ps) > 0 {
			compare(t, where+"."+m.name, ps, inner, true)
		}
	}
}

// object is the struct a member holds (through pointers and slices), when
// JSON writes it as an object of its fields.
func object(typ reflect.Type) (reflect.Type, bool) {
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct ||
		typ.Implements(reflect.TypeFor[json.Marshaler]()) || reflect.PointerTo(typ).Implements(reflect.TypeFor[encoding.TextMarshaler]()) {
		return nil, false
	}
	return typ, true
}

// properties are a schema's property names, those of its allOf parts
// without a $ref included.
func properties(s *openapi3.Schema) []string {
	var out []string
	for name := range s.Properties {
		out = append(out, name)
	}
	for _, part := range s.AllOf {
		if part.Ref == "" {
			out = append(out, properties(part.Value)...)
		}
	}
	slices.Sort(out)
	return out
}

// property is the schema of a schema's property name, nil if it has none.
func property(s *openapi3.Schema, name string) *openapi3.Schema {
	if p := s.Properties[name]; p != nil {
		return p.Value
	}
	for _, part := range s.AllOf {
		if part.Ref == "" {
			if p := property(part.Value, name); p != nil {
				return p
			}
		}
	}
	return nil
}

// member is one JSON member of a struct type.
type member struct {
	name string
	typ  reflect.Type
}

// jsonMembers are the JSON members of a struct type, sorted by name; the
// members of an embedded struct without a name of its own are its own.
func jsonMembers(typ reflect.Type) []member {
	var out []member
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || (!f.IsExported() && !f.Anonymous):
			continue
		case name == "" && f.Anonymous && f.Type.Kind() == reflect.Struct:
			out = append(out, jsonMembers(f.Type)...)
			continue
		case name == "":
			name = f.Name
		}
		out = append(out, member{name, f.Type})
	}
	slices.SortFunc(out, func(a, b member) int { return strings.Compare(a.name, b.name) })
	return out
}
