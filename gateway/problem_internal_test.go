package gateway

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"sandgate/gateway/apidoc"
)

// Every problem code declared in problem.go has a title: a code added
// without one would answer with an empty RFC 9457 title.
func TestEveryProblemCodeHasATitle(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "problem.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ast.Inspect(f, func(node ast.Node) bool {
		vs, ok := node.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || !strings.HasPrefix(vs.Names[0].Name, "code") || len(vs.Values) != 1 {
			return true
		}
		lit, ok := vs.Values[0].(*ast.BasicLit)
		if !ok {
			return true
		}
		code, _ := strconv.Unquote(lit.Value)
		n++
		if problemTitles[code] == "" {
			t.Errorf("code %s (%s) has no title", code, vs.Names[0].Name)
		}
		return true
	})
	if n < 15 {
		t.Fatalf("found only %d codes: the test no longer sees the declarations", n)
	}
}

// The OpenAPI document knows every problem code the gateway has: its
// Problem schema's enum names it and each operation's errors give it its
// status.
func TestTheOpenAPIDocumentKnowsEveryProblemCode(t *testing.T) {
	t.Parallel()
	d, err := apidoc.Base()
	if err != nil {
		t.Fatal(err)
	}
	enum := map[string]bool{}
	for _, v := range d.Components.Schemas["Problem"].Value.Properties["code"].Value.Enum {
		enum[v.(string)] = true
	}
	for code := range problemTitles {
		if !enum[code] {
			t.Errorf("code %s is not in the Problem schema's enum (gateway/apidoc/openapi.yaml)", code)
		}
		if apidoc.ProblemStatus(code) == 0 {
			t.Errorf("code %s has no status in apidoc", code)
		}
	}
	if len(enum) != len(problemTitles) {
		t.Errorf("the Problem schema names %d codes, the gateway has %d", len(enum), len(problemTitles))
	}
}
