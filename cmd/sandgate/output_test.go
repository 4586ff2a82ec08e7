package main

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// A cell shows what a sandbox's record holds (labels, last_error): text an
// agent or a task chose must not steer the operator's terminal.
func TestACellHoldsOnlyPrintableText(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"":                        "-",
		"plain":                   "plain",
		"tab\there\nline":         "tab here line",
		"csi\u009b31m":            "csi31m",
		"esc\x1b]0;title\x07done": "esc]0;titledone",
		"rtl\u202eexe.txt":        "rtlexe.txt",
	}
	for in, want := range cases {
		if got := cell(in); got != want {
			t.Errorf("cell(%q) = %q, want %q", in, got, want)
		}
	}
}

// Default tables keep to 100 columns whatever the records hold (issue 21:
// sandbox list was 170 columns wide, token list 159): long subjects,
// principals and labels are cut, marked with "…"; -o wide shows them whole.
func TestDefaultTablesFitAHundredColumns(t *testing.T) {
	t.Parallel()
	g := startLiveGateway(t)
	op := g.operator
	long := strings.Repeat("a", 120)
	code, out, stderr := g.cli(t, op, "token", "mint", "--role", "agent", "--subject", long, "--label", strings.Repeat("l", 128), "--ttl", "8000h", "--max-live-sandboxes", "5")
	agent := strings.TrimSpace(mustOK(t, code, out, stderr))
	for range 2 {
		code, out, stderr = g.cli(t, agent, "sandbox", "create", "--profile", "workspace", "--network", "egress", "--node", "worker-2",
			"--label", "owner="+strings.Repeat("o", 60), "--label", "task=a-long-task-name")
		mustOK(t, code, out, stderr)
	}
	for _, args := range [][]string{{"sandbox", "list"}, {"host", "list"}, {"token", "list"}} {
		code, out, stderr = g.cli(t, op, args...)
		mustOK(t, code, out, stderr)
		for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if n := utf8.RuneCountInString(line); n > maxTableWidth {
				t.Errorf("%s: a line of %d columns:\n%s", strings.Join(args, " "), n, out)
				break
			}
		}
		if args[0] != "host" && !strings.Contains(out, "aaaa…") {
			t.Errorf("%s: the long subject is not cut:\n%s", strings.Join(args, " "), out)
		}
		code, out, stderr = g.cli(t, op, append(args, "-o", "wide")...)
		if mustOK(t, code, out, stderr); args[0] != "host" && !strings.Contains(out, long) {
			t.Errorf("%s -o wide: the long subject is not whole:\n%s", strings.Join(args, " "), out)
		}
	}
}

func TestRelativeTimesAreShort(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	cases := map[string]string{
		"":                     "-",
		"not a time":           "not a time",
		"2026-12-03T10:59:00Z": "in 59m",
		"2026-12-03T13:59:30Z": "in 3h59m",
		"2026-12-03T12:00:00Z": "in 2h",
		"2027-12-03T10:00:00Z": "in 365d",
		"2026-12-03T09:59:15Z": "45s ago",
	}
	for in, want := range cases {
		if got := ago(in, now); got != want {
			t.Errorf("ago(%q) = %q, want %q", in, got, want)
		}
	}
}
