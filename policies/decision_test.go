package policies

import (
	"errors"
	"slices"
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
		{"warnings and dry-run violations come back with their mode", resultOf(map[string]any{"allow": true, "violations": []any{},
			"warnings": []any{map[string]any{"rule": "E3", "msg": "w"}}, "dryrun": []any{map[string]any{"rule": "H1", "msg": "d"}}}), nil,
			Decision{Allow: true, Violations: []Violation{}, Warnings: []Violation{{Rule: "E3", Msg: "w", Mode: ModeWarn}}, DryRun: []Violation{{Rule: "H1", Msg: "d", Mode: ModeDryRun}}}},
		{"warnings that are not a set are malformed", resultOf(map[string]any{"allow": true, "violations": []any{}, "warnings": "E3"}), ErrMalformedDecision, Decision{}},
		{"a warning without a message is malformed", resultOf(map[string]any{"allow": true, "violations": []any{}, "warnings": []any{map[string]any{"rule": "E3"}}}), ErrMalformedDecision, Decision{}},
		{"violations come back sorted by rule then message", resultOf(map[string]any{"allow": false, "violations": []any{
			map[string]any{"rule": "P1", "msg": "b"}, violation, map[string]any{"rule": "P1", "msg": "a"},
		}}), nil, Decision{Violations: []Violation{{Rule: "H1", Msg: "privileged"}, {Rule: "P1", Msg: "a"}, {Rule: "P1", Msg: "b"}}}},
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
			if !slices.Equal(d.Warnings, c.want.Warnings) || !slices.Equal(d.DryRun, c.want.DryRun) {
				t.Fatalf("warnings %+v, dry run %+v; want %+v, %+v", d.Warnings, d.DryRun, c.want.Warnings, c.want.DryRun)
			}
		})
	}
}

func TestRuleIDsAreDistinctAndSorted(t *testing.T) {
	t.Parallel()
	d := Decision{Violations: []Violation{{Rule: "P3", Msg: "a"}, {Rule: "H1", Msg: "b"}, {Rule: "P3", Msg: "c"}}}
	got := d.RuleIDs()
	if len(got) != 2 || got[0] != "H1" || got[1] != "P3" {
		t.Fatalf("RuleIDs = %v", got)
	}
}
