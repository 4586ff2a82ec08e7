package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"sandgate/test/testbin"
)

// tryItFragment is what a comment of a "Try it" line promises its output
// holds: a leading status (`# 403, ...` or `# 204`), a leading
// "prints `TEXT`" (a raw answer, such as a file's bytes), and any
// `"exit_code":N`, `"rule_ids":[...]`, `"size":N` or `"total":N` it quotes.
var (
	tryItStatus   = regexp.MustCompile(`^(\d{3})\b`)
	tryItPrints   = regexp.MustCompile("^prints `([^`]+)`")
	tryItFragment = regexp.MustCompile(`"(?:exit_code|rule_ids|size|total)":(?:\d+|\[[^\]]*\])`)
)

// The "Try it" lines of GET /llms.txt run as an agent pastes them (bash,
// curl, jq), against the gateway that serves them, and each prints what
// its comment says: the guide cannot drift from the gateway.
func TestTheLLMsTxtLinesRunAsWritten(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (.ci/system-deps installs it): the llms.txt lines need it", tool)
		}
	}
	bin, data := testbin.Build(t), t.TempDir()
	agent := mintAgent(t, bin, data, "agent-llms")
	g := startGateway(t, bin, data)

	resp, err := http.Get(g.url + "/llms.txt")
	if err != nil {
		t.Fatal(err)
	}
	guide, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	lines := shBlock(t, "/llms.txt", string(guide), "## Try it", 8)

	// The first two lines say where the gateway is and which token to use.
	if !strings.HasPrefix(lines[0], "G=") || !strings.HasPrefix(lines[1], "T=") {
		t.Fatalf("the Try it block must start with G= and T=:\n%s", strings.Join(lines, "\n"))
	}
	var script strings.Builder
	script.WriteString("set -u\n")
	fmt.Fprintf(&script, "G=%s\nT=%s\n", g.url, agent)
	for i, line := range lines[2:] {
		fmt.Fprintf(&script, "echo '@@ %d'\n%s\n", i, line)
	}
	cmd := exec.Command("bash", "-c", script.String()) //nolint:gosec // G204: the lines of the guide this test checks, against its own gateway
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the Try it lines failed: %v\n%s\n%s", err, out.String(), stderr.String())
	}
	outputs := strings.Split(out.String(), "@@ ")[1:]
	if len(outputs) != len(lines)-2 {
		t.Fatalf("%d outputs for %d lines:\n%s", len(outputs), len(lines)-2, out.String())
	}
	checked := 0
	for i, line := range lines[2:] {
		got := outputs[i]
		_, comment, _ := strings.Cut(line, "    # ")
		comment = strings.TrimSpace(comment)
		if m := tryItStatus.FindStringSubmatch(comment); m != nil {
			checked++
			if !strings.Contains(got, `"status":`+m[1]) && strings.TrimSpace(strings.SplitN(got, "\n", 2)[1]) != m[1] {
				t.Errorf("line %q: want status %s, got %s", line, m[1], got)
			}
		}
		if m := tryItPrints.FindStringSubmatch(comment); m != nil {
			checked++
			if !strings.Contains(got, m[1]) {
				t.Errorf("line %q: want %q in the output, got %s", line, m[1], got)
			}
		}
		for _, frag := range tryItFragment.FindAllString(comment, -1) {
			checked++
			if !strings.Contains(got, frag) {
				t.Errorf("line %q: want %s in the output, got %s", line, frag, got)
			}
		}
	}
	if checked < 6 {
		t.Fatalf("only %d promises checked: the Try it comments lost their statuses or fragments", checked)
	}
	t.Logf("llms.txt Try it transcript:\n%s", out.String())
}

// shBlock returns the lines of the first ```sh block after the heading
// line of doc (named as what in failures), failing t when there is none or
// it has fewer than minLines lines.
func shBlock(t *testing.T, what, doc, heading string, minLines int) []string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no %q section", what, heading)
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	if !ok {
		t.Fatalf("%s: %q has no ```sh block", what, heading)
	}
	block, _, ok := strings.Cut(rest, "\n```")
	if !ok {
		t.Fatalf("%s: the block under %q is not closed", what, heading)
	}
	lines := strings.Split(block, "\n")
	if len(lines) < minLines {
		t.Fatalf("%s: the block under %q has %d lines", what, heading, len(lines))
	}
	return lines
}
