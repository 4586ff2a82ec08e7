package policies

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/open-policy-agent/opa/v1/rego"
)

// Violation is one reason for a deny: a stable rule id (docs/policies.md, e.g.
// "H1", or "INPUT" for missing or malformed input) and a message for people.
type Violation struct {
	Rule string `json:"rule"`
	Msg  string `json:"msg"`
	// Mode is set on Warnings (ModeWarn) and DryRun (ModeDryRun); a
	// violation that refuses has none.
	Mode string `json:"mode,omitempty"`
}

// Decision is the outcome of one evaluation. Allow is true only when the
// policy returned allow with no violation.
type Decision struct {
	Allow bool `json:"allow"`
	// Violations are the rules that refuse (mode deny).
	Violations []Violation `json:"violations"`
	// Warnings are violations of rules in mode warn: the request is
	// allowed and the caller told. DryRun are those of rules in mode
	// dryrun: allowed and only logged.
	Warnings   []Violation   `json:"warnings,omitempty"`
	DryRun     []Violation   `json:"dryrun,omitempty"`
	ID         string        `json:"decision_id"`
	Entrypoint Entrypoint    `json:"entrypoint"`
	Revision   string        `json:"revision"`
	Duration   time.Duration `json:"-"`
}

// RuleIDs returns the distinct rule ids of the violations, sorted.
func (d Decision) RuleIDs() []string {
	ids := make([]string, 0, len(d.Violations))
	for _, v := range d.Violations {
		ids = append(ids, v.Rule)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// fill checks that rs is exactly one decision document
// {"allow": bool, "violations": [{"rule": string, "msg": string}...]} whose
// allow agrees with its violations, and copies it into d.
func (d *Decision) fill(rs rego.ResultSet) error {
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return ErrUndefined
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return fmt.Errorf("%w: %d results", ErrMalformedDecision, len(rs))
	}
	doc, ok := rs[0].Expressions[0].Value.(map[string]any)
	if !ok {
		return fmt.Errorf("%w: decision is %T, not an object", ErrMalformedDecision, rs[0].Expressions[0].Value)
	}
	allow, ok := doc["allow"].(bool)
	if !ok {
		return fmt.Errorf("%w: allow is %T, not a boolean", ErrMalformedDecision, doc["allow"])
	}
	vs, err := violationsOf(doc, "violations", "", true)
	if err != nil {
		return err
	}
	if d.Warnings, err = violationsOf(doc, "warnings", ModeWarn, false); err != nil {
		return err
	}
	if d.DryRun, err = violationsOf(doc, "dryrun", ModeDryRun, false); err != nil {
		return err
	}
	if allow != (len(vs) == 0) {
		return fmt.Errorf("%w: allow=%t with %d violations", ErrMalformedDecision, allow, len(vs))
	}
	d.Allow = allow
	d.Violations = vs
	return nil
}

// violationsOf reads the violation set doc[key]: required, or optional
// (absent reads as none), each one marked with mode, sorted.
func violationsOf(doc map[string]any, key, mode string, required bool) ([]Violation, error) {
	v, present := doc[key]
	if !present && !required {
		return nil, nil
	}
	raw, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: %s is %T, not a set or array", ErrMalformedDecision, key, v)
	}
	vs := make([]Violation, 0, len(raw))
	for i, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%w: %s %d is %T, not an object", ErrMalformedDecision, key, i, r)
		}
		rule, _ := m["rule"].(string)
		msg, _ := m["msg"].(string)
		if rule == "" || msg == "" {
			return nil, fmt.Errorf("%w: %s %d lacks a rule id or a message", ErrMalformedDecision, key, i)
		}
		vs = append(vs, Violation{Rule: rule, Msg: msg, Mode: mode})
	}
	slices.SortFunc(vs, func(a, b Violation) int {
		return cmp.Or(cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Msg, b.Msg))
	})
	if !required && len(vs) == 0 {
		return nil, nil
	}
	return vs, nil
}
