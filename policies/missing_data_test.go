package policies

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
)

// missingDataAllowed lists the policy data paths whose absence may leave an
// allowed fixture allowed, with the reason. Everything else a decision reads
// is a threshold, an allowlist, a deny-list or a table: when it is missing
// the decision must refuse, never widen what it allows.
var missingDataAllowed = map[string]string{
	"enforcement": "absent means every rule is enforced (deny)",
}

// TestMissingPolicyDataDenies removes, one at a time, every path of
// data.sandgate.config that an entrypoint's modules read (the constant
// prefix of each reference, and each of its parents) and decides that
// entrypoint's allowed fixtures again: at least one must now be refused (a
// deny, an undefined decision or an evaluation error all refuse), unless
// missingDataAllowed says why not. A reviewer who deletes or misspells a
// key of data.json never opens what the key guarded. A read under a key that
// varies per request (profiles[input.sandbox.profile]) is followed only to
// its constant prefix (profiles); the Rego tests cover the keys under it.
func TestMissingPolicyDataDenies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := loadBundle(bundleFiles, false)
	if err != nil {
		t.Fatal(err)
	}
	compiler := ast.NewCompiler().WithCapabilities(capabilities()).WithDefaultRegoVersion(ast.RegoV1)
	modules := make(map[string]*ast.Module, len(b.Modules))
	for _, m := range b.Modules {
		modules[m.Path] = m.Parsed
	}
	if compiler.Compile(modules); compiler.Failed() {
		t.Fatal(compiler.Errors)
	}
	fixtures := loadFixtures(t)
	var mu sync.Mutex
	walked := map[string]bool{}
	t.Cleanup(func() { // after every entrypoint's subtest
		for key := range missingDataAllowed {
			if !walked[key] {
				t.Errorf("missingDataAllowed[%q] is read by no decision: remove it", key)
			}
		}
	})
	for _, ep := range Entrypoints {
		t.Run(string(ep), func(t *testing.T) {
			t.Parallel()
			var inputs []ast.Value
			for name, fx := range fixtures {
				if fx.Entrypoint != ep || !fx.Want.Allow {
					continue
				}
				in, err := ParseInputBytes(fx.Input)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				inputs = append(inputs, in)
			}
			if len(inputs) == 0 {
				t.Fatalf("no allowed fixture for %s", ep)
			}
			store := inmem.NewFromObject(b.Data)
			pq, err := rego.New(
				rego.Query(ep.Query()),
				rego.Compiler(compiler),
				rego.Store(store),
				rego.StrictBuiltinErrors(true),
			).PrepareForEval(ctx)
			if err != nil {
				t.Fatal(err)
			}
			paths := configPathsRead(compiler, ep)

			if len(paths) == 0 {
				t.Fatalf("%s reads only %v of policy data: the walk is wrong", ep, paths)
			}
			for _, p := range paths {
				key := strings.Join(p, ".")
				mu.Lock()
				walked[key] = true
				mu.Unlock()
				txn, err := store.NewTransaction(ctx, storage.WriteParams)
				if err != nil {
					t.Fatal(err)
				}
				path := append(storage.Path{"sandgate", "config"}, p...)
				if err := store.Write(ctx, txn, storage.RemoveOp, path, nil); err != nil {
					store.Abort(ctx, txn)
					continue // read under a variable key that data does not hold
				}
				allowed := 0
				for _, in := range inputs {
					rs, err := pq.Eval(ctx, rego.EvalParsedInput(in), rego.EvalTransaction(txn))
					if err == nil && len(rs) == 1 {
						if d, ok := rs[0].Expressions[0].Value.(map[string]any); ok && d["allow"] == true {
							allowed++
						}
					}
				}
				store.Abort(ctx, txn)
				reason, exempt := missingDataAllowed[key]
				switch {
				case allowed == len(inputs) && !exempt:
					t.Errorf("without data.sandgate.config.%s every allowed %s fixture is still allowed: a check that reads it does not fail closed", key, ep)
				case allowed < len(inputs) && exempt:
					t.Errorf("missingDataAllowed[%q] (%s) is stale: without it a fixture is refused", key, reason)
				}
			}
		})
	}
}

// configPathsRead returns the paths under data.sandgate.config that ep's
// decision reads, through every rule and function it depends on (the
// compiler's dependency graph): the constant prefix of every reference, and
// every parent of it, sorted.
func configPathsRead(c *ast.Compiler, ep Entrypoint) [][]string {
	config := ast.MustParseRef("data.sandgate.config")
	// Rules that only name a part of the data (`_cfg := data.sandgate.config`)
	// are read through: a reference to them is a reference to the data.
	aliases := map[string]ast.Ref{}
	// (compiled, the body is `__localN__ = data.sandgate.config`).
	for _, m := range c.Modules {
		for _, rule := range m.Rules {
			if rule.Head.Value == nil || len(rule.Head.Args) > 0 || len(rule.Body) != 1 || !rule.Body[0].IsEquality() {
				continue
			}
			ops := rule.Body[0].Operands()
			if v, ok := ops[1].Value.(ast.Ref); ok && ops[0].Equal(rule.Head.Value) && v.HasPrefix(config) {
				aliases[rule.Ref().String()] = v
			}
		}
	}
	resolve := func(r ast.Ref) ast.Ref {
		for i := len(r); i > 0; i-- {
			if v, ok := aliases[r[:i].String()]; ok {
				return v.Concat(r[i:])
			}
		}
		return r
	}
	seen := map[string][]string{}
	visited := map[*ast.Rule]bool{}
	queue := c.GetRules(ast.MustParseRef(ep.Query()))
	for len(queue) > 0 {
		rule := queue[0]
		queue = queue[1:]
		if visited[rule] {
			continue
		}
		visited[rule] = true
		for dep := range c.Graph.Dependencies(rule) {
			if r, ok := dep.(*ast.Rule); ok {
				queue = append(queue, r)
			}
		}
		ast.WalkRefs(rule, func(r ast.Ref) bool {
			prefix := resolve(r).ConstantPrefix()
			if !prefix.HasPrefix(config) {
				return false
			}
			var p []string
			for _, term := range prefix[len(config):] {
				s, ok := term.Value.(ast.String)
				if !ok {
					break
				}
				p = append(p, string(s))
				seen[strings.Join(p, ".")] = slices.Clone(p)
			}
			return false
		})
	}
	out := make([][]string, 0, len(seen))
	for _, p := range seen {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b []string) int { return strings.Compare(strings.Join(a, "."), strings.Join(b, ".")) })
	return out
}
