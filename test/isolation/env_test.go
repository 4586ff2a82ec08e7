package isolation

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"sandgate/render/isolation"
)

// cmdTimeout bounds every command a test runs.
const cmdTimeout = 30 * time.Second

// requireRootAndTools skips, naming what is missing, unless the test runs
// as root with the tools it needs.
func requireRootAndTools(t *testing.T, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: iptables and network namespaces (CI runs as root)")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (apt-get install -y iptables iproute2)", tool)
		}
	}
}

// result is a finished command.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return "exit " + strconv.Itoa(r.code) + "\n--- stdout\n" + r.stdout + "--- stderr\n" + r.stderr
}

// execute runs a command; a command that cannot start or times out fails
// the test.
func execute(t *testing.T, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...) //nolint:gosec // the tests' own commands: ip, iptables, bash, docker
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errOut.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ctx.Err() == nil:
		r.code = ee.ExitCode()
	default:
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, r)
	}
	return r
}

// must runs a command that has to succeed and returns its stdout.
func must(t *testing.T, name string, args ...string) string {
	t.Helper()
	r := execute(t, name, args...)
	if r.code != 0 {
		t.Fatalf("%s %s: %s", name, strings.Join(args, " "), r)
	}
	return r.stdout
}

// iptIn runs `iptables -w 10 ARGS...` in netns ns; it must succeed.
func iptIn(t *testing.T, ns string, args ...string) {
	t.Helper()
	name, argv := inNS(ns, append([]string{"iptables", "-w", "10"}, args...)...)
	must(t, name, argv...)
}

// writeScript renders cfg as `sandgate isolation render` does and writes
// the script to a temporary file.
func writeScript(t *testing.T, cfg isolation.Config) string {
	t.Helper()
	_, script, err := isolation.Render(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return saveScript(t, script)
}

// writeProbeRootScript renders cfg as the test rendering whose
// control-plane indicators read root instead of this host
// (Plan.ScriptWithProbeRoot), and writes it to a temporary file.
func writeProbeRootScript(t *testing.T, cfg isolation.Config, root string) string {
	t.Helper()
	p, err := isolation.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	script, err := p.ScriptWithProbeRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	return saveScript(t, script)
}

func saveScript(t *testing.T, script []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sandgate-isolation.sh")
	if err := os.WriteFile(path, script, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// inNS prefixes a command with `ip netns exec NS` (ns "" is this host).
func inNS(ns string, argv ...string) (string, []string) {
	if ns == "" {
		return argv[0], argv[1:]
	}
	return "ip", append([]string{"netns", "exec", ns}, argv...)
}

// runScript runs the script in netns ns with the given mode flags. In a
// test netns (ns not "") it also gets a pid and mount namespace of its own
// (see pidNS), so that no process of this host is a control-plane
// indicator there.
func runScript(t *testing.T, ns, script string, flags ...string) result {
	t.Helper()
	argv := append([]string{"bash", script}, flags...)
	if ns != "" {
		argv = append([]string{"unshare", "--pid", "--fork", "--mount-proc", "--kill-child"}, argv...)
	}
	name, args := inNS(ns, argv...)
	r := execute(t, name, args...)
	t.Logf("%s %s: exit %d", filepath.Base(script), strings.Join(flags, " "), r.code)
	return r
}

var counters = regexp.MustCompile(`\[\d+:\d+\]`)

// filterTable is the filter table of netns ns as iptables-save prints it,
// without its comment lines and counters.
func filterTable(t *testing.T, ns string) string {
	t.Helper()
	name, args := inNS(ns, "iptables-save", "-t", "filter")
	var b strings.Builder
	for _, line := range strings.Split(must(t, name, args...), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		b.WriteString(counters.ReplaceAllString(line, "[0:0]") + "\n")
	}
	return b.String()
}

var savedRule = regexp.MustCompile(`^\[(\d+):\d+\] -A (\S+) .*--comment "([^"]*)"`)

// ruleHits maps each commented rule of netns ns's filter table to the
// packets it has matched.
func ruleHits(t *testing.T, ns string) map[string]int {
	t.Helper()
	name, args := inNS(ns, "iptables-save", "-c", "-t", "filter")
	hits := map[string]int{}
	for _, line := range strings.Split(must(t, name, args...), "\n") {
		if m := savedRule.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			hits[m[3]] += n
		}
	}
	return hits
}
