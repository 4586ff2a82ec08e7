package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sandgate/test/testbin"
)

// readmeExit is what a README line's comment says it exits with ("# exit
// 3: ..."); every other line exits 0.
var readmeExit = regexp.MustCompile(`#\s*exit (\d+)\b`)

// The CLI block of the README ("The operator CLI and the dashboard") runs
// as a newcomer pastes it after `make run`, line by line in one bash, from
// a directory with the README's paths (.build/sandgate, .sandgate) on the
// simulator `sandgate dev` starts (issue 21: three of its lines failed,
// copying files nothing had made). Each line exits 0, or what its comment
// says.
func TestTheREADMECLILinesRunAsWritten(t *testing.T) {
	if os.Getenv("NOMAD_ADDR") != "" {
		t.Skip("the README's walkthrough names the simulator's nodes (worker-1, control-1)")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the README lines read JSON with it")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := shBlock(t, "README.md", string(readme), "## The operator CLI and the dashboard", 10)

	bin, data := testbin.Build(t), t.TempDir()
	g := startGateway(t, bin, data)
	work := t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, ".build"), 0o750); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{".build/sandgate": bin, ".sandgate": data} {
		if err := os.Symlink(target, filepath.Join(work, link)); err != nil {
			t.Fatal(err)
		}
	}

	var script strings.Builder
	for i, line := range lines {
		// the README's gateway is `make run`'s; this one listens elsewhere
		line = strings.ReplaceAll(line, "http://127.0.0.1:8080", g.url)
		fmt.Fprintf(&script, "%s\necho \"@@ %d $?\"\n", line, i)
	}
	cmd := exec.Command("bash", "-c", script.String()) //nolint:gosec // G204: the README's lines, against this test's own gateway
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "SANDGATE_ADDR=", "SANDGATE_TOKEN=")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the README lines stopped: %v\n%s\n%s", err, out.String(), stderr.String())
	}
	status := regexp.MustCompile(`(?m)^@@ (\d+) (\d+)$`).FindAllStringSubmatch(out.String(), -1)
	if len(status) != len(lines) {
		t.Fatalf("%d statuses for %d lines:\n%s\n%s", len(status), len(lines), out.String(), stderr.String())
	}
	for i, line := range lines {
		want := "0"
		if m := readmeExit.FindStringSubmatch(line); m != nil {
			want = m[1]
		}
		if status[i][2] != want {
			t.Errorf("line %q exited %s, want %s\nstdout:\n%s\nstderr:\n%s", line, status[i][2], want, out.String(), stderr.String())
		}
	}
	if got, err := os.ReadFile(filepath.Join(work, "out.json")); err != nil || !strings.Contains(string(got), `"rows"`) {
		t.Errorf("out.json was not copied out: %q %v", got, err)
	}
	if n, _ := strconv.Atoi(status[len(status)-1][1]); n != len(lines)-1 {
		t.Errorf("the last status is of line %d", n)
	}
}
