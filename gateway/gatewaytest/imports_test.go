package gatewaytest_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// gatewaytest and the words it speaks (apitest) are for tests and
// benchmarks only: no package the sandgate binary links may import them.
func TestTheBinaryDoesNotLinkIt(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "sandgate/cmd/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "sandgate/gateway") {
		t.Fatalf("sandgate/gateway is not among the binary's dependencies: the check looked at the wrong list\n%s", out)
	}
	for _, testOnly := range []string{"sandgate/gateway/gatewaytest", "sandgate/gateway/apitest"} {
		if slices.Contains(deps, testOnly) {
			t.Errorf("the sandgate binary links %s", testOnly)
		}
	}
}
