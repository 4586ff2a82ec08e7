package e2e

import (
	"bytes"
	"errors"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestTheCLIsExecTimeoutExitsAsItsHelpSays runs `sandgate sandbox exec
// --timeout` (the binary the suite built) against the real agent on both
// images, and holds it to what `sandbox exec --help` promises (issue 21:
// the help said a timeout exits 124; on busybox it exited 143): the exit
// status of a command the TERM ends, and of one that ignores TERM and is
// killed 5s later, plain and streamed, with "timed out" on stderr.
func TestTheCLIsExecTimeoutExitsAsItsHelpSays(t *testing.T) {
	g := startGateway(t, gwOptions{})
	help, err := exec.Command(suite.gateway, "sandbox", "exec", "--help").Output() //nolint:gosec // G204: the binary the suite built
	if err != nil {
		t.Fatal(err)
	}
	claim := func(signal string) int {
		m := regexp.MustCompile(`\b(\d+) \(128\+` + signal + `\)`).FindSubmatch(help)
		if m == nil {
			t.Fatalf("sandbox exec --help states no exit status for %s:\n%s", signal, help)
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	term, kill := claim("SIGTERM"), claim("SIGKILL")
	for _, image := range []string{imageBusybox, imageDebian} {
		t.Run(strings.TrimPrefix(image, "sandgate-e2e/"), func(t *testing.T) {
			t.Parallel()
			sb := g.create(t, g.operator, map[string]any{"image": image, "ttl_seconds": 600})
			cases := []struct {
				name string
				argv []string
				want int
			}{
				{"a command the TERM ends", []string{"sleep", "30"}, term},
				{"a command that ignores TERM", []string{"sh", "-c", "trap '' TERM; sleep 30"}, kill},
			}
			for _, c := range cases {
				for _, mode := range [][]string{nil, {"--stream"}} {
					args := append([]string{"--addr", g.url, "--token", g.operator, "sandbox", "exec", sb.ID, "--timeout", "2s"}, mode...)
					cmd := exec.Command(suite.gateway, append(append(args, "--"), c.argv...)...) //nolint:gosec // G204: the binary the suite built
					var stdout, stderr bytes.Buffer
					cmd.Stdout, cmd.Stderr = &stdout, &stderr
					err := cmd.Run()
					code := 0
					if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
						code = ee.ExitCode()
					} else if err != nil {
						t.Fatal(err)
					}
					if code != c.want || !strings.Contains(stderr.String(), "sandgate: the command timed out after ") {
						t.Errorf("%s %v: exit %d, the help says %d\nstdout %q\nstderr %q", c.name, mode, code, c.want, stdout.String(), stderr.String())
					}
				}
			}
		})
	}
}
