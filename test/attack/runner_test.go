package attack

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// attack is one named hostile request and what the gateway must answer.
type attack struct {
	name string
	req  request
	// as names the token sent as "Bearer <token>" (ignored when req.auth
	// or forge is set).
	as string
	// forge builds the bearer token from the world (forged tokens).
	forge func(w *world) string

	status int
	// code is the problem's code member; "" for an answer that is not a
	// problem (a refused attack can still be a 200, e.g. an ignored
	// method override).
	code string
	// rules must all be among the problem's rule_ids (and a decision_id
	// present); nil means the policy did not decide: no rule_ids at all.
	rules []string
	// msg, when set, must be part of one of the problem's violations: the
	// policy refused for this reason, not another.
	msg string
	// orInvalid also accepts a 400 invalid_request without a decision: a
	// decoder that refuses the body outright is as safe as a policy that
	// judges the value the decoder kept.
	orInvalid bool
	// nomad says the request may reach Nomad; otherwise the simulator
	// must see no request at all while it is served.
	nomad bool
	// check adds assertions on the answer.
	check func(t *testing.T, w *world, r response)
}

// run runs the cases one after another in one world (so that each case's
// before/after snapshot sees only its own request).
func run(t *testing.T, w *world, cases []attack) {
	t.Helper()
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.name] {
			t.Fatalf("two cases are named %q", c.name)
		}
		seen[c.name] = true
		t.Run(c.name, func(t *testing.T) { runOne(t, w, c) })
	}
}

func runOne(t *testing.T, w *world, c attack) {
	rq := c.req
	rq.path = w.expand(rq.path)
	rq.body = w.expand(rq.body)
	switch {
	case rq.auth != "":
		rq.auth = w.expand(rq.auth)
	case c.forge != nil:
		rq.auth = "Bearer " + c.forge(w)
	case c.as != "":
		tok, ok := w.tokens[c.as]
		if !ok {
			t.Fatalf("no token named %q", c.as)
		}
		rq.auth = "Bearer " + tok
	}
	before := w.snap(t)
	calls := w.sim.Requests()
	r := w.do(t, rq)
	nomadCalls := w.sim.Requests() - calls
	after := w.snap(t)

	if c.orInvalid && r.status == http.StatusBadRequest {
		c.status, c.code, c.rules, c.msg = http.StatusBadRequest, "invalid_request", nil, ""
	}
	if r.status != c.status {
		t.Errorf("status %d, want %d: %s", r.status, c.status, clip(r.body))
	}
	if c.code != "" {
		m := expectProblem(t, r, c.status, c.code, c.rules)
		if c.msg != "" && m != nil && !hasViolation(m, c.msg) {
			t.Errorf("no violation says %q: %s", c.msg, clip(r.body))
		}
	}
	if !c.nomad && nomadCalls != 0 {
		t.Errorf("the request reached Nomad (%d calls): %v", nomadCalls, lastN(w.sim.RequestLog(), int(nomadCalls)))
	}
	for name, tok := range w.tokens {
		if len(tok) > 20 && strings.Contains(string(r.body), tok) {
			t.Errorf("the answer shows token %s", name)
		}
	}
	if d := before.diff(after); d != "" {
		t.Errorf("the world changed:\n%s", d)
	}
	if c.check != nil {
		c.check(t, w, r)
	}
}

// expectProblem checks a problem+json answer: status, code, type, title,
// request id, and the rule ids (nil: none at all).
func expectProblem(t *testing.T, r response, status int, code string, rules []string) map[string]any {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json: %s", ct, clip(r.body))
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Errorf("the problem is not a JSON object: %v: %s", err, clip(r.body))
		return nil
	}
	if m["code"] != code {
		t.Errorf("code %v, want %s: %s", m["code"], code, clip(r.body))
	}
	if m["type"] != "urn:sandgate:problem:"+code || m["status"] != float64(status) || m["title"] == "" || m["request_id"] == "" {
		t.Errorf("the problem lacks a matching type, status, title or request_id: %s", clip(r.body))
	}
	got := ruleIDs(m)
	if rules == nil {
		if _, ok := m["rule_ids"]; ok {
			t.Errorf("rule_ids %v, want none (no policy decision): %s", got, clip(r.body))
		}
		return m
	}
	for _, want := range rules {
		if !slices.Contains(got, want) {
			t.Errorf("rule_ids %v lack %s: %s", got, want, clip(r.body))
		}
	}
	if id, _ := m["decision_id"].(string); id == "" {
		t.Errorf("a policy refusal without a decision_id: %s", clip(r.body))
	}
	return m
}

func hasViolation(m map[string]any, msg string) bool {
	vs, _ := m["violations"].([]any)
	for _, v := range vs {
		o, _ := v.(map[string]any)
		if s, _ := o["msg"].(string); strings.Contains(s, msg) {
			return true
		}
	}
	return false
}

func ruleIDs(m map[string]any) []string {
	raw, _ := m["rule_ids"].([]any)
	out := make([]string, 0, len(raw))
	for _, v := range raw {
		s, _ := v.(string)
		out = append(out, s)
	}
	return out
}

func clip(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "..."
	}
	return string(b)
}

func lastN(s []string, n int) []string {
	if n > len(s) {
		n = len(s)
	}
	return s[len(s)-n:]
}

// jsonOf decodes an answer as a JSON object.
func jsonOf(t *testing.T, r response) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("status %d: not a JSON object: %v: %s", r.status, err, clip(r.body))
	}
	return m
}
