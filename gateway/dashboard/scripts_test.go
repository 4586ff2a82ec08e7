package dashboard_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

var nodeMajor = regexp.MustCompile(`^v(\d+)\.`)

// The dashboard's pure logic (argv splitting, capability detection, bar
// thresholds, the REST client) has unit tests in testdata/js, run with
// node's built-in test runner. The browser test (test/browser) covers the
// rest in Chromium.
func TestTheScriptsPassTheirUnitTests(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed (apt-get install nodejs): the dashboard's JavaScript unit tests in testdata/js did not run")
	}
	files, err := filepath.Glob("testdata/js/*.test.mjs")
	if err != nil || len(files) == 0 {
		t.Fatalf("no JavaScript test file found: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ver, err := exec.CommandContext(ctx, node, "--version").Output() //nolint:gosec // G204: node from PATH, a fixed argument
	if err != nil {
		t.Fatalf("node --version: %v", err)
	}
	m := nodeMajor.FindSubmatch(ver)
	if m == nil {
		t.Fatalf("node --version: %q", ver)
	}
	args := []string{"--test"}
	// The static scripts are ES modules without a package.json: node
	// before 22 needs to be told to detect that.
	if major, _ := strconv.Atoi(string(m[1])); major < 22 {
		if major < 20 {
			t.Skipf("node %s is too old for the tests (20 or later)", ver)
		}
		args = append([]string{"--experimental-detect-module"}, args...)
	}
	out, err := exec.CommandContext(ctx, node, append(args, files...)...).CombinedOutput() //nolint:gosec // G204: node on the test's own files
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^# pass [1-9]`).Match(out) || !regexp.MustCompile(`(?m)^# fail 0$`).Match(out) {
		t.Fatalf("node --test passed nothing:\n%s", out)
	}
}
