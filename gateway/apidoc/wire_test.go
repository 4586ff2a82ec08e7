package apidoc_test

import (
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
// and every property a member of the type.
func TestTheSchemasAreTheWireTypes(t *testing.T) {
	t.Parallel()
	d, err := apidoc.Base()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		schemas []string // the schema and those that extend it (allOf)
		typ     reflect.Type
	}{
		{[]string{"Sandbox"}, reflect.TypeFor[wire.Sandbox]()},
		{[]string{"Problem"}, reflect.TypeFor[wire.Problem]()},
		{[]string{"Violation"}, reflect.TypeFor[wire.Violation]()},
		{[]string{"Token", "MintedToken"}, reflect.TypeFor[wire.Token]()},
	} {
		var doc []string
		for _, name := range c.schemas {
			ref := d.Components.Schemas[name]
			if ref == nil {
				t.Fatalf("the document has no %s schema", name)
			}
			doc = append(doc, properties(ref.Value)...)
		}
		slices.Sort(doc)
		doc = slices.Compact(doc)
		members := jsonMembers(c.typ)
		for _, m := range members {
			if !slices.Contains(doc, m) {
				t.Errorf("%s has member %q; the %s schema does not", c.typ, m, c.schemas[0])
			}
		}
		for _, p := range doc {
			if !slices.Contains(members, p) {
				t.Errorf("the %s schema has property %q; %s does not", c.schemas[0], p, c.typ)
			}
		}
	}
	// The Token schema's quota is wire.Quota.
	quota := d.Components.Schemas["Token"].Value.Properties["quota"].Value
	if got, want := properties(quota), jsonMembers(reflect.TypeFor[wire.Quota]()); !slices.Equal(got, want) {
		t.Errorf("the Token schema's quota has %v; wire.Quota %v", got, want)
	}
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

// jsonMembers are the JSON member names of a struct type, sorted.
func jsonMembers(typ reflect.Type) []string {
	var out []string
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
			continue
		case name == "":
			name = f.Name
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
