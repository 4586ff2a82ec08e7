package nomad

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Ops names every operation the Client reports to Observe: each Op
// constant of the package is in it once, so the gateway's metric series
// for it exist from the start.
func TestOpsListsEveryOperation(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	decl := regexp.MustCompile(`(?m)^\s*(?:const )?(Op[A-Z]\w*)\s*=\s*"([a-z_]+)"`)
	var values []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			values = append(values, m[2])
		}
	}
	ops := Ops()
	slices.Sort(values)
	got := slices.Clone(ops)
	slices.Sort(got)
	if len(values) < 10 || !slices.Equal(got, values) {
		t.Fatalf("Ops() = %v, the Op constants are %v", got, values)
	}
}
