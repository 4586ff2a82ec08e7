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
// module that does not import notKeyword, a module that names policy
// data other than as cfg, and a violation whose message is not written
// the one way (messageForm).
func lintModules(modules map[string]*ast.Module) []string {
	var problems []string
	definedIn := map[string]map[string]bool{} // package.rule -> files
	usedHelpers := map[string]string{}        // wording helper -> where a violation uses it
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
		msgProblems, helpers := messageForms(file, m)
		problems = append(problems, msgProblems...)
		maps.Copy(usedHelpers, helpers)
		for _, r := range m.Rules {
			name := m.Package.Path.String() + "." + r.Head.Ref().String()
			if definedIn[name] == nil {
				definedIn[name] = map[string]bool{}
			}
			definedIn[name][file] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(usedHelpers)) {
		if definedIn[name] == nil {
			problems = append(problems, fmt.Sprintf("%s: the wording helper %s is not a rule of the package", usedHelpers[name], strings.TrimPrefix(name, "data.")))
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

// messageForms reports each `violations` rule of m whose head is not the
// one form a deny is written in (docs/policies.md, "How a rule words its
// message"): an object of exactly the keys "rule" and "msg", "rule" the
// string literal of the rule's METADATA custom.id, and "msg"
//
//   - a string literal, when the message carries no value;
//   - a sprintf call whose format is a string literal, when it does;
//   - a wording helper, a rule of the package named _<something>_msg (a
//     reference or a call): only where one cause would otherwise produce
//     several lines, and docs/policies.md says where.
//
// Anything else is refused: concat (the message is no longer readable in
// the head), a variable bound in the body (`some msg in _h1`, `msg :=`),
// or a helper not named as a wording helper.
func messageForms(file string, m *ast.Module) (problems []string, helpers map[string]string) {
	helpers = map[string]string{} // package.rule -> where it is used
	for _, r := range m.Rules {
		if ref := r.Head.Ref(); len(ref) != 1 || ref[0].Value.Compare(denyRuleName) != 0 {
			continue
		}
		at := fmt.Sprintf("%s:%d", file, r.Location.Row)
		var obj ast.Object
		if r.Head.Key != nil {
			obj, _ = r.Head.Key.Value.(ast.Object)
		}
		if obj == nil || obj.Len() != 2 || obj.Get(ast.StringTerm("rule")) == nil || obj.Get(ast.StringTerm("msg")) == nil {
			problems = append(problems, at+`: a violation must be an object of exactly "rule" and "msg"`)
			continue
		}
		id, ok := obj.Get(ast.StringTerm("rule")).Value.(ast.String)
		switch {
		case !ok:
			problems = append(problems, at+`: "rule" must be a string literal`)
		case len(r.Annotations) != 1 || r.Annotations[0].Custom["id"] != string(id):
			problems = append(problems, fmt.Sprintf("%s: \"rule\" %s is not the custom.id of the rule's METADATA", at, id))
		}
		msg := obj.Get(ast.StringTerm("msg"))
		if !messageForm(msg) {
			problems = append(problems, fmt.Sprintf("%s: \"msg\" %v must be a string literal, a sprintf with a literal format or a _..._msg wording helper", at, msg))
			continue
		}
		if call, ok := msg.Value.(ast.Call); ok {
			msg = call[0]
		}
		if name, ok := helperName(msg); ok && wordingHelper(msg) {
			helpers[m.Package.Path.String()+"."+name] = at
		}
	}
	return problems, helpers
}

// messageForm: t is a string literal, sprintf("<literal>", [...]), or a
// wording helper `_x_msg` / `_x_msg(...)`.
func messageForm(t *ast.Term) bool {
	switch v := t.Value.(type) {
	case ast.String:
		return true
	case ast.Call:
		if op, ok := v[0].Value.(ast.Ref); ok && op.Equal(sprintfRef) {
			if len(v) != 3 {
				return false
			}
			_, literal := v[1].Value.(ast.String)
			_, array := v[2].Value.(*ast.Array)
			return literal && array
		}
		return wordingHelper(v[0])
	case ast.Var, ast.Ref:
		return wordingHelper(t)
	}
	return false
}

var sprintfRef = ast.Ref{ast.VarTerm("sprintf")}

// wordingHelper: a reference to a rule named _<x>_msg (lintModules checks
// that the package defines it).
func wordingHelper(t *ast.Term) bool {
	name, ok := helperName(t)
	return ok && len(name) > len("__msg") && strings.HasPrefix(name, "_") && strings.HasSuffix(name, "_msg")
}

// helperName is the name t refers to when it is a bare name (`_x`, which
// the parser keeps as a variable in a head, or a one-element reference).
func helperName(t *ast.Term) (string, bool) {
	switch v := t.Value.(type) {
	case ast.Var:
		return string(v), true
	case ast.Ref:
		if len(v) == 1 {
			if name, ok := v[0].Value.(ast.Var); ok {
				return string(name), true
			}
		}
	}
	return "", false
}

// multiFileRule: violations is the one partial set an entrypoint's
// package collects from every module (each adds its own rules' entries).
func multiFileRule(name string) bool { return strings.HasSuffix(name, ".violations") }

func parsedModules(t *testing.T, files map[string]string) map[string]*ast.Module {
	t.Helper()
	out := map[string]*ast.Module{}
	for name, src := range files {
		m, err := ast.ParseModuleWithOpts(name, src, ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
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
// _at_or_under once was, unguarded beside a guarded copy), a module
// with the classic not, policy data under another name, and a violation
// whose message is not written the one way (concat, a variable bound in
// the body, a helper not named as a wording helper, a third key, a rule id
// that is not its METADATA's).
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
		{"a message built with concat", "authz/extra.rego",
			extraViolation(`concat("", ["route ", input.request.route, " is odd"])`),
			`authz/extra.rego:11: "msg" concat("", ["route ", input.request.route, " is odd"]) must be a string literal, a sprintf`},
		{"a message bound in the body", "authz/extra.rego",
			extraViolation("msg") + "\n_x1 contains \"odd\" if input.x\n",
			`authz/extra.rego:11: "msg" msg must be`},
		{"a message worded by a helper not named as one", "authz/extra.rego",
			extraViolation("_odd") + "\n_odd := \"odd\"\n",
			`authz/extra.rego:11: "msg" _odd must be`},
		{"a violation with a third key", "authz/extra.rego",
			strings.Replace(extraViolation(`"odd"`), `"msg": "odd"`, `"msg": "odd", "severity": "low"`, 1),
			`authz/extra.rego:11: a violation must be an object of exactly "rule" and "msg"`},
		{"a rule id that is not the METADATA's", "authz/extra.rego",
			strings.Replace(extraViolation(`"odd"`), `"rule": "X1"`, `"rule": "X2"`, 1),
			`authz/extra.rego:11: "rule" "X2" is not the custom.id`},
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
	// violations is collected from every module of a package: not a
	// duplicate. Each of the message forms passes.
	modules := maps.Clone(base)
	maps.Copy(modules, parsedModules(t, map[string]string{
		"authz/more.rego":  extraViolation(`"route is odd"`),
		"authz/more2.rego": extraViolation(`sprintf("route %v is odd", [input.request.route])`),
		"authz/more3.rego": extraViolation("_odd_msg") + "\n_odd_msg := \"odd\"\n",
	}))
	if problems := lintModules(modules); len(problems) != 0 {
		t.Errorf("modules adding to violations: %q", problems)
	}
}

// extraViolation is a module of the authz package adding one violation of
// rule X1 whose message is msg (line 11 of the module).
func extraViolation(msg string) string {
	return `package sandgate.authz

import future.keywords.not

# METADATA
# title: Odd
# description: Odd.
# custom:
#   id: X1
#   severity: low
violations contains {"rule": "X1", "msg": ` + msg + `} if {
	input.x
}
`
}
