package policies

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"sandgate/policies/policytest"
)

// newEngine compiles the embedded bundle once per test.
func newEngine(t testing.TB) *Engine {
	t.Helper()
	e, err := New(context.Background(), Config{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

// copyBundle writes the embedded bundle to a temp dir and returns the dir.
func copyBundle(t *testing.T) string { return policytest.Copy(t, bundleFiles, nil) }

// copyBundleWithSmallTests is copyBundle with each entrypoint's Rego tests
// replaced by one small test of its own (an empty input is denied). Reload
// runs a bundle's tests before it swaps; with the bundle's 585 tests under
// -race each reload costs about a minute, and the reload tests are about the
// swap, not about those tests, which TestTheEmbeddedBundlesTestsPassInProcess
// and `opa test` run in full.
func copyBundleWithSmallTests(t *testing.T) string {
	eps := make([]string, len(Entrypoints))
	for i, ep := range Entrypoints {
		eps[i] = string(ep)
	}
	return policytest.CopyWithSmallTests(t, bundleFiles, eps)
}

// smallTest is one Rego test of entrypoint ep that passes on the embedded
// bundle: an empty input is denied.
func smallTest(ep Entrypoint) string { return policytest.SmallTest(string(ep)) }

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil { //nolint:gosec // the tests write only into their own t.TempDir()
		t.Fatal(err)
	}
}

// setRevision rewrites the revision in a copied bundle's manifest.
func setRevision(t *testing.T, dir, rev string) { policytest.SetRevision(t, dir, rev) }

func TestEngineServesTheEmbeddedBundle(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	if e.Revision() == "" {
		t.Fatal("the embedded bundle has no revision")
	}
	if len(e.Rules()) == 0 {
		t.Fatal("the embedded bundle lists no rules")
	}
	if e.Settings().Prefix != "sandgate-sbx-" {
		t.Fatalf("settings prefix = %q", e.Settings().Prefix)
	}
}

func TestEveryRequiredSpecRuleIsAnnotatedInItsEntrypoint(t *testing.T) {
	t.Parallel()
	want := map[Entrypoint][]string{
		Admission: {"INPUT", "P1", "P2", "P3", "B1", "B2", "B3", "R1", "H1", "H2", "H3", "H4", "H5", "H6", "H7", "H8", "H9", "H10", "H11", "I5"},
		Authz:     {"INPUT", "T1", "T2", "T3", "T4", "E1", "E2", "E3", "L2", "H9", "B3", "C1"},
		Lifecycle: {"INPUT", "H9", "L1", "L3", "L4", "B4"},
		Hosts:     {"INPUT", "P2", "I5", "B1", "R2"},
		Reclaim:   {"INPUT", "R2", "R3", "H5"},
		Isolation: {"INPUT", "I1", "I2", "I3", "I4"},
	}
	// Every rule id listed here (docs/policies.md, "Every rule") is a tested
	// Rego rule somewhere.
	spec := []string{"P1", "P2", "P3", "B1", "B2", "B3", "B4", "R1", "R2", "R3", "H1", "H2", "H3", "H4", "H5",
		"H6", "H7", "H8", "H9", "H10", "T1", "T2", "T3", "T4", "E1", "E2", "E3", "L1", "L2", "L3", "L4",
		"I1", "I2", "I3", "I4", "I5", "C1"}
	anywhere := map[string]bool{}
	for _, r := range newEngine(t).Rules() {
		anywhere[r.ID] = true
	}
	for _, id := range spec {
		if !anywhere[id] {
			t.Errorf("SPEC rule %s is not a Rego rule of any entrypoint", id)
		}
	}
	have := map[Entrypoint]map[string]bool{}
	for _, r := range newEngine(t).Rules() {
		if have[r.Entrypoint] == nil {
			have[r.Entrypoint] = map[string]bool{}
		}
		have[r.Entrypoint][r.ID] = true
	}
	for ep, ids := range want {
		for _, id := range ids {
			if !have[ep][id] {
				t.Errorf("entrypoint %s has no rule annotated custom.id %s", ep, id)
			}
		}
	}
}

func TestDecideFailsClosed(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name    string
		ctx     context.Context
		ep      Entrypoint
		input   ast.Value
		wantErr error
	}{
		{"an unknown entrypoint is an error", context.Background(), "nope", ast.NewObject(), ErrUnknownEntrypoint},
		{"a nil input is an error", context.Background(), Authz, nil, ErrNoInput},
		{"a cancelled context is an error even when OPA returns a result", cancelled, Authz, ast.NewObject(), context.Canceled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d, err := e.Decide(c.ctx, c.ep, c.input)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			if d.Allow {
				t.Fatal("a failed decision allowed")
			}
			if d.ID == "" || d.Revision == "" {
				t.Fatalf("a failed decision must still carry its id and revision for the log: %+v", d)
			}
		})
	}
}

func TestAnEmptyInputIsDeniedByEveryEntrypoint(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	for _, ep := range Entrypoints {
		d, err := e.Decide(context.Background(), ep, ast.NewObject())
		if err != nil {
			t.Fatalf("%s: %v", ep, err)
		}
		if d.Allow || len(d.Violations) == 0 {
			t.Fatalf("%s allowed an empty input: %+v", ep, d)
		}
		if !strings.Contains(strings.Join(d.RuleIDs(), ","), "INPUT") {
			t.Errorf("%s: empty input denied without an INPUT violation: %v", ep, d.RuleIDs())
		}
	}
}

func TestBundlesThatMustNotServe(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		edit    func(t *testing.T, dir string)
		wantErr string
		verify  bool
	}{
		{"a Rego syntax error", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "authz", "broken.rego"), "package sandgate.authz\n\nviolations contains if {\n")
		}, "", false},
		{"a denying rule without METADATA", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "authz", "extra.rego"), "package sandgate.authz\n\nviolations contains {\"rule\": \"X1\", \"msg\": \"m\"} if input.x\n")
		}, "METADATA", false},
		{"a denying rule whose head names another id than its annotation", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "authz", "extra.rego"), `package sandgate.authz

# METADATA
# title: t
# description: d
# custom:
#   id: X1
#   severity: low
violations contains {"rule": "X2", "msg": "m"} if input.x
`)
		}, "custom.id", false},
		{"a denying rule with an unknown severity", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "authz", "extra.rego"), `package sandgate.authz

# METADATA
# title: t
# description: d
# custom:
#   id: X1
#   severity: whatever
violations contains {"rule": "X1", "msg": "m"} if input.x
`)
		}, "severity", false},
		{"a package outside the manifest roots", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "authz", "other.rego"), "package elsewhere\n\nx := 1\n")
		}, "", false},
		{"a manifest without a revision", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, ".manifest"), `{"roots": ["sandgate"]}`)
		}, "revision", false},
		{"data without the prefix", func(t *testing.T, dir string) {
			b, err := os.ReadFile(filepath.Join(dir, "data.json"))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, "data.json"), strings.Replace(string(b), `"prefix": "sandgate-sbx-"`, `"prefix": ""`, 1))
		}, "prefix", false},
		// Q1: every role, and the anonymous routes, have a rate limit that
		// admits something; the gateway has no default to fall back on.
		{"data without the session role's rate limit", func(t *testing.T, dir string) {
			editData(t, dir, `"session": {"requests_per_second": 10, "burst": 50},`, ``)
		}, "rate_limits.session", false},
		{"data without the anonymous rate limit", func(t *testing.T, dir string) {
			editData(t, dir, `,
        "anonymous": {"requests_per_second": 20, "burst": 100}`, ``)
		}, "rate_limits.anonymous", false},
		{"a rate limit of zero requests per second", func(t *testing.T, dir string) {
			editData(t, dir, `"agent": {"requests_per_second": 20, "burst": 100}`, `"agent": {"requests_per_second": 0, "burst": 100}`)
		}, "rate_limits.agent", false},
		{"a rate limit with a zero burst", func(t *testing.T, dir string) {
			editData(t, dir, `"operator": {"requests_per_second": 50, "burst": 200}`, `"operator": {"requests_per_second": 50, "burst": 0}`)
		}, "rate_limits.operator", false},
		{"a rate limit with a fractional burst", func(t *testing.T, dir string) {
			editData(t, dir, `"operator": {"requests_per_second": 50, "burst": 200}`, `"operator": {"requests_per_second": 50, "burst": 2.5}`)
		}, "burst", false},
		// F1/E1: a root that is not a normalised absolute path would match
		// nothing (an empty one once matched everything): refused at load.
		{"an empty files root", func(t *testing.T, dir string) {
			editData(t, dir, `"roots": ["/workspace", "/tmp"]`, `"roots": ["", "/workspace", "/tmp"]`)
		}, `files.roots[0] as a normalised absolute path`, false},
		{"a files root with a trailing slash", func(t *testing.T, dir string) {
			editData(t, dir, `"roots": ["/workspace", "/tmp"]`, `"roots": ["/workspace/", "/tmp"]`)
		}, `files.roots[0]`, false},
		{"a relative workdir root", func(t *testing.T, dir string) {
			editData(t, dir, `"workdir_roots": ["/workspace", "/tmp"]`, `"workdir_roots": ["/workspace", "tmp"]`)
		}, `exec.workdir_roots[1]`, false},
		{"a workdir root that climbs", func(t *testing.T, dir string) {
			editData(t, dir, `"workdir_roots": ["/workspace", "/tmp"]`, `"workdir_roots": ["/workspace/..", "/tmp"]`)
		}, `exec.workdir_roots[0]`, false},
		// T2 does not re-check at every request that the roles a route lists
		// are granted its scope: the bundle's tests hold the table and the
		// roles together, and a bundle whose tests fail does not serve.
		{"a route table listing a role its scopes do not grant, when tests are verified", func(t *testing.T, dir string) {
			b, err := os.ReadFile(filepath.Join(dir, "data.json"))
			if err != nil {
				t.Fatal(err)
			}
			hosts := `"/v1/hosts": {"capability": "hosts.v1", "scope": "hosts:read", "roles": ["operator"]}`
			if !strings.Contains(string(b), hosts) {
				t.Fatalf("data.json has no %s", hosts)
			}
			drifted := strings.Replace(hosts, `["operator"]`, `["operator", "agent"]`, 1)
			writeFile(t, filepath.Join(dir, "data.json"), strings.Replace(string(b), hosts, drifted, 1))
			for _, f := range []string{"authz_test.rego", "routes_test.rego"} { // the route table's tests
				src, err := os.ReadFile(filepath.Join("authz", f))
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(dir, "authz", f), string(src))
			}
		}, "tests failed", true},
		{"a failing Rego test, when tests are verified", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "authz", "zz_test.rego"), "package sandgate.authz_test\n\ntest_fails if false\n")
		}, "tests failed", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := copyBundleWithSmallTests(t)
			c.edit(t, dir)
			_, err := New(context.Background(), Config{Dir: dir, VerifyTests: c.verify})
			if err == nil {
				t.Fatal("the bundle was accepted")
			}
			if !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err = %v, want it to mention %q", err, c.wantErr)
			}
		})
	}
}

func TestReloadSwapsOnlyAGoodBundle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEngine(t)
	served := e.Revision()

	bad := copyBundleWithSmallTests(t)
	setRevision(t, bad, "bad-1")
	writeFile(t, filepath.Join(bad, "authz", "zz_test.rego"), "package sandgate.authz_test\n\ntest_fails if false\n")
	if err := e.Reload(ctx, Config{Dir: bad}); !errors.Is(err, ErrBundleTests) {
		t.Fatalf("reload of a bundle whose test fails: err = %v, want ErrBundleTests", err)
	}
	if e.Revision() != served {
		t.Fatalf("a failed reload replaced the serving bundle: %s", e.Revision())
	}

	good := copyBundleWithSmallTests(t)
	setRevision(t, good, "good-2")
	if err := e.Reload(ctx, Config{Dir: good}); err != nil {
		t.Fatalf("reload of a good bundle: %v", err)
	}
	if e.Revision() != "good-2" {
		t.Fatalf("revision after reload = %s, want good-2", e.Revision())
	}
	d, err := e.Decide(ctx, Authz, ast.NewObject())
	if err != nil || d.Revision != "good-2" {
		t.Fatalf("decision after reload: %+v, %v", d, err)
	}
}

func TestDecisionsDuringReloadAlwaysComeFromOneWholeBundle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEngine(t)
	first := e.Revision()
	next := copyBundleWithSmallTests(t)
	setRevision(t, next, "next")
	var (
		wg        sync.WaitGroup
		reloading atomic.Bool
		during    atomic.Int64
	)
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				d, err := e.Decide(ctx, Authz, ast.NewObject())
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allow || (d.Revision != first && d.Revision != "next") {
					t.Errorf("decision during reload: %+v", d)
					return
				}
				if reloading.Load() {
					during.Add(1)
				}
				// Leave the reload (which runs the bundle's tests and
				// compiles it) some CPU: decisions still overlap it.
				time.Sleep(time.Millisecond)
			}
		}()
	}
	reloading.Store(true)
	if err := e.Reload(ctx, Config{Dir: next}); err != nil {
		t.Error(err)
	}
	reloading.Store(false)
	close(stop)
	wg.Wait()
	if during.Load() == 0 {
		t.Fatal("no decision overlapped the reload: the test proved nothing")
	}
	if d, err := e.Decide(ctx, Authz, ast.NewObject()); err != nil || d.Revision != "next" {
		t.Fatalf("decision after the reload: %+v, %v; want revision next", d, err)
	}
	t.Logf("%d decisions overlapped the reload", during.Load())
}

func TestTheEmbeddedBundlesTestsPassInProcess(t *testing.T) {
	t.Parallel()
	results, err := RunTests(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) < 50 {
		t.Fatalf("only %d Rego tests ran", len(results))
	}
}

func TestABundleWithoutTestsIsRefusedByReload(t *testing.T) {
	t.Parallel()
	dir := copyBundle(t)
	for _, ep := range Entrypoints {
		files, _ := filepath.Glob(filepath.Join(dir, string(ep), "*_test.rego"))
		for _, f := range files {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	err := newEngine(t).Reload(context.Background(), Config{Dir: dir})
	if !errors.Is(err, ErrBundleTests) {
		t.Fatalf("err = %v, want ErrBundleTests", err)
	}
}

func TestABundleWithAnEntrypointWithoutTestsIsRefusedByReload(t *testing.T) {
	t.Parallel()
	for _, ep := range Entrypoints {
		t.Run(string(ep), func(t *testing.T) {
			t.Parallel()
			dir := copyBundleWithSmallTests(t)
			files, _ := filepath.Glob(filepath.Join(dir, string(ep), "*_test.rego"))
			if len(files) == 0 {
				t.Fatalf("no test files for %s", ep)
			}
			for _, f := range files {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
			}
			err := newEngine(t).Reload(context.Background(), Config{Dir: dir})
			if !errors.Is(err, ErrBundleTests) || !strings.Contains(err.Error(), "sandgate."+string(ep)+"_test") {
				t.Fatalf("err = %v, want ErrBundleTests naming %s", err, ep)
			}
		})
	}
}

func TestParseEntrypoint(t *testing.T) {
	t.Parallel()
	for _, ep := range Entrypoints {
		got, err := ParseEntrypoint(string(ep))
		if err != nil || got != ep {
			t.Fatalf("ParseEntrypoint(%s) = %s, %v", ep, got, err)
		}
	}
	if _, err := ParseEntrypoint("Authz"); !errors.Is(err, ErrUnknownEntrypoint) {
		t.Fatalf("err = %v", err)
	}
}

func TestTheDigestNamesTheBundlesFiles(t *testing.T) {
	t.Parallel()
	embedded, err := BundleDigest(EmbeddedBundle())
	if err != nil || len(embedded) != 64 {
		t.Fatalf("digest of the embedded bundle: %q, %v", embedded, err)
	}
	same := copyBundle(t)
	if d, err := BundleDigest(os.DirFS(same)); err != nil || d != embedded {
		t.Fatalf("a copy of the embedded bundle digests to %q (%v), the bundle to %q", d, err, embedded)
	}
	writeFile(t, filepath.Join(same, "README.md"), "not part of the bundle")
	if d, _ := BundleDigest(os.DirFS(same)); d != embedded {
		t.Fatalf("a file OPA takes nothing from changed the digest")
	}
	edits := map[string]func(dir string){
		"a changed byte of data.json": func(dir string) {
			b, err := os.ReadFile(filepath.Join(dir, "data.json"))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, "data.json"), strings.Replace(string(b), `"sandgate-sbx-"`, `"sandgate-sbY-"`, 1))
		},
		"an added test": func(dir string) {
			writeFile(t, filepath.Join(dir, "authz", "zz_test.rego"), smallTest(Authz))
		},
		"a renamed rule file": func(dir string) {
			if err := os.Rename(filepath.Join(dir, "lib", "nodes.rego"), filepath.Join(dir, "lib", "nodes2.rego")); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, edit := range edits {
		dir := copyBundle(t)
		edit(dir)
		if d, err := BundleDigest(os.DirFS(dir)); err != nil || d == embedded {
			t.Errorf("%s: digest %q (%v) unchanged", name, d, err)
		}
	}
	e := newEngine(t)
	info := e.Info()
	if info.Digest != embedded || info.Revision != e.Revision() || len(info.Rules) != len(e.Rules()) || info.LoadedAt.IsZero() {
		t.Fatalf("Info() = %+v, want the embedded bundle's digest %s, revision and rules", info, embedded)
	}
}

// editData replaces old (which must be there) with new in dir's data.json.
func editData(t *testing.T, dir, old, new string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "data.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("data.json has no %s", old)
	}
	writeFile(t, filepath.Join(dir, "data.json"), strings.Replace(string(b), old, new, 1))
}
