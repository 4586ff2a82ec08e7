// Package wire holds the JSON objects of the sandgate REST API that the
// gateway writes and the client reads, the request bodies the client
// writes and the gateway decodes, and the problem codes with their
// statuses and titles: one declaration for both sides, so the client never
// lags the gateway. It imports the standard library only, like the client,
// so programs outside sandgate can use it.
package wire

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable is s as text a terminal shows as it is: white space (a
// newline, a tab, a no-break or line separator) and invalid bytes become a
// plain space, and every other character that is not printable is dropped
// (C0 and C1 controls such as ESC and CSI, bidi overrides). A problem's
// members pass through it, so a detail that quotes a task's error cannot
// steer the terminal that prints it.
func Printable(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == utf8.RuneError, unicode.IsSpace(r):
			return ' '
		case !unicode.IsPrint(r):
			return -1
		}
		return r
	}, s)
}
