// Package replay re-decides logged decisions under a candidate bundle and
// reports what would change: the decisions that flip from allow to deny,
// from deny to allow, and the refusals whose rule ids change, grouped by
// rule id with counts and example decision ids. A reviewer runs it before
// a bundle ships (`sandgate policy replay`, POST /v1/policy/replay); any
// deny→allow flip is a loosening that needs a reviewer's sign-off.
//
// Only decisions logged with their input (decision_log.include_inputs)
// can be replayed; the others are counted as skipped, by reason.
package replay

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"sandgate/gateway/audit"
	"sandgate/policies"
)

// Kinds of flip.
const (
	AllowToDeny = "allow_to_deny"
	DenyToAllow = "deny_to_allow"
	// RuleAdded and RuleRemoved are refusals that stay refusals with a rule
	// id more or fewer.
	RuleAdded   = "rule_added"
	RuleRemoved = "rule_removed"
)

// MaxExamples is how many decision ids a group names.
const MaxExamples = 3

// Options bound a replay.
type Options struct {
	// Since (inclusive) and Until (exclusive) select logged decisions by
	// time; zero means unbounded.
	Since, Until time.Time
	// Limit stops after this many replayed decisions; 0 means no limit.
	Limit int
}

// Group is every flip of one kind and rule id.
type Group struct {
	Kind     string   `json:"kind"`
	Rule     string   `json:"rule"`
	Count    int      `json:"count"`
	Examples []string `json:"example_decision_ids"`
}

// Report is what a replay found.
type Report struct {
	CandidateRevision string `json:"candidate_revision"`
	// LoggedRevisions are the revisions that made the replayed decisions.
	LoggedRevisions []string `json:"logged_revisions"`
	Replayed        int      `json:"replayed"`
	Unchanged       int      `json:"unchanged"`
	// Skipped counts the decisions not replayed, by reason.
	Skipped map[string]int `json:"skipped"`
	// Flips counts the changed decisions by kind (a decision whose rules
	// change both ways counts once as changed).
	Flips  map[string]int `json:"flips"`
	Groups []Group        `json:"groups"`
	// Truncated says Options.Limit stopped the replay.
	Truncated bool `json:"truncated"`
}

// Loosens reports whether any logged refusal would now be allowed.
func (r Report) Loosens() bool { return r.Flips[DenyToAllow] > 0 }

// Replayer re-decides entries one at a time.
type Replayer struct {
	candidate policies.Decider
	opts      Options
	report    Report
	groups    map[[2]string]*Group
	revisions map[string]bool
}

// New returns a replayer deciding with candidate.
func New(candidate policies.Decider, opts Options) *Replayer {
	return &Replayer{
		candidate: candidate, opts: opts, groups: map[[2]string]*Group{}, revisions: map[string]bool{},
		report: Report{CandidateRevision: candidate.Revision(), Skipped: map[string]int{}, Flips: map[string]int{}},
	}
}

// ErrLimit is returned by Add once Options.Limit decisions were replayed.
var ErrLimit = fmt.Errorf("replay: limit reached")

// Add replays one logged decision. It returns ErrLimit when the limit is
// reached, and an error when ctx is done; a decision the candidate cannot
// make (an evaluation error) is counted as skipped.
func (r *Replayer) Add(ctx context.Context, e audit.Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.opts.Limit > 0 && r.report.Replayed >= r.opts.Limit {
		r.report.Truncated = true
		return ErrLimit
	}
	switch {
	case !r.opts.Since.IsZero() && e.Time.Before(r.opts.Since), !r.opts.Until.IsZero() && !e.Time.Before(r.opts.Until):
		return nil
	case e.Error != "":
		r.report.Skipped["logged_error"]++
		return nil
	case len(e.Input) == 0:
		r.report.Skipped["no_input"]++
		return nil
	}
	ep, err := policies.ParseEntrypoint(e.Entrypoint)
	if err != nil {
		r.report.Skipped["unknown_entrypoint"]++
		return nil
	}
	in, err := policies.ParseInputBytes(e.Input)
	if err != nil {
		r.report.Skipped["bad_input"]++
		return nil
	}
	d, err := r.candidate.Decide(ctx, ep, in)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.report.Skipped["candidate_error"]++
		return nil
	}
	r.report.Replayed++
	r.revisions[e.Revision] = true
	before, after := sorted(e.RuleIDs), d.RuleIDs()
	switch {
	case e.Allow && !d.Allow:
		r.report.Flips[AllowToDeny]++
		r.group(AllowToDeny, after, e.DecisionID)
	case !e.Allow && d.Allow:
		r.report.Flips[DenyToAllow]++
		r.group(DenyToAllow, before, e.DecisionID)
	case !e.Allow && !slices.Equal(before, after):
		r.report.Flips["rules_changed"]++
		r.group(RuleAdded, minus(after, before), e.DecisionID)
		r.group(RuleRemoved, minus(before, after), e.DecisionID)
	default:
		r.report.Unchanged++
	}
	return nil
}

func (r *Replayer) group(kind string, rules []string, id string) {
	if len(rules) == 0 {
		rules = []string{"(none)"}
	}
	for _, rule := range rules {
		g := r.groups[[2]string{kind, rule}]
		if g == nil {
			g = &Group{Kind: kind, Rule: rule, Examples: []string{}}
			r.groups[[2]string{kind, rule}] = g
		}
		g.Count++
		if len(g.Examples) < MaxExamples {
			g.Examples = append(g.Examples, id)
		}
	}
}

// kindOrder puts loosenings first.
var kindOrder = map[string]int{DenyToAllow: 0, RuleRemoved: 1, AllowToDeny: 2, RuleAdded: 3}

// Report returns what was found so far: groups by kind (deny→allow
// first), then count, then rule id.
func (r *Replayer) Report() Report {
	rep := r.report
	rep.Groups = make([]Group, 0, len(r.groups))
	for _, g := range r.groups {
		rep.Groups = append(rep.Groups, *g)
	}
	slices.SortFunc(rep.Groups, func(a, b Group) int {
		return cmp.Or(cmp.Compare(kindOrder[a.Kind], kindOrder[b.Kind]), cmp.Compare(b.Count, a.Count), cmp.Compare(a.Rule, b.Rule))
	})
	rep.LoggedRevisions = make([]string, 0, len(r.revisions))
	for rev := range r.revisions {
		rep.LoggedRevisions = append(rep.LoggedRevisions, rev)
	}
	slices.Sort(rep.LoggedRevisions)
	return rep
}

func sorted(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

// minus is a without b (both sorted).
func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if _, found := slices.BinarySearch(b, x); !found {
			out = append(out, x)
		}
	}
	return out
}
