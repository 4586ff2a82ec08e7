package gateway

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Every reason the gateway's code ends a sandbox with is in endReasons, so
// its series of sandgate_sandboxes_ended_total exists from the start.
func TestEveryEndReasonHasItsSeries(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	passed := regexp.MustCompile(`\b(?:s\.end|s\.endBecause|s\.failStart|s\.markEnded)\((?:[^()]|\(\))*?"([a-z_]+)"`)
	consts := regexp.MustCompile(`(?m)^const (end[A-Z]\w*) = "([a-z_]+)"`)
	found := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var reasons []string
		for _, m := range passed.FindAllStringSubmatch(string(b), -1) {
			reasons = append(reasons, m[1])
		}
		for _, m := range consts.FindAllStringSubmatch(string(b), -1) {
			reasons = append(reasons, m[2])
		}
		for _, r := range reasons {
			if r == "" || strings.HasPrefix(r, "the ") {
				continue
			}
			found++
			if !slices.Contains(endReasons, r) {
				t.Errorf("%s ends a sandbox with reason %q, which endReasons lacks", f, r)
			}
		}
	}
	if found < 10 {
		t.Fatalf("found only %d end reasons in the code: the scan is wrong", found)
	}
}
