package policies

import (
	"errors"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"
)

func resultOf(v any) rego.ResultSet {
	return rego.ResultSet{{Expressions: []*rego.ExpressionValue{{Value: v}}}}
}

func TestOnlyAWellFormedDecisionIsAccepted(t *testing.T) {
	t.Parallel()
	violation := map[string]any{"rule": "H1", "msg": "privileged"}
	cases := []struct {
		name    string
		rs      rego.ResultSet
		wantErr error
		want    Decision
	}{
		{"no result is undefined", rego.ResultSet{}, ErrUndefined, Decision{}},
		{"a result without expressions is undefined", rego.ResultSet{{}}, ErrUndefined, Decision{}},
		{"two results are malformed", append(resultOf(nil), resultOf(nil)...), ErrMalformedDecision, Decision{}},
		{"a string is malformed", resultOf("allow"), ErrMalformedDecision, Decision{}},
		{"allow missing is malformed", resultOf(map[string]any{"violations": []any{}}), ErrMalformedDecision, Decision{}},
		{"allow as a string is malformed", resultOf(map[string]any{"allow": "true", "violations": []any{}}), ErrMalformedDecision, Decision{}},
		{"violations missing is malformed", resultOf(map[string]any{"allow": true}), ErrMalformedDecision, Decision{}},
		{"a violation that is not an object is malformed", resultOf(map[string]any{"allow": false, "violations": []any{"H1"}}), ErrMalformedDecision, Decision{}},
		{"a violation without a rule id is malformed", resultOf(map[string]any{"allow": false, "violations": []any{map[string]any{"msg": "m"}}}), ErrMalformedDecision, Decision{}},
		{"a violation without a message is malformed", resultOf(map[string]any{"allow": false, "violations": []any{map[string]any{"rule": "H1"}}}), ErrMalformedDecision, Decision{}},
		{"allow with a violation is malformed", resultOf(map[string]any{"allow": true, "violations": []any{violation}}), ErrMalformedDecision, Decision{}},
		{"deny without a violation is malformed", resultOf(map[string]any{"allow": false, "violations": []any{}}), ErrMalformedDecision, Decision{}},
		{"allow with no violation is an allow", resultOf(map[string]any{"allow": true, "violations": []any{}}), nil, Decision{Allow: true, Violations: []Violation{}}},
		{"violations come back sorted by rule then message", resultOf(map[string]any{"allow": false, "violations": []any{
			map[string]any{"rule": "P1", "msg": "b"}, violation, map[string]any{"rule": "P1", "msg": "a"},
		}}), nil, Decision{Violations: []Violation{{"H1", "privileged"}, {"P1", "a"}, {"P1", "b"}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var d Decision
			err := d.fill(c.rs)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			if err != nil {
				if d.Allow {
					t.Fatal("a malformed decision allowed")
				}
				return
			}
			if d.Allow != c.want.Allow || len(d.Violations) != len(c.want.Violations) {
				t.Fatalf("got %+v, want %+v", d, c.want)
			}
			for i := range d.Violations {
				if d.Violations[i] != c.want.Violations[i] {
					t.Fatalf("violation %d = %+v, want %+v", i, d.Violations[i], c.want.Violations[i])
				}
			}
		})
	}
}

func TestRuleIDsAreDistinctAndSorted(t *testing.T) {
	t.Parallel()
	d := Decision{Violations: []Violation{{"P3", "a"}, {"H1", "b"}, {"P3", "c"}}}
	got := d.RuleIDs()
	if len(got) != 2 || got[0] != "H1" || got[1] != "P3" {
		t.Fatalf("RuleIDs = %v", got)
	}
}
