package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

func readLines(t *testing.T, path string) []Entry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Entry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q is not one JSON entry: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

func TestEveryEntryIsOneCompleteJSONLine(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	l, err := Open(Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Write(Entry{Time: time.Now(), DecisionID: fmt.Sprint(i), Entrypoint: "authz", Allow: i%2 == 0}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got := readLines(t, path)
	if len(got) != 50 {
		t.Fatalf("%d lines, want 50", len(got))
	}
	if got[0].RuleIDs == nil {
		t.Fatal("rule_ids must be [] on an allow, not null")
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	if err := l.Write(Entry{}); err == nil {
		t.Fatal("a write after Close succeeded")
	}
}

func TestTheLogRotatesBySizeAndKeepsNFiles(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	l, err := Open(Config{Path: path, MaxBytes: 1000, Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 100 {
		if err := l.Write(Entry{DecisionID: fmt.Sprintf("d%03d", i), RuleIDs: []string{"H1"}, Route: strings.Repeat("x", 40)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{path, path + ".1", path + ".2"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if fi.Size() > 1000 {
			t.Fatalf("%s is %d bytes, over the 1000 limit", p, fi.Size())
		}
	}
	if _, err := os.Stat(path + ".3"); !os.IsNotExist(err) {
		t.Fatalf("a third rotated file exists: %v", err)
	}
	live := readLines(t, path)
	if live[len(live)-1].DecisionID != "d099" {
		t.Fatalf("the live file does not end with the newest entry: %+v", live[len(live)-1])
	}
	older := readLines(t, path+".1")
	if older[len(older)-1].DecisionID >= live[0].DecisionID {
		t.Fatal("rotated file is not older than the live one")
	}
}

func TestOpenRefusesAnEmptyPath(t *testing.T) {
	t.Parallel()
	if _, err := Open(Config{}); err == nil {
		t.Fatal("Open accepted an empty path")
	}
}

// A request can put megabytes into the fields of its entry (a path id, an
// engine error quoting input); no line may carry them into the file.
func TestOneEntryCannotFloodTheLog(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	l, err := Open(Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("x", 1<<20)
	controls := strings.Repeat("\x00\x01\"\\", 1<<18) // JSON escapes each to up to 6 bytes
	rules := make([]string, 1000)
	for i := range rules {
		rules[i] = strings.Repeat("R", 100)
	}
	entries := []Entry{
		{DecisionID: "d1", SandboxID: huge, Method: huge, Route: huge, Principal: huge, ClientRequestID: huge, Error: huge, Action: huge, RuleIDs: rules},
		{DecisionID: "d2", SandboxID: controls, Method: controls, Route: controls, Principal: controls, ClientRequestID: controls, Error: controls, Action: controls},
		{DecisionID: "d3", SandboxID: strings.Repeat("é", 1000)},
	}
	for _, e := range entries {
		if err := l.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	if len(lines) != len(entries) {
		t.Fatalf("%d lines, want %d", len(lines), len(entries))
	}
	for i, line := range lines {
		if len(line) >= MaxLineBytes {
			t.Errorf("entry %d: a line of %d bytes, bound %d", i, len(line), MaxLineBytes)
		}
	}
	got := readLines(t, path)
	kept, _, _ := strings.Cut(got[0].SandboxID, "...(+")
	if len(got[0].SandboxID) > MaxFieldBytes || !strings.HasSuffix(got[0].SandboxID, fmt.Sprintf("...(+%d bytes)", len(huge)-len(kept))) {
		t.Errorf("a cut field must say how much was cut: %q", got[0].SandboxID)
	}
	if len(got[0].RuleIDs) != MaxRuleIDs+1 || !strings.Contains(got[0].RuleIDs[MaxRuleIDs], "+968 rule ids") {
		t.Errorf("rule ids: %d kept, last %q", len(got[0].RuleIDs), got[0].RuleIDs[len(got[0].RuleIDs)-1])
	}
	if !utf8.ValidString(got[2].SandboxID) || !strings.HasPrefix(got[2].SandboxID, "éé") {
		t.Errorf("a multi-byte field is cut on a rune boundary: %q", got[2].SandboxID)
	}
}
