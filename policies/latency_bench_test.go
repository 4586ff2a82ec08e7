package policies

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"sandgate/policies/policytest"
)

// baselineBundle is the bundle revision the decision latency targets are
// measured against (docs/benchmarks.md, "Decision latency"): revision
// 2026-12-01.4, built from policies/ at commit 3525052 with
// `go tool opa build -b policies/ --ignore '*_test.rego'`. Keep it: a
// figure against the current bundle means nothing without the baseline
// beside it in the same run.
const baselineBundle = "testdata/baseline-2026-12-01.4.tar.gz"

// latencyEntrypoints are the per-request decisions whose latency matters.
var latencyEntrypoints = []Entrypoint{Authz, Admission}

// BenchmarkDecisionLatency evaluates every decision fixture of authz and
// admission (test/testdata/policy) under the baseline revision and the
// current bundle, in the same run, on the same parsed inputs:
//
//	<entrypoint>/<fixture>/bundle=<baseline|current>  ns/op of one fixture
//	<entrypoint>/mix/bundle=<baseline|current>        every fixture in turn, with p50-ns and p99-ns
//
// Compare the columns with benchstat:
//
//	go test -run '^$' -bench DecisionLatency -count 10 ./policies/ > lat.txt
//	go tool benchstat -col /bundle lat.txt
func BenchmarkDecisionLatency(b *testing.B) {
	engines := []struct {
		name string
		e    *Engine
	}{{"baseline", baselineEngine(b)}, {"current", benchEngine(b)}}
	fixtures := loadFixtures(b)
	names := make([]string, 0, len(fixtures))
	for name := range fixtures {
		names = append(names, name)
	}
	slices.Sort(names)
	ctx := context.Background()
	for _, ep := range latencyEntrypoints {
		b.Run(string(ep), func(b *testing.B) {
			var inputs []ast.Value
			var cases, files []string
			for _, name := range names {
				fx := fixtures[name]
				if fx.Entrypoint != ep {
					continue
				}
				in, err := ParseInputBytes(fx.Input)
				if err != nil {
					b.Fatalf("%s: %v", name, err)
				}
				inputs = append(inputs, in)
				files = append(files, name)
				cases = append(cases, strings.TrimSuffix(strings.TrimPrefix(name, string(ep)+"-"), ".json"))
			}
			for i, in := range inputs {
				b.Run(cases[i], func(b *testing.B) {
					for _, eng := range engines {
						// Each bundle must decide the fixture as the fixture
						// says (the baseline as it did then): a benchmark of an
						// input denied for another reason measures nothing
						// anybody runs.
						want := fixtures[files[i]].Want.Allow
						if _, changed := baselineChanged[files[i]]; changed && eng.name == "baseline" {
							want = !want
						}
						b.Run("bundle="+eng.name, func(b *testing.B) {
							b.ReportAllocs()
							for b.Loop() {
								d, err := eng.e.Decide(ctx, ep, in)
								if err != nil {
									b.Fatal(err)
								}
								if d.Allow != want {
									b.Fatalf("%s: allow = %t, the fixture wants %t: %+v", files[i], d.Allow, want, d.Violations)
								}
							}
						})
					}
				})
			}
			b.Run("mix", func(b *testing.B) {
				for _, eng := range engines {
					b.Run("bundle="+eng.name, func(b *testing.B) {
						durations := make([]time.Duration, 0, b.N)
						b.ReportAllocs()
						i := 0
						for b.Loop() {
							start := time.Now()
							if _, err := eng.e.Decide(ctx, ep, inputs[i%len(inputs)]); err != nil {
								b.Fatal(err)
							}
							durations = append(durations, time.Since(start))
							i++
						}
						slices.Sort(durations)
						b.ReportMetric(float64(percentile(durations, 50)), "p50-ns")
						b.ReportMetric(float64(percentile(durations, 99)), "p99-ns")
					})
				}
			})
		})
	}
}

// baselineChanged lists the fixtures whose expectation changed since the
// baseline revision, with the revision and the reason: the baseline decides
// them otherwise, and must still do so (an entry it now agrees with is
// stale).
var baselineChanged = map[string]string{
	"authz-exec-workdir-dotdot-denied.json":            "2026-12-02.5: E1 confines exec's workdir (normalised, under exec.workdir_roots)",
	"authz-exec-workdir-prefix-not-a-root-denied.json": "2026-12-02.5: E1 confines exec's workdir (normalised, under exec.workdir_roots)",
	"authz-session-files-put-allowed.json":             "2026-12-02.6: the files routes (F1, F2) did not exist",
	"authz-session-files-read-window-allowed.json":     "2026-12-02.7: the files routes (F1, F2) did not exist",
}

// TestTheBaselineBundleStillDecidesTheFixtures keeps the latency baseline
// honest: it is the revision it says it is and decides every authz and
// admission fixture as the fixture says it did then (fixtures whose
// expectation changed since are listed in baselineChanged).
func TestTheBaselineBundleStillDecidesTheFixtures(t *testing.T) {
	t.Parallel()
	e := baselineEngine(t)
	if got := e.Revision(); got != "2026-12-01.4" {
		t.Fatalf("baseline revision = %q, want 2026-12-01.4", got)
	}
	for name, fx := range loadFixtures(t) {
		if !slices.Contains(latencyEntrypoints, fx.Entrypoint) {
			continue
		}
		in, err := ParseInputBytes(fx.Input)
		if err != nil {
			t.Fatal(err)
		}
		d, err := e.Decide(context.Background(), fx.Entrypoint, in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		reason, changed := baselineChanged[name]
		switch {
		case changed && d.Allow == fx.Want.Allow:
			t.Errorf("baselineChanged[%q] (%s) is stale: the baseline decides it as the fixture wants", name, reason)
		case !changed && d.Allow != fx.Want.Allow:
			t.Errorf("%s: baseline allow = %v, fixture wants %v", name, d.Allow, fx.Want.Allow)
		}
	}
}

// percentile returns the p-th percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	return sorted[max(i-1, 0)]
}

// baselineEngine loads baselineBundle into an engine.
func baselineEngine(t testing.TB) *Engine {
	t.Helper()
	dir := t.TempDir()
	if err := untar(baselineBundle, dir); err != nil {
		t.Fatal(err)
	}
	if err := addNewerSettings(filepath.Join(dir, "data.json")); err != nil {
		t.Fatal(err)
	}
	e, err := New(context.Background(), Config{Dir: dir})
	if err != nil {
		t.Fatalf("baseline bundle: %v", err)
	}
	return e
}

// newerSettings are the sections of data.sandgate.config that the Go side
// requires since the baseline was frozen; the baseline's rules never read
// them, so copying the current ones in changes none of its decisions.
var newerSettings = []string{"files", "rate_limits"}

// addNewerSettings copies newerSettings from the current bundle's data into
// the baseline's data file, where they are missing.
func addNewerSettings(file string) error {
	var base, cur map[string]any
	for f, v := range map[string]*map[string]any{file: &base, "data.json": &cur} {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, v); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	config := func(m map[string]any) map[string]any {
		sg, _ := m["sandgate"].(map[string]any)
		c, _ := sg["config"].(map[string]any)
		return c
	}
	bc, cc := config(base), config(cur)
	if bc == nil || cc == nil {
		return errors.New("data.json without data.sandgate.config")
	}
	for _, k := range newerSettings {
		if _, ok := bc[k]; !ok {
			bc[k] = cc[k]
		}
	}
	b, err := json.Marshal(base)
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o600)
}

// untar extracts the regular files of a gzipped tarball (an `opa build`
// bundle) into dir.
func untar(file, dir string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(filepath.Clean("/"+h.Name), "/")))
		if err := os.MkdirAll(filepath.Dir(name), 0o750); err != nil {
			return err
		}
		out, err := os.Create(name)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, io.LimitReader(tr, 1<<20)); err != nil {
			_ = out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
	}
}

// BenchmarkReload is one hot reload of the full bundle from a directory,
// as SIGHUP or a file change runs it: load, compile, the bundle's own Rego
// tests in process (all of them), prepare every entrypoint, swap.
//
// In the once-through run CI makes of every benchmark (-benchtime 1x) the
// bundle carries one small test per entrypoint instead of all of them:
// the same reload, without minutes of Rego tests under -race that
// TestTheEmbeddedBundlesTestsPassInProcess runs anyway.
func BenchmarkReload(b *testing.B) {
	e := newEngine(b)
	dir := policytest.Copy(b, bundleFiles, nil)
	if benchOnce() {
		dir = policytest.CopyWithSmallTests(b, bundleFiles, EntrypointNames())
	}
	ctx := context.Background()
	for b.Loop() {
		if err := e.Reload(ctx, Config{Dir: dir}); err != nil {
			b.Fatal(err)
		}
	}
}
