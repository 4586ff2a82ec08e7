package attack

import (
	"net/http"
	"strings"
	"testing"

	"sandgate/gateway/apitest"
)

// attack is one named hostile request and what the gateway must answer.
type attack struct {
	name string
	req  apitest.Request
	// as names the token sent as "Bearer <token>" (ignored when req.Auth
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
	check func(t *testing.T, w *world, r apitest.Reply)
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
	rq.Path = w.expand(rq.Path)
	if b, _ := rq.Body.(string); b != "" {
		rq.Body = w.expand(b)
	} else {
		rq.Body = nil // "" sends none
	}
	switch {
	case rq.Auth != "":
		rq.Auth = w.expand(rq.Auth)
	case c.forge != nil:
		rq.Auth = "Bearer " + c.forge(w)
	case c.as != "":
		tok, ok := w.tokens[c.as]
		if !ok {
			t.Fatalf("no token named %q", c.as)
		}
		rq.Auth = "Bearer " + tok
	}
	before := w.snap(t)
	calls := w.sim.Requests()
	r := w.api(t).DoWith(rq)
	nomadCalls := w.sim.Requests() - calls
	after := w.snap(t)

	if c.orInvalid && r.Status == http.StatusBadRequest {
		c.status, c.code, c.rules, c.msg = http.StatusBadRequest, "invalid_request", nil, ""
	}
	if c.code == "" && r.Status != c.status {
		t.Errorf("status %d, want %d: %s", r.Status, c.status, clip(r.Body))
	}
	if c.code != "" { // checkProblem checks the status too
		m := checkProblem(t, r, c.status, c.code, c.rules)
		if c.msg != "" && m != nil && !hasViolation(m, c.msg) {
			t.Errorf("no violation says %q: %s", c.msg, clip(r.Body))
		}
	}
	if !c.nomad && nomadCalls != 0 {
		t.Errorf("the request reached Nomad (%d calls): %v", nomadCalls, lastN(w.sim.RequestLog(), int(nomadCalls)))
	}
	for name, tok := range w.tokens {
		if len(tok) > 20 && strings.Contains(string(r.Body), tok) {
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

// checkProblem checks a problem+json answer as apitest.CheckProblem does
// (status, Content-Type, code, type, title, request id, the rule ids)
// and, the policy having decided, a decision id; with rules nil, that the
// answer names no rule at all: the policy did not decide. It reports and
// goes on; the problem is nil when r is not one.
func checkProblem(t *testing.T, r apitest.Reply, status int, code string, rules []string) map[string]any {
	t.Helper()
	m, _ := apitest.CheckProblem(t, r, status, code, rules...)
	switch {
	case m == nil:
	case rules == nil:
		if _, ok := m["rule_ids"]; ok {
			t.Errorf("rule_ids %v, want none (no policy decision): %s", apitest.RuleIDs(m), clip(r.Body))
		}
	default:
		if id, _ := m["decision_id"].(string); id == "" {
			t.Errorf("a policy refusal without a decision_id: %s", clip(r.Body))
		}
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
