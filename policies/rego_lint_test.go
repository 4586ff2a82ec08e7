package policies

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// notKeyword is the one meaning of `not` every module of the bundle
// chooses: OPA's newer not, under which `not f(input.x)` holds when
// input.x is missing (docs/policies.md, "One meaning of not").
var notKeyword = ast.MustParseRef("future.keywords.not")

// lintModules reports what the bundle's own lint refuses: a rule or
// function name defined in more than one module of a package (OPA merges
// them into one rule whose bodies are read as alternatives, so a guard
// written in one file is moot beside an unguarded body in another), a
// module that does not import notKeyword, and a module that names policy
// data other than as cfg.
func lintModules(modules map[string]*ast.Module) []string {
	var problems []string
	definedIn := map[string]map[string]bool{} // package.rule -> files
	for _, file := range slices.Sorted(maps.Keys(modules)) {
		m := modules[file]
		if !slices.ContainsFunc(m.Imports, func(imp *ast.Import) bool {
			r, ok := imp.Path.Value.(ast.Ref)
			return ok && r.Equal(notKeyword)
		}) {
			problems = append(problems, fmt.Sprintf("%s does not import %s", file, notKeyword))
		}
		if !strings.HasSuffix(file, "_test.rego") {
			problems = append(problems, policyDataNaming(file, m)...)
		}
		for _, r := range m.Rules {
			name := m.Package.Path.String() + "." + r.Head.Ref().String()
			if definedIn[name] == nil {
				definedIn[name] = map[string]bool{}
			}
			definedIn[name][file] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(definedIn)) {
		if files := definedIn[name]; len(files) > 1 && !multiFileRule(name) {
			problems = append(problems, fmt.Sprintf("%s is defined in %s", strings.TrimPrefix(name, "data."), strings.Join(slices.Sorted(maps.Keys(files)), ", ")))
		}
	}
	return problems
}

// policyData is the document of policy data; modules read it through one
// name, `import data.sandgate.config as cfg`.
var policyData = ast.MustParseRef("data.sandgate.config")

// policyDataNaming reports a module that names policy data another way:
// data.sandgate.config spelled out in a rule, or imported under another
// alias. (Tests spell it out in `with` and stay exempt.)
func policyDataNaming(file string, m *ast.Module) []string {
	var problems []string
	for _, imp := range m.Imports {
		if r, ok := imp.Path.Value.(ast.Ref); ok && r.Equal(policyData) && imp.Alias != "cfg" {
			problems = append(problems, fmt.Sprintf("%s imports %s as %q, not cfg", file, policyData, imp.Alias))
		}
	}
	spelled := false
	for _, r := range m.Rules {
		ast.WalkRefs(r, func(ref ast.Ref) bool {
			if ref.HasPrefix(policyData) {
				spelled = true
			}
			return spelled
		})
	}
	if spelled {
		problems = append(problems, fmt.Sprintf("%s spells out %s in a rule: import it as cfg", file, policyData))
	}
	return problems
}

// multiFileRule: violations is the one partial set an entrypoint's
// package collects from every module (each adds its own rules' entries).
func multiFileRule(name string) bool { return strings.HasSuffix(name, ".violations") }

func parsedModules(t *testing.T, files map[string]string) map[string]*ast.Module {
	t.Helper()
	out := map[string]*ast.Module{}
	for name, src := range files {
		m, err := ast.ParseModuleWithOpts(name, src, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			t.Fatal(err)
		}
		out[name] = m
	}
	return out
}

// TestTheBundlePassesItsOwnLint: Regal cannot be installed here; this is
// the project's lint for what matters most.
func TestTheBundlePassesItsOwnLint(t *testing.T) {
	t.Parallel()
	b, err := loadBundle(bundleFiles, true) // the tests too: one meaning of not in every file
	if err != nil {
		t.Fatal(err)
	}
	modules := map[string]*ast.Module{}
	for _, m := range b.Modules {
		modules[m.Path] = m.Parsed
	}
	for _, p := range lintModules(modules) {
		t.Error(p)
	}
}

// The lint fails on a copy of the bundle with the defect it exists for:
// a predicate defined again in another module of its package (as
// _at_or_under once was, unguarded beside a guarded copy), and a module
// with the classic not.
func TestTheBundleLintCatchesADuplicateAndAMissingNot(t *testing.T) {
	t.Parallel()
	b, err := loadBundle(bundleFiles, true)
	if err != nil {
		t.Fatal(err)
	}
	base := map[string]*ast.Module{}
	for _, m := range b.Modules {
		base[m.Path] = m.Parsed
	}
	cases := []struct {
		name, file, src, want string
	}{
		{"a predicate defined in a second module of its package", "authz/extra.rego",
			"package sandgate.authz\n\nimport future.keywords.not\n\n_under_a_workdir_root(w) if startswith(w, \"/\")\n",
			"sandgate.authz._under_a_workdir_root is defined in authz/extra.rego, authz/sandboxes.rego"},
		{"a module with the classic not", "hosts/extra.rego",
			"package sandgate.hosts\n\n_extra if not is_number(input.x)\n",
			"hosts/extra.rego does not import future.keywords"},
		{"a module spelling out policy data", "lifecycle/extra.rego",
			"package sandgate.lifecycle\n\nimport future.keywords.not\n\n_extra := data.sandgate.config.prefix\n",
			"lifecycle/extra.rego spells out data.sandgate.config"},
		{"a module importing policy data under another name", "reclaim/extra.rego",
			"package sandgate.reclaim\n\nimport data.sandgate.config as conf\nimport future.keywords.not\n\n_extra := conf.prefix\n",
			"reclaim/extra.rego imports data.sandgate.config as \"conf\""},
		{"a test module with the classic not", "lib/extra_test.rego",
			"package sandgate.lib.paths_test\n\ntest_x if not false\n",
			"lib/extra_test.rego does not import future.keywords"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			modules := maps.Clone(base)
			maps.Copy(modules, parsedModules(t, map[string]string{c.file: c.src}))
			problems := lintModules(modules)
			if len(problems) != 1 || !strings.Contains(problems[0], c.want) {
				t.Fatalf("lint said %q, want one problem with %q", problems, c.want)
			}
		})
	}
	// violations is collected from every module of a package: not a duplicate.
	modules := maps.Clone(base)
	maps.Copy(modules, parsedModules(t, map[string]string{"authz/more.rego": "package sandgate.authz\n\nimport future.keywords.not\n\nviolations contains {\"rule\": \"X1\", \"msg\": \"m\"} if input.x\n"}))
	if problems := lintModules(modules); len(problems) != 0 {
		t.Errorf("a module adding to violations: %q", problems)
	}
}
