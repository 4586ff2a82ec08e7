package test

import (
	"os/exec"
	"strings"
	"testing"
)

// sandgate may use Nomad's api module only: github.com/hashicorp/nomad itself
// is not open source from v1.7 on (SPEC "Stack"). depguard keeps the leaf
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
// module (STYLE.md): the policy never reaches out, the renderer stays pure.
// render/isolation and gateway/client import the standard library only: the
// script renderer is pure, and programs outside sandgate import the client.
func TestLeafPackagesImportNoSibling(t *testing.T) {
	t.Parallel()
	for pkg, allowed := range map[string][]string{
		"sandgate/policies":         {"github.com/open-policy-agent/opa/"},
		"sandgate/render":           {"github.com/hashicorp/nomad/api"},
		"sandgate/render/isolation": {},
		"sandgate/gateway/client":   {},
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
