// Package escape is the escape audit: a built-in corpus of known-dangerous
// variations of a rendered sandbox job (privileged, added capabilities, the
// Docker socket, host paths and devices, host network, services and ports,
// workload identity, a priority in the apps' band, a job without the
// prefix, a control-plane node, ...) and of API requests (token scope
// escapes), each decided by a bundle, and cases generated from every
// profile of the bundle's own data (profiles.go: a profile that adds a
// capability beyond the workspace set is an escape). A bundle that admits any of them is
// one a reviewer loosened, by accident or not: `sandgate policy audit`
// lists them, and the gateway refuses such a bundle at start and at every
// reload unless the operator accepts each case by its id (logged).
//
// Each case starts from an input the shipped bundle allows (a job exactly
// as the renderer emits it for the candidate's own settings, a request a
// token may make) and changes one thing. The shipped bundle denies each
// with the rule the case names, a job change with exactly that rule
// (escape_test.go).
package escape

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"sandgate/policies"
)

// Case is one dangerous variation.
type Case struct {
	// ID is stable: an operator accepts a case by it.
	ID string
	// What says what the variation does, for a reviewer.
	What string
	// Rule is the rule of the shipped bundle that refuses it.
	Rule       string
	Entrypoint policies.Entrypoint
	// input builds the case's input for a bundle's settings.
	input func(s policies.Settings) (any, error)
}

// Finding is a case a bundle admitted.
type Finding struct {
	Case
	DecisionID string
}

// Report is the outcome of one audit.
type Report struct {
	Revision string
	Checked  int
	// Admitted are the cases the bundle allowed, in corpus order.
	Admitted []Finding
	// Accepted are the admitted cases the operator accepted by id.
	Accepted []Finding
}

// ErrEscapes means the bundle admits cases nobody accepted.
var ErrEscapes = errors.New("escape: the bundle admits known-dangerous inputs")

// Corpus returns the fixed cases, admission first, in a stable order: the
// ones every bundle is audited with whatever its data holds.
func Corpus() []Case {
	return slices.Concat(admissionCases(), requestCases())
}

// CorpusFor returns every case a bundle with settings s is audited with:
// the fixed ones, then the cases generated from the profiles of its data
// (profiles.go: any profile, by name; one that breaks the profile
// contract is a case its bundle must refuse).
func CorpusFor(s policies.Settings) []Case {
	return slices.Concat(admissionCases(), profileCases(s), requestCases())
}

// Audit decides every case of CorpusFor(d.Settings()) with d. Cases whose
// id is in accept are reported as Accepted instead of Admitted. An
// evaluation error is returned as an error: an audit that did not run
// passes nothing.
func Audit(ctx context.Context, d policies.Decider, accept []string) (Report, error) {
	r := Report{Revision: d.Revision()}
	s := d.Settings()
	for _, c := range CorpusFor(s) {
		v, err := c.input(s)
		if err != nil {
			return r, fmt.Errorf("escape: case %s: %w", c.ID, err)
		}
		in, err := toValue(v)
		if err != nil {
			return r, fmt.Errorf("escape: case %s: %w", c.ID, err)
		}
		dec, err := d.Decide(ctx, c.Entrypoint, in)
		if err != nil {
			return r, fmt.Errorf("escape: case %s: decision %s failed: %w", c.ID, dec.ID, err)
		}
		r.Checked++
		if !dec.Allow {
			continue
		}
		f := Finding{Case: c, DecisionID: dec.ID}
		if slices.Contains(accept, c.ID) {
			r.Accepted = append(r.Accepted, f)
		} else {
			r.Admitted = append(r.Admitted, f)
		}
	}
	return r, nil
}

// Err is nil when nothing unaccepted was admitted, else an ErrEscapes
// naming every admitted case.
func (r Report) Err() error {
	if len(r.Admitted) == 0 {
		return nil
	}
	ids := make([]string, len(r.Admitted))
	for i, f := range r.Admitted {
		ids[i] = f.ID + " (" + f.Rule + ")"
	}
	return fmt.Errorf("%w: revision %s admits %d of %d: %s", ErrEscapes, r.Revision, len(r.Admitted), r.Checked, strings.Join(ids, ", "))
}

// Check is the audit as a policies.Check, for the engine to run on every
// bundle before it serves. Cases whose ids are in accept may be admitted;
// logAccepted is told about each one that is, every time.
func Check(accept []string, logAccepted func(revision string, f Finding)) (policies.Check, error) {
	known := map[string]bool{}
	for _, c := range Corpus() {
		known[c.ID] = true
	}
	for _, id := range accept {
		// A profile case exists only for a bundle whose data has the
		// profile: its id can only be checked for its shape here.
		if !known[id] && !isProfileCaseID(id) {
			return nil, fmt.Errorf("escape: no case %q to accept (sandgate policy audit lists them)", id)
		}
	}
	return func(ctx context.Context, d policies.Decider) error {
		r, err := Audit(ctx, d, accept)
		if err != nil {
			return err
		}
		if logAccepted != nil {
			for _, f := range r.Accepted {
				logAccepted(r.Revision, f)
			}
		}
		return r.Err()
	}, nil
}
