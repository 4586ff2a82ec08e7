package gatewaytest_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// gatewaytest is for tests and benchmarks only: no package the sandgate
// binary links may import it.
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
	if slices.Contains(deps, "sandgate/gateway/gatewaytest") {
		t.Error("the sandgate binary links sandgate/gateway/gatewaytest")
	}
}
