package fileops

import (
	"strings"
	"testing"
)

// FuzzParseAnswer: what a sandbox prints back is untrusted (the container
// is the caller's); the parsers refuse what is malformed and never panic,
// and what they accept is within the bounds announced.
func FuzzParseAnswer(f *testing.F) {
	f.Add("D 2 2", "4096 755 1764406800 directory\n6 644 1764406800 regular file\nnsub\nnnote\n", 2)
	f.Add("F 12 644 1764406800 0 12", "", 0)
	f.Add("F 12 644 1764406800 10 2", "", 0)
	f.Add("F 12 644 1764406800 10 3", "", 0)
	f.Add("D 1 1", "3 777 1 symbolic link\nx6c696e650a627265616b\n", 1)
	f.Add("D 1 1", "3 777 1\nnx\n", 1)
	f.Add("F -1 999 x", "", 0)
	f.Fuzz(func(t *testing.T, header, body string, listed int) {
		if h, err := ParseHeader(header); err == nil {
			if h.Dir && (h.Listed > h.Total || h.Listed < 0) {
				t.Fatalf("header %q accepted with listed %d of %d", header, h.Listed, h.Total)
			}
			if !h.Dir && (h.File.Size < 0 || h.File.Mode > 0o7777777 || h.Offset < 0 || h.Length < 0 || h.Length > max(h.File.Size-h.Offset, 0)) {
				t.Fatalf("header %q accepted as %+v", header, h.File)
			}
		}
		if listed < 0 || listed > 1<<12 {
			return
		}
		if entries, err := ParseListing([]byte(body), listed); err == nil {
			if len(entries) != listed {
				t.Fatalf("%d entries for %d listed", len(entries), listed)
			}
			for _, e := range entries {
				if e.Size < 0 || strings.Contains(e.Type, " ") {
					t.Fatalf("entry %+v", e)
				}
			}
		}
		_, _ = ParseStat(body)
	})
}
