package policies

import (
	"context"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"
)

// The Go twin that refuses odd roots at load and the Rego predicate that
// F1 and E1 use agree on every path: a root Go accepts is one Rego can
// match, and one Go refuses is one Rego would treat as dead.
func TestNormalisedAbsoluteAgreesWithTheBundlesPredicate(t *testing.T) {
	t.Parallel()
	b, err := loadBundle(bundleFiles, false)
	if err != nil {
		t.Fatal(err)
	}
	var opts []func(*rego.Rego)
	for _, m := range b.Modules {
		opts = append(opts, rego.ParsedModule(m.Parsed))
	}
	q, err := rego.New(append(opts, rego.Query("data.sandgate.lib.paths.normalised_absolute(input)"))...).PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		"/", "/workspace", "/tmp", "/workspace/a/b", "/workspace/.hidden", "/a..b", "/...", "/a b",
		"", "workspace", "./x", "/workspace/", "//", "//workspace", "/a//b", "/.", "/..", "/a/.", "/a/../b", "/a/./b",
	} {
		rs, err := q.Eval(context.Background(), rego.EvalInput(p))
		if err != nil {
			t.Fatal(err)
		}
		if inRego := len(rs) > 0; inRego != NormalisedAbsolute(p) {
			t.Errorf("%q: Rego says %v, Go says %v", p, inRego, NormalisedAbsolute(p))
		}
	}
}
