package client

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// FuzzReadProblem feeds readProblem any error answer: status, Content-Type,
// Retry-After and body. The problem always carries the HTTP status and a
// title when the status has one; a problem document (a JSON body of type
// problem+json or json that has a code, title or detail) is read member for
// member; any other body becomes an excerpt: one line of printable text,
// at most excerptLen bytes and "...". Retry-After is never negative.
func FuzzReadProblem(f *testing.F) {
	f.Fuzz(func(t *testing.T, status int, ctype, retry string, body []byte) {
		status = 300 + int(uint(status)%300) // readProblem sees what is not 2xx
		resp := &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body))}
		resp.Header.Set("Content-Type", ctype)
		resp.Header.Set("Retry-After", retry)
		p := readProblem(resp)
		if p.Status != status {
			t.Fatalf("status %d, want %d", p.Status, status)
		}
		if p.Title == "" && http.StatusText(status) != "" {
			t.Fatalf("no title for a %d", status)
		}
		if p.RetryAfter < 0 {
			t.Fatalf("Retry-After %q read as %v", retry, p.RetryAfter)
		}
		if msg := p.Error(); !strings.HasPrefix(msg, strconv.Itoa(status)+" ") {
			t.Fatalf("Error() = %q", msg)
		}
		if p.Denied() != (p.Code == CodePolicyDenied || (len(p.RuleIDs) > 0 && slices.Contains([]int{403, 409, 429}, status))) {
			t.Fatalf("Denied() = %v for %+v", p.Denied(), p)
		}
		data := body[:min(len(body), maxProblemBody)]
		var doc Problem
		mt, _, _ := mime.ParseMediaType(ctype)
		isDoc := (mt == "application/problem+json" || mt == "application/json") &&
			json.Unmarshal(data, &doc) == nil && (doc.Code != "" || doc.Title != "" || doc.Detail != "")
		if isDoc {
			printableMembers(&doc)
			if p.Type != doc.Type || p.Code != doc.Code || p.Detail != doc.Detail || p.Field != doc.Field ||
				!slices.Equal(p.RuleIDs, doc.RuleIDs) || !slices.Equal(p.Violations, doc.Violations) ||
				p.DecisionID != doc.DecisionID || p.RequestID != doc.RequestID ||
				(doc.Title != "" && p.Title != doc.Title) {
				t.Fatalf("problem document %s read as %+v", data, p)
			}
			for _, r := range p.Error() {
				if r != ' ' && !unicode.IsPrint(r) {
					t.Fatalf("Error() %q of the problem document %s holds the unprintable %U", p.Error(), data, r)
				}
			}
			return
		}
		if p.Code != "" || p.Type != "" || p.Field != "" || p.RuleIDs != nil || p.DecisionID != "" {
			t.Fatalf("a body that is no problem document gave members: %+v", p)
		}
		d := p.Detail
		if len(d) > excerptLen+len("...") || !utf8.ValidString(d) || d != strings.TrimSpace(d) || strings.Contains(d, "  ") {
			t.Fatalf("excerpt %q of %q is not one trimmed line of at most %d bytes", d, data, excerptLen)
		}
		for _, r := range d {
			if r != ' ' && !unicode.IsPrint(r) {
				t.Fatalf("excerpt %q holds the unprintable %U", d, r)
			}
		}
	})
}

// FuzzRetryAfter: delay-seconds read as that many seconds (capped at the
// longest time.Duration, never wrapped), an HTTP date in the future as
// the time until it, anything else as zero.
func FuzzRetryAfter(f *testing.F) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d := retryAfter(v, now)
		if d < 0 {
			t.Fatalf("retryAfter(%q) = %v", v, d)
		}
		if n, err := strconv.Atoi(v); err == nil {
			want := time.Duration(0)
			switch {
			case n < 0:
			case int64(n) > math.MaxInt64/int64(time.Second):
				want = time.Duration(math.MaxInt64)
			default:
				want = time.Duration(n) * time.Second
			}
			if d != want {
				t.Fatalf("retryAfter(%q) = %v, want %v", v, d, want)
			}
			return
		}
		if at, err := http.ParseTime(v); err == nil {
			if want := max(0, at.Sub(now)); d != want {
				t.Fatalf("retryAfter(%q) = %v, want %v", v, d, want)
			}
			return
		}
		if d != 0 {
			t.Fatalf("retryAfter(%q) = %v for a value that is neither seconds nor a date", v, d)
		}
	})
}

// Regression (FuzzRetryAfter): a delay past the longest Duration wrapped
// to a negative one ("retry after: -1s").
func TestARetryAfterPastTheLongestDurationDoesNotWrap(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for _, v := range []string{"9223372037", "9223372036854775807", "99999999999"} {
		if got := retryAfter(v, now); got != time.Duration(math.MaxInt64) {
			t.Errorf("retryAfter(%q) = %v, want the longest Duration", v, got)
		}
	}
	if got := retryAfter("9223372036", now); got != 9223372036*time.Second {
		t.Errorf("the longest whole-second delay = %v", got)
	}
}

// A problem document's members reach a terminal (the CLI prints them):
// a detail quoting a task's error with escape sequences must not steer it.
func TestAProblemDocumentsMembersArePrintable(t *testing.T) {
	t.Parallel()
	body := `{"code":"sandbox_ended","title":"The sandbox has ended","detail":"failed: \u001b]0;owned\u0007\u001b[2J\u009b31mred\u202e\nnext",` +
		`"rule_ids":["T3\u001b[1m"],"violations":[{"rule":"T3","msg":"m\u001b[0m"}],"end_reason":"lost\u0000"}`
	resp := &http.Response{StatusCode: 410, Header: http.Header{"Content-Type": {"application/problem+json"}}, Body: io.NopCloser(strings.NewReader(body))}
	p := readProblem(resp)
	if want := "failed: ]0;owned[2J31mred next"; p.Detail != want {
		t.Errorf("detail %q, want %q", p.Detail, want)
	}
	if p.RuleIDs[0] != "T3[1m" || p.Violations[0].Msg != "m[0m" || p.EndReason != "lost" {
		t.Errorf("members kept controls: %+v", p)
	}
	if strings.ContainsAny(p.Error(), "\x1b\x07\u009b\u202e\n") {
		t.Errorf("Error() %q holds a control character", p.Error())
	}
}

// Regression (FuzzReadProblem): an excerpt kept C1 controls (U+009B is a
// terminal's CSI) and bidi overrides, so a proxy's error page could steer
// the terminal that prints the error.
func TestAnExcerptKeepsOnlyPrintableText(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"a\u009b31mb":             "a31mb",
		"file\u202etxt.exe":       "filetxt.exe",
		"no\u00a0break\u2028line": "no break line",
		"bad\x1b[31m\x00 input":   "bad[31m input",
		"é and 日本":                "é and 日本",
	}
	for in, want := range cases {
		if got := excerpt([]byte(in)); got != want {
			t.Errorf("excerpt(%q) = %q, want %q", in, got, want)
		}
	}
}
