package policies

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"
)

// BundleName is the name the bundle is activated under; decision logs and
// `sandgate policy info` report its revision.
const BundleName = "sandgate"

// testTimeout bounds each Rego test when a bundle is verified before use.
const testTimeout = 10 * time.Second

// ErrBundleTests means a bundle's own Rego tests failed (or it has none), so
// it was refused.
var ErrBundleTests = errors.New("policies: bundle tests failed")

// loadBundle reads a bundle (its .manifest, data files and Rego modules) from
// fsys. With withTests false the *_test.rego modules are left out: they are
// never part of the serving policy.
func loadBundle(fsys fs.FS, withTests bool) (*bundle.Bundle, error) {
	fl := loader.NewFileLoader().
		WithFS(fsys).
		WithProcessAnnotation(true).
		WithRegoVersion(ast.RegoV1).
		WithSkipBundleVerification(true)
	if !withTests {
		fl = fl.WithFilter(skipTests)
	}
	b, err := fl.AsBundle(".")
	if err != nil {
		return nil, fmt.Errorf("policies: load bundle: %w", err)
	}
	if b.Manifest.Revision == "" {
		return nil, errors.New("policies: load bundle: .manifest has no revision")
	}
	if b.Manifest.Roots == nil || len(*b.Manifest.Roots) == 0 {
		return nil, errors.New("policies: load bundle: .manifest has no roots")
	}
	return b, nil
}

// skipTests filters *_test.rego files out of a load.
func skipTests(abspath string, info fs.FileInfo, _ int) bool {
	return !info.IsDir() && strings.HasSuffix(path.Base(abspath), "_test.rego")
}

// bundleFS returns the embedded bundle when dir is empty, else dir on disk.
func bundleFS(dir string) (fs.FS, error) {
	if dir == "" {
		return bundleFiles, nil
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("policies: bundle dir: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("policies: bundle dir %s: not a directory", dir)
	}
	return os.DirFS(dir), nil
}

// TestResult is the outcome of one Rego test of the bundle.
type TestResult struct {
	Package string // Rego package of the test, e.g. data.sandgate.authz_test
	Name    string // test rule name
	Pass    bool
	Error   string // evaluation error, if any
}

// RunTests runs every Rego test in the bundle held by fsys (nil: the
// embedded one) and returns each result. It returns ErrBundleTests, wrapped,
// when any test fails or errs, or when an entrypoint's package has no test
// package data.sandgate.<entrypoint>_test (a policy without tests is as
// untrusted as one that fails them).
func RunTests(ctx context.Context, fsys fs.FS) ([]TestResult, error) {
	if fsys == nil {
		fsys = bundleFiles
	}
	b, err := loadBundle(fsys, true)
	if err != nil {
		return nil, err
	}
	store := inmem.NewWithOpts(inmem.OptRoundTripOnWrite(false))
	txn, err := store.NewTransaction(ctx, storage.WriteParams)
	if err != nil {
		return nil, fmt.Errorf("policies: test store: %w", err)
	}
	defer store.Abort(ctx, txn)

	ch, err := tester.NewRunner().
		SetCompiler(ast.NewCompiler().WithCapabilities(capabilities()).WithDefaultRegoVersion(ast.RegoV1)).
		SetStore(store).
		SetBundles(map[string]*bundle.Bundle{BundleName: b}).
		SetDefaultRegoVersion(ast.RegoV1).
		RaiseBuiltinErrors(true).
		SetTimeout(testTimeout).
		RunTests(ctx, txn)
	if err != nil {
		return nil, fmt.Errorf("policies: run bundle tests: %w", err)
	}
	var (
		results []TestResult
		failed  []string
	)
	for r := range ch {
		tr := TestResult{Package: r.Package, Name: r.Name, Pass: r.Pass()}
		if r.Error != nil {
			tr.Error = r.Error.Error()
		}
		if !tr.Pass {
			failed = append(failed, r.Package+"."+r.Name)
		}
		results = append(results, tr)
	}
	if err := ctx.Err(); err != nil {
		return results, fmt.Errorf("policies: run bundle tests: %w", err)
	}
	var untested []string
	for _, ep := range Entrypoints {
		pkg := "data.sandgate." + string(ep) + "_test"
		if !slices.ContainsFunc(results, func(r TestResult) bool { return r.Package == pkg }) {
			untested = append(untested, pkg)
		}
	}
	switch {
	case len(results) == 0:
		return results, fmt.Errorf("%w: the bundle has no tests", ErrBundleTests)
	case len(untested) > 0:
		return results, fmt.Errorf("%w: no tests in %s (every entrypoint needs its own)", ErrBundleTests, strings.Join(untested, ", "))
	case len(failed) > 0:
		return results, fmt.Errorf("%w: %d of %d failed: %s", ErrBundleTests, len(failed), len(results), strings.Join(failed, ", "))
	}
	return results, nil
}
