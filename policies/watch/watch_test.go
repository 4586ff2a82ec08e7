package watch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sandgate/policies"
	"sandgate/policies/policytest"
)

// start runs a watcher over dir (or file) and returns the trigger and the
// results it reports.
func start(t *testing.T, e *policies.Engine, src policies.Config, watch bool) (chan<- struct{}, <-chan Result) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	trigger := make(chan struct{})
	results := make(chan Result, 16)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Engine: e, Source: src, Watch: watch, Settle: 50 * time.Millisecond,
			Report: func(r Result) { results <- r }}, trigger)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	// fsnotify watches are in place once Run has started; give it a moment.
	time.Sleep(100 * time.Millisecond)
	return trigger, results
}

func next(t *testing.T, results <-chan Result) Result {
	t.Helper()
	select {
	case r := <-results:
		return r
	case <-time.After(2 * time.Minute):
		t.Fatal("no reload was reported")
	}
	return Result{}
}

func TestAChangedDirectoryIsReloadedAndABadOneRefused(t *testing.T) {
	t.Parallel()
	dir := policytest.CopyWithSmallTests(t, policies.EmbeddedBundle(), policies.EntrypointNames())
	policytest.SetRevision(t, dir, "watch-1")
	src := policies.Config{Dir: dir}
	e, err := policies.New(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	_, results := start(t, e, src, true)

	policytest.SetRevision(t, dir, "watch-2")
	r := next(t, results)
	if r.Err != nil || r.Revision != "watch-2" || e.Revision() != "watch-2" || r.Cause != "file" {
		t.Fatalf("after a good change: %+v, serving %s", r, e.Revision())
	}
	t.Logf("reload took %v", r.Took)

	// A test that fails: refused, and watch-2 keeps serving.
	if err := os.WriteFile(filepath.Join(dir, "authz", "zz_test.rego"), []byte("package sandgate.authz_test\n\ntest_fails if false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = next(t, results)
	if !errors.Is(r.Err, policies.ErrBundleTests) || r.Revision != "watch-2" || e.Revision() != "watch-2" {
		t.Fatalf("after a failing test: %+v, serving %s", r, e.Revision())
	}
	// A file that does not compile: refused too.
	if err := os.Remove(filepath.Join(dir, "authz", "zz_test.rego")); err != nil {
		t.Fatal(err)
	}
	r = next(t, results)
	if r.Err != nil {
		t.Fatalf("after removing the failing test: %+v", r)
	}
	if err := os.WriteFile(filepath.Join(dir, "authz", "broken.rego"), []byte("package sandgate.authz\n\nthis is not rego\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = next(t, results)
	if r.Err == nil || e.Revision() != "watch-2" {
		t.Fatalf("after a broken module: %+v, serving %s", r, e.Revision())
	}
}

func TestASignalReloadsAndAPrefixChangeIsRefused(t *testing.T) {
	t.Parallel()
	dir := policytest.CopyWithSmallTests(t, policies.EmbeddedBundle(), policies.EntrypointNames())
	src := policies.Config{Dir: dir}
	e, err := policies.New(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	trigger, results := start(t, e, src, false)
	policytest.SetRevision(t, dir, "signalled")
	trigger <- struct{}{}
	if r := next(t, results); r.Err != nil || r.Cause != "signal" || e.Revision() != "signalled" {
		t.Fatalf("after the signal: %+v", r)
	}

	data, err := os.ReadFile(filepath.Join(dir, "data.json"))
	if err != nil {
		t.Fatal(err)
	}
	edited := []byte(string(data))
	edited = replaceOnce(t, edited, `"prefix": "sandgate-sbx-"`, `"prefix": "other-"`)
	if err := os.WriteFile(filepath.Join(dir, "data.json"), edited, 0o600); err != nil { //nolint:gosec // G703: the test's own temp dir
		t.Fatal(err)
	}
	policytest.SetRevision(t, dir, "new-prefix")
	trigger <- struct{}{}
	if r := next(t, results); !errors.Is(r.Err, policies.ErrReloadRefused) || e.Revision() != "signalled" {
		t.Fatalf("a prefix change: %+v, serving %s", r, e.Revision())
	}
}

func TestARebuiltBundleFileIsReloaded(t *testing.T) {
	t.Parallel()
	dir := policytest.CopyWithSmallTests(t, policies.EmbeddedBundle(), policies.EntrypointNames())
	file := filepath.Join(t.TempDir(), "bundle.tar.gz")
	build := func(rev string) {
		t.Helper()
		f, err := os.CreateTemp(filepath.Dir(file), ".bundle-*")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := policies.Build(context.Background(), policies.BuildOptions{Dir: dir, Revision: rev}, f); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(f.Name(), file); err != nil {
			t.Fatal(err)
		}
	}
	build("file-1")
	src := policies.Config{BundleFile: file}
	e, err := policies.New(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	_, results := start(t, e, src, true)
	build("file-2")
	if r := next(t, results); r.Err != nil || e.Revision() != "file-2" {
		t.Fatalf("after a rebuild: %+v, serving %s", r, e.Revision())
	}
}

func TestTheEmbeddedBundleIsNotWatched(t *testing.T) {
	t.Parallel()
	e, err := policies.New(context.Background(), policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), Config{Engine: e, Report: func(Result) {}}, nil); err == nil {
		t.Fatal("Run accepted the embedded bundle")
	}
}

func replaceOnce(t *testing.T, b []byte, old, new string) []byte {
	t.Helper()
	s := string(b)
	i := strings.Index(s, old)
	if i < 0 {
		t.Fatalf("%q not found", old)
	}
	return []byte(s[:i] + new + s[i+len(old):])
}
