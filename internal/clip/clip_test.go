package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestStringKeepsWhatFitsAndNamesWhatItDropped(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"short text is returned as it is", "abc", 8, "abc"},
		{"text of exactly max bytes is returned as it is", "abcdefgh", 8, "abcdefgh"},
		{"long text keeps a prefix and the count of bytes dropped", strings.Repeat("a", 40), 24, strings.Repeat("a", 10) + "...(+30 bytes)"},
		{"a max smaller than the mark gives the mark alone", strings.Repeat("a", 40), 4, "...(+40 bytes)"},
		{"the cut never splits a rune", "ab" + strings.Repeat("é", 20), 19, "ab" + "é" + "...(+38 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := String(tc.in, tc.max)
			if got != tc.want {
				t.Fatalf("String(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
			}
			if !utf8.ValidString(got) {
				t.Fatalf("String(%q, %d) = %q is not valid UTF-8", tc.in, tc.max, got)
			}
		})
	}
}

func FuzzString(f *testing.F) {
	f.Add("héllo wörld", 5)
	f.Add(strings.Repeat("€", 30), 17)
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 0 || max > 1<<16 {
			return
		}
		got := String(s, max)
		if len(s) <= max {
			if got != s {
				t.Fatalf("fitting text changed: %q -> %q", s, got)
			}
			return
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("valid UTF-8 %q clipped to invalid %q", s, got)
		}
		if m := len(mark(len(s))); max >= m && len(got) > max {
			t.Fatalf("String(%q, %d) is %d bytes", s, max, len(got))
		}
		if !strings.HasSuffix(got, " bytes)") {
			t.Fatalf("clipped text %q does not say what it dropped", got)
		}
	})
}
