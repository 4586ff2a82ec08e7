package wire

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Every problem code declared in codes.go has a title and a status: a code
// added without them would answer with an empty RFC 9457 title, and the
// OpenAPI document would give it no status.
func TestEveryProblemCodeHasATitleAndAStatus(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "codes.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ast.Inspect(f, func(node ast.Node) bool {
		vs, ok := node.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || !strings.HasPrefix(vs.Names[0].Name, "Code") || len(vs.Values) != 1 {
			return true
		}
		lit, ok := vs.Values[0].(*ast.BasicLit)
		if !ok {
			return true
		}
		code, _ := strconv.Unquote(lit.Value)
		n++
		if Title(code) == "" {
			t.Errorf("code %s (%s) has no title", code, vs.Names[0].Name)
		}
		if st := Status(code); http.StatusText(st) == "" || st < 400 {
			t.Errorf("code %s (%s) has status %d", code, vs.Names[0].Name, st)
		}
		return true
	})
	if n < 15 {
		t.Fatalf("found only %d codes: the test no longer sees the declarations", n)
	}
	if n != len(Codes()) || len(Titles()) != n {
		t.Errorf("codes.go declares %d codes, the table has %d", n, len(Codes()))
	}
}
