package test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	pathpkg "path"
	"slices"
	"strings"
	"testing"
)

// sandgate may use Nomad's api module only: github.com/hashicorp/nomad itself
// is not open source from v1.7 on (docs/architecture.md, "Import rules"). depguard keeps the leaf
// packages' imports in line; this holds the whole module's dependency graph.
func TestNoPackageOfNomadItselfIsLinked(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-test", "sandgate/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var sawAPI bool
	for _, pkg := range strings.Fields(string(out)) {
		switch {
		case pkg == "github.com/hashicorp/nomad/api" || strings.HasPrefix(pkg, "github.com/hashicorp/nomad/api/"):
			sawAPI = true
		case strings.HasPrefix(pkg, "github.com/hashicorp/nomad/") || pkg == "github.com/hashicorp/nomad":
			t.Errorf("%s is linked: only github.com/hashicorp/nomad/api may be", pkg)
		}
	}
	if !sawAPI {
		t.Fatal("github.com/hashicorp/nomad/api is not in the graph: the check looked at the wrong list")
	}
}

// policies imports only OPA and the standard library, render only Nomad's api
// module (docs/architecture.md): the policy never reaches out, the renderer
// stays pure. render/isolation, gateway/wire and internal/clip import the
// standard library only, and gateway/client besides only gateway/wire: the
// script renderer is pure, programs outside sandgate import the client and
// the wire types, and every package may clip text.
func TestLeafPackagesImportNoSibling(t *testing.T) {
	t.Parallel()
	for pkg, allowed := range map[string][]string{
		"sandgate/policies":         {"github.com/open-policy-agent/opa/"},
		"sandgate/render":           {"github.com/hashicorp/nomad/api"},
		"sandgate/render/isolation": {},
		"sandgate/gateway/client":   {"sandgate/gateway/wire"},
		"sandgate/gateway/wire":     {},
		"sandgate/internal/clip":    {},
	} {
		out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, pkg).CombinedOutput() //nolint:gosec // pkg is one of the literals above
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		for _, imp := range strings.Fields(string(out)) {
			if !strings.Contains(imp, ".") && imp != "sandgate" && !strings.HasPrefix(imp, "sandgate/") {
				continue // the standard library
			}
			ok := false
			for _, a := range allowed {
				ok = ok || strings.HasPrefix(imp, a)
			}
			if !ok {
				t.Errorf("%s imports %s", pkg, imp)
			}
		}
	}
}

// The gateway and the client share the wire types (gateway/wire), never
// each other: the gateway's code links no client, so the client is only
// ever a caller of the API.
func TestTheGatewayLinksNoClient(t *testing.T) {
	t.Parallel()
	for _, dep := range goList(t, "{{join .Deps \"\\n\"}}", "sandgate/gateway") {
		if dep == "sandgate/gateway/client" {
			t.Errorf("sandgate/gateway links %s", dep)
		}
	}
}

// jobspec is where policy data becomes a sandbox spec, a Nomad job and the
// admission input; the gateway, the CLI and the escape audit share it, so
// it imports no HTTP code and no store: of the standard library not
// net/http, and besides it only policies, render and Nomad's api module.
// Nothing it links reaches the gateway, the store or Echo. The escape
// audit builds its inputs with jobspec, never through the gateway.
func TestJobSpecImportsNoHTTPCode(t *testing.T) {
	t.Parallel()
	denied := func(imp string) bool {
		return imp == "net/http" || strings.HasPrefix(imp, "net/http/") ||
			strings.HasPrefix(imp, "github.com/labstack/echo") ||
			imp == "sandgate/gateway" || strings.HasPrefix(imp, "sandgate/gateway/") ||
			imp == "sandgate/store" || strings.HasPrefix(imp, "sandgate/store/")
	}
	for _, imp := range goList(t, "{{join .Imports \"\\n\"}}", "sandgate/jobspec") {
		std := !strings.Contains(imp, ".") && imp != "sandgate" && !strings.HasPrefix(imp, "sandgate/")
		allowed := imp == "sandgate/policies" || imp == "sandgate/render" || strings.HasPrefix(imp, "sandgate/render/") ||
			imp == "github.com/hashicorp/nomad/api"
		if denied(imp) || (!std && !allowed) {
			t.Errorf("sandgate/jobspec imports %s", imp)
		}
	}
	for _, pkg := range []string{"sandgate/jobspec", "sandgate/gateway/escape"} {
		for _, dep := range goList(t, "{{join .Deps \"\\n\"}}", pkg) {
			if dep != pkg && denied(dep) && !strings.HasPrefix(dep, "net/http") {
				t.Errorf("%s links %s", pkg, dep)
			}
		}
	}
}

// gateway/assemble is the one composition root: the binary and the
// in-process gateway of the tests both build through it, so nothing it
// links is the command or test code, and the gateway it builds never
// links it back.
func TestTheCompositionRootLinksNoCommandAndNoTestCode(t *testing.T) {
	t.Parallel()
	const root = "sandgate/gateway/assemble"
	deps := goList(t, "{{join .Deps \"\\n\"}}", root)
	if !slices.Contains(deps, "sandgate/gateway") {
		t.Fatalf("sandgate/gateway is not among %s's dependencies: the check looked at the wrong list", root)
	}
	for _, dep := range deps {
		if strings.HasPrefix(dep, "sandgate/cmd/") || dep == "sandgate/test" || strings.HasPrefix(dep, "sandgate/test/") ||
			dep == "sandgate/gateway/gatewaytest" {
			t.Errorf("%s links %s", root, dep)
		}
	}
	for _, imp := range goList(t, "{{join .Imports \"\\n\"}}", root) {
		if imp == "testing" || strings.HasPrefix(imp, "testing/") || imp == "net/http/httptest" {
			t.Errorf("%s imports %s", root, imp)
		}
	}
	for _, dep := range goList(t, "{{join .Deps \"\\n\"}}", "sandgate/gateway") {
		if dep == root {
			t.Errorf("sandgate/gateway links %s", root)
		}
	}
	// Both builders go through it.
	for _, pkg := range []string{"sandgate/cmd/sandgate", "sandgate/gateway/gatewaytest"} {
		if !slices.Contains(goList(t, "{{join .Imports \"\\n\"}}", pkg), root) {
			t.Errorf("%s does not build the gateway through %s", pkg, root)
		}
	}
}

// goList is `go list -f format pkg`, one field per line.
func goList(t *testing.T, format, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", format, pkg).CombinedOutput() //nolint:gosec // format and pkg are literals of the tests
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pkg, err, out)
	}
	return strings.Fields(string(out))
}

// nodefacts is what the policy is told about a node (Nomad's view, the
// enrollment record, usage, room and the budget in force, B1): it reads
// the Nomad client's and the store's types and the policy's, never the
// gateway's.
func TestNodeFactsImportsOnlyNomadStoreAndPolicies(t *testing.T) {
	t.Parallel()
	for _, imp := range goList(t, "{{join .Imports \"\\n\"}}", "sandgate/nodefacts") {
		if strings.Contains(imp, ".") || strings.HasPrefix(imp, "sandgate") {
			if imp != "sandgate/nomad" && imp != "sandgate/store" && imp != "sandgate/policies" {
				t.Errorf("sandgate/nodefacts imports %s", imp)
			}
		}
	}
}

// Nothing reaches into the gateway for the job spec: a file that builds
// a spec, a job or an admission input (it imports jobspec or nodefacts)
// takes them from there and imports no sandgate/gateway, outside the
// gateway package itself.
func TestNothingReachesIntoTheGatewayForTheJobSpec(t *testing.T) {
	t.Parallel()
	files := 0
	walkRepo(t, func(path string, _ fs.DirEntry) bool {
		// Fixtures under testdata and the tool module are not the project's
		// packages.
		return strings.HasSuffix(path, ".go") && pathpkg.Dir(path) != "gateway" &&
			!strings.HasPrefix(path, "tools/") && !strings.Contains(path, "/testdata/")
	}, func(path string, src []byte) {
		f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ImportsOnly)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			return
		}
		files++
		var spec, gw bool
		for _, imp := range f.Imports {
			switch strings.Trim(imp.Path.Value, `"`) {
			case "sandgate/jobspec", "sandgate/nodefacts":
				spec = true
			case "sandgate/gateway":
				gw = true
			}
		}
		if spec && gw {
			t.Errorf("%s imports sandgate/gateway beside the job spec", path)
		}
	})
	if files < 100 {
		t.Fatalf("read %d Go files: the walk started in the wrong place", files)
	}
}
