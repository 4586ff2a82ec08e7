package policies

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// fixtureDir holds the JSON decision fixtures. They live outside the Rego
// tree: `opa test` would load them as data.
const fixtureDir = "../test/testdata/policy"

// decisionFixture is one input document with the decision it must get.
type decisionFixture struct {
	Name       string          `json:"name"`
	Entrypoint Entrypoint      `json:"entrypoint"`
	Input      json.RawMessage `json:"input"`
	Want       struct {
		Allow bool     `json:"allow"`
		Rules []string `json:"rules"`
	} `json:"want"`
}

func loadFixtures(t testing.TB) map[string]decisionFixture {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(fixtureDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in %s: %v", fixtureDir, err)
	}
	out := make(map[string]decisionFixture, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var fx decisionFixture
		if err := json.Unmarshal(b, &fx); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = fx
	}
	return out
}

func TestDecisionFixtures(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	for file, fx := range loadFixtures(t) {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			in, err := ParseInputBytes(fx.Input)
			if err != nil {
				t.Fatal(err)
			}
			d, err := e.Decide(context.Background(), fx.Entrypoint, in)
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(fx.Want.Rules)
			slices.Sort(want)
			if d.Allow != fx.Want.Allow || !slices.Equal(d.RuleIDs(), want) {
				t.Fatalf("%s: allow=%t rules=%v, want allow=%t rules=%v\n%+v", fx.Name, d.Allow, d.RuleIDs(), fx.Want.Allow, want, d.Violations)
			}
		})
	}
}
