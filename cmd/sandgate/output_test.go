package main

import "testing"

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
