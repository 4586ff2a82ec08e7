package apitest

import (
	"encoding/json"
	"slices"
	"testing"
)

// ProblemType prefixes every problem document's type: the type of code c
// is ProblemType + c (docs/api.md, "Errors").
const ProblemType = "urn:sandgate:problem:"

// ExpectProblem checks that r is the problem document of status and code
// and returns it as a JSON object; what is wrong fails t, after every
// check has reported. It checks the HTTP status, the Content-Type
// application/problem+json, the code, the type ProblemType+code, the
// status member, a title and a request_id; with rules, that each is among
// rule_ids. (A refusal with rule ids need not name a decision: a rate
// limit, Q1, is counted before the policy decides.)
func ExpectProblem(t testing.TB, r Reply, status int, code string, rules ...string) map[string]any {
	t.Helper()
	m, ok := CheckProblem(t, r, status, code, rules...)
	if !ok {
		t.FailNow()
	}
	return m
}

// CheckProblem makes ExpectProblem's checks, reports what is wrong with
// t.Errorf and goes on: ok is false when any check failed. m is nil when
// r is not a problem document at all (another Content-Type, or a body
// that is not a JSON object).
func CheckProblem(t testing.TB, r Reply, status int, code string, rules ...string) (m map[string]any, ok bool) {
	t.Helper()
	ok = true
	fail := func(format string, args ...any) {
		t.Helper()
		ok = false
		t.Errorf(format, args...)
	}
	if r.Status != status {
		fail("status %d, want %d %s: %s", r.Status, status, code, bodyText(r.Body))
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		fail("Content-Type %q, want application/problem+json: %s", ct, bodyText(r.Body))
		return nil, false
	}
	if err := json.Unmarshal(r.Body, &m); err != nil || m == nil {
		fail("the problem is not a JSON object: %v: %s", err, bodyText(r.Body))
		return nil, false
	}
	if m["code"] != code {
		fail("code %v, want %s: %s", m["code"], code, bodyText(r.Body))
	}
	title, _ := m["title"].(string)
	requestID, _ := m["request_id"].(string)
	if m["type"] != ProblemType+code || m["status"] != float64(status) || title == "" || requestID == "" {
		fail("the problem lacks a matching type, status, title or request_id: %s", bodyText(r.Body))
	}
	if len(rules) == 0 {
		return m, ok
	}
	got := RuleIDs(m)
	for _, want := range rules {
		if !slices.Contains(got, want) {
			fail("rule_ids %v lack %s: %s", got, want, bodyText(r.Body))
		}
	}
	return m, ok
}

// RuleIDs are a problem document's rule_ids (nil without the member).
func RuleIDs(m map[string]any) []string {
	raw, ok := m["rule_ids"].([]any)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(raw))
	for _, v := range raw {
		s, _ := v.(string)
		out = append(out, s)
	}
	return out
}
