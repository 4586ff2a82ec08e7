package policies

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
)

// Rule is one annotated rule of the bundle that can deny, as a security
// reviewer sees it in `sandgate policy info` and GET /v1/policy.
type Rule struct {
	ID          string     `json:"id"`          // rule id (custom.id), e.g. "H1" (docs/policies.md, "Every rule")
	Title       string     `json:"title"`       // METADATA title
	Description string     `json:"description"` // METADATA description
	Severity    string     `json:"severity"`    // custom.severity: critical, high, medium or low
	Entrypoint  Entrypoint `json:"entrypoint"`  // the decision it belongs to
	Location    string     `json:"location"`    // file:row in the bundle
	// Mode is how a violation of the rule is enforced (ModeDeny, ModeWarn,
	// ModeDryRun), from the bundle's data.sandgate.config.enforcement.
	Mode string `json:"mode"`
}

// Enforcement modes of a rule (data.sandgate.config.enforcement).
const (
	// ModeDeny: a violation refuses the request (the default).
	ModeDeny = "deny"
	// ModeWarn: the request is allowed; the violation is returned to the
	// caller (warnings member, Warning header) and logged.
	ModeWarn = "warn"
	// ModeDryRun: the request is allowed; the violation is only logged.
	ModeDryRun = "dryrun"
)

// denyRuleName is the partial set every denying rule contributes to.
const denyRuleName = ast.Var("violations")

// severities are the accepted custom.severity values.
var severities = []string{"critical", "high", "medium", "low"}

// ErrAnnotations means a rule that can deny lacks its METADATA (title,
// description, custom.id, custom.severity) or names another rule id in its
// head than in its annotation. Such a bundle is refused.
var ErrAnnotations = errors.New("policies: rule annotations")

// rulesOf lists every rule of b's entrypoint packages that can deny, and
// checks each carries complete METADATA whose custom.id equals the literal
// rule id of its head. It also checks each entrypoint package has exactly one
// rule marked `entrypoint: true`, named decision.
func rulesOf(b *bundle.Bundle) ([]Rule, error) {
	var (
		rules    []Rule
		problems []string
		decision = map[Entrypoint]int{}
	)
	for _, mf := range b.Modules {
		m := mf.Parsed
		ep, ok := entrypointOf(m.Package.Path)
		if !ok {
			continue
		}
		for _, r := range m.Rules {
			ref := r.Head.Ref()
			loc := fmt.Sprintf("%s:%d", mf.Path, r.Location.Row)
			for _, a := range r.Annotations {
				if a.Entrypoint {
					if !ref.Equal(ast.Ref{ast.VarTerm("decision")}) {
						problems = append(problems, loc+": only the decision rule may be an entrypoint")
					}
					decision[ep]++
				}
			}
			if len(ref) != 1 || ref[0].Value.Compare(denyRuleName) != 0 {
				continue
			}
			rule, err := denyRule(r)
			if err != nil {
				problems = append(problems, loc+": "+err.Error())
				continue
			}
			rule.Entrypoint, rule.Location, rule.Mode = ep, loc, ModeDeny
			rules = append(rules, rule)
		}
	}
	for _, ep := range Entrypoints {
		if decision[ep] != 1 {
			problems = append(problems, fmt.Sprintf("package sandgate.%s: %d rules marked entrypoint, want exactly 1 (decision)", ep, decision[ep]))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return nil, fmt.Errorf("%w:\n  %s", ErrAnnotations, strings.Join(problems, "\n  "))
	}
	slices.SortFunc(rules, func(a, b Rule) int {
		return cmp.Or(cmp.Compare(a.Entrypoint, b.Entrypoint), cmp.Compare(a.ID, b.ID), cmp.Compare(a.Location, b.Location))
	})
	return rules, nil
}

// denyRule reads the annotation of one `violations contains {...}` rule.
func denyRule(r *ast.Rule) (Rule, error) {
	if len(r.Annotations) != 1 {
		return Rule{}, fmt.Errorf("rule can deny but has %d METADATA blocks, want 1", len(r.Annotations))
	}
	a := r.Annotations[0]
	id, _ := a.Custom["id"].(string)
	sev, _ := a.Custom["severity"].(string)
	var missing []string
	if strings.TrimSpace(a.Title) == "" {
		missing = append(missing, "title")
	}
	if strings.TrimSpace(a.Description) == "" {
		missing = append(missing, "description")
	}
	if id == "" {
		missing = append(missing, "custom.id")
	}
	if !slices.Contains(severities, sev) {
		missing = append(missing, "custom.severity (one of "+strings.Join(severities, ", ")+")")
	}
	if len(missing) > 0 {
		return Rule{}, fmt.Errorf("rule can deny but its METADATA lacks %s", strings.Join(missing, ", "))
	}
	head, ok := headRuleID(r)
	if !ok {
		return Rule{}, errors.New(`head must be a literal object {"rule": "<ID>", "msg": ...}`)
	}
	if head != id {
		return Rule{}, fmt.Errorf("head names rule %q but custom.id is %q", head, id)
	}
	return Rule{ID: id, Title: a.Title, Description: a.Description, Severity: sev}, nil
}

// headRuleID returns the literal "rule" of a `violations contains {...}` head.
func headRuleID(r *ast.Rule) (string, bool) {
	if r.Head.Key == nil {
		return "", false
	}
	obj, ok := r.Head.Key.Value.(ast.Object)
	if !ok {
		return "", false
	}
	t := obj.Get(ast.InternedTerm("rule"))
	if t == nil {
		return "", false
	}
	s, ok := t.Value.(ast.String)
	return string(s), ok
}

// entrypointOf maps data.sandgate.<ep> to its Entrypoint.
func entrypointOf(path ast.Ref) (Entrypoint, bool) {
	if len(path) != 3 || path[1].Value.Compare(ast.String("sandgate")) != 0 {
		return "", false
	}
	s, ok := path[2].Value.(ast.String)
	if !ok {
		return "", false
	}
	ep, err := ParseEntrypoint(string(s))
	return ep, err == nil
}
