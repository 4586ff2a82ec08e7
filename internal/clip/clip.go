// Package clip shortens text that reaches an answer, an error or a log
// line to a byte budget, cutting on a UTF-8 boundary and saying how many
// bytes it dropped. It is the one truncation of the module: the decision
// log's bounded fields, the gateway's echo of a bad value in a 400 and the
// file operations' parse errors all use it.
package clip

import (
	"strconv"
	"unicode/utf8"
)

// String returns s when it is at most max bytes long; otherwise a prefix
// of s, cut at a rune boundary, followed by "...(+N bytes)" naming how
// many bytes were dropped, the whole at most max bytes whenever max leaves
// room for the mark (a smaller max gives the mark alone).
func String(s string, max int) string {
	if len(s) <= max {
		return s
	}
	// The mark is longest when nothing is kept; keep what leaves room
	// for it, then name what was dropped.
	keep := max - len(mark(len(s)))
	if keep < 0 {
		keep = 0
	}
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + mark(len(s)-keep)
}

func mark(dropped int) string { return "...(+" + strconv.Itoa(dropped) + " bytes)" }
