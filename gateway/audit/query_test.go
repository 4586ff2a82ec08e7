package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMaskInputTakesOutEverySecret(t *testing.T) {
	t.Parallel()
	in := `{"token":{"role":"agent","sub":"ci","jti":"01J"},
	  "request":{"body":{"argv":["cat"],"stdin":"s3cret-stdin","stdin_base64":"czNjcmV0","env":{"API_KEY":"s3cret-env"},
	  "nested":[{"Authorization":"Bearer s3cret-bearer","token_digest":"abc123"}]}},
	  "job":{"TaskGroups":[{"Tasks":[{"Env":["A=s3cret-a","B"],"Identity":{"Env":false,"File":false}}]}]},"password":"pw"}`
	out, err := MaskInput([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"s3cret", "czNjcmV0", "abc123", `"pw"`} {
		if strings.Contains(string(out), secret) {
			t.Errorf("the masked input holds %s: %s", secret, out)
		}
	}
	for _, kept := range []string{`"argv":["cat"]`, `"API_KEY":"[masked]"`, `"A=[masked]"`, `"sub":"ci"`, `"jti":"01J"`, `"Identity":{"Env":false,"File":false}`} {
		if !strings.Contains(string(out), kept) {
			t.Errorf("the masked input lost %s: %s", kept, out)
		}
	}
	if _, err := MaskInput([]byte(`{"not json`)); err == nil {
		t.Fatal("a broken document was masked")
	}
}

func TestQueryReadsEveryRetainedFileNewestFirstInPages(t *testing.T) {
	t.Parallel()
	l, err := Open(Config{Path: filepath.Join(t.TempDir(), "decisions.jsonl"), MaxBytes: 2 << 10, Keep: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	base := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for i := range 60 {
		e := Entry{Time: base.Add(time.Duration(i) * time.Second), DecisionID: fmt.Sprintf("d%02d", i), Entrypoint: "authz",
			Allow: i%3 != 0, Principal: fmt.Sprintf("agent:a%d", i%2), Input: json.RawMessage(`{"n":` + fmt.Sprint(i) + `}`)}
		if !e.Allow {
			e.RuleIDs = []string{"T2"}
			e.Violations = []Violation{{Rule: "T2", Msg: "no"}}
		}
		if err := l.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	all, err := l.Query(Query{Limit: MaxQueryLimit})
	if err != nil {
		t.Fatal(err)
	}
	// Rotation dropped the oldest; what is left is contiguous and newest first.
	n := len(all.Entries)
	if n == 0 || n == 60 || all.Entries[0].DecisionID != "d59" || all.Next != "" {
		t.Fatalf("%d entries, first %s, next %q", n, all.Entries[0].DecisionID, all.Next)
	}
	for i, e := range all.Entries {
		if want := fmt.Sprintf("d%02d", 59-i); e.DecisionID != want || e.Input != nil {
			t.Fatalf("entry %d: %+v, want %s without its input", i, e, want)
		}
	}
	// Pages of 4 refusals of agent:a1 walk back without a gap or a repeat.
	refused := false
	q := Query{Allow: &refused, Principal: "agent:a1", Rule: "T2", Limit: 4, WithInputs: true}
	var seen []string
	for {
		p, err := l.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Entries {
			if e.Allow || e.Principal != "agent:a1" || e.Input == nil {
				t.Fatalf("%+v does not match", e)
			}
			seen = append(seen, e.DecisionID)
		}
		if p.Next == "" {
			break
		}
		q.Cursor = p.Next
	}
	var want []string
	for _, e := range all.Entries {
		if !e.Allow && e.Principal == "agent:a1" {
			want = append(want, e.DecisionID)
		}
	}
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Fatalf("paged %v, want %v", seen, want)
	}
	// A time window: [since, until).
	p, err := l.Query(Query{Since: base.Add(50 * time.Second), Until: base.Add(55 * time.Second)})
	if err != nil || len(p.Entries) != 5 || p.Entries[0].DecisionID != "d54" || p.Entries[4].DecisionID != "d50" {
		t.Fatalf("window: %+v %v", p.Entries, err)
	}
	if _, err := l.Query(Query{Cursor: "garbage"}); !errors.Is(err, ErrBadCursor) {
		t.Fatalf("a bad cursor: %v", err)
	}
	if _, err := l.Query(Query{Limit: MaxQueryLimit + 1}); err == nil {
		t.Fatal("a limit past the maximum was accepted")
	}
}

func TestAnInputTooLargeIsLeftOutAndSaysSo(t *testing.T) {
	t.Parallel()
	big := json.RawMessage(`{"x":"` + strings.Repeat("a", MaxInputBytes) + `"}`)
	b := Bounded(Entry{DecisionID: "d", Input: big})
	if b.Input != nil || !strings.Contains(b.InputOmitted, "more than") {
		t.Fatalf("bounded: %d bytes of input, omitted %q", len(b.Input), b.InputOmitted)
	}
}

// A principal JSON escapes (a subject with < or &) is still found.
func TestQueryFindsAPrincipalJSONEscapes(t *testing.T) {
	t.Parallel()
	l, err := Open(Config{Path: filepath.Join(t.TempDir(), "decisions.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Write(Entry{Time: time.Now(), DecisionID: "d1", Entrypoint: "authz", Principal: "agent:a<b&c"}); err != nil {
		t.Fatal(err)
	}
	p, err := l.Query(Query{Principal: "agent:a<b&c"})
	if err != nil || len(p.Entries) != 1 {
		t.Fatalf("%+v %v", p.Entries, err)
	}
}
