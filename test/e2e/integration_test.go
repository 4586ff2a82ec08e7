package e2e

import (
	"os"
	"os/exec"
	"testing"
)

// TestTheIntegrationSuiteRunsOnTheRealAgent runs test/integration, which
// drives `sandgate dev` over HTTP and runs on the simulator in `go test
// ./...`, against this suite's real agent: the same tests in both modes.
func TestTheIntegrationSuiteRunsOnTheRealAgent(t *testing.T) {
	need(t)
	t.Parallel()
	g := startGateway(t, gwOptions{}) // for its namespace; the dev gateway below is the one tested
	g.stop()
	cmd := exec.CommandContext(t.Context(), "go", "test", "-count=1", "-v", "./test/integration/") //nolint:gosec // G204: the suite runs the project's own tests
	cmd.Dir = suite.root
	cmd.Env = append(os.Environ(),
		"NOMAD_ADDR="+suite.server.HTTPAddr, "NOMAD_NAMESPACE="+g.namespace,
		"SANDGATE_TEST_NODE="+sharedNode, "SANDGATE_TEST_POLICY_DIR="+suite.policyDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("test/integration against the real agent: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
