package escape

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"sandgate/policies"
	"sandgate/policies/policytest"
	"sandgate/render"
)

func engine(t *testing.T, cfg policies.Config) *policies.Engine {
	t.Helper()
	e, err := policies.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// The shipped bundle admits every base input and denies every case with
// the rule the case names (a job change with exactly that rule).
func TestTheShippedBundleRefusesEveryCaseWithItsRule(t *testing.T) {
	t.Parallel()
	e := engine(t, policies.Config{})
	ctx := context.Background()
	for _, c := range [][2]render.Profile{{render.ProfileStrict}, {render.ProfileWorkspace}} {
		for _, n := range []render.Network{render.NetworkNone, render.NetworkEgress} {
			d, err := BaseAdmission(e.Settings(), c[0], n)
			if err != nil {
				t.Fatal(err)
			}
			v, err := toValue(d)
			if err != nil {
				t.Fatal(err)
			}
			dec, err := e.Decide(ctx, policies.Admission, v)
			if err != nil || !dec.Allow {
				t.Fatalf("the base job %s/%s is not admitted: %+v %v", c[0], n, dec.Violations, err)
			}
		}
	}
	for _, c := range Corpus() {
		t.Run(c.ID, func(t *testing.T) {
			t.Parallel()
			v, err := c.input(e.Settings())
			if err != nil {
				t.Fatal(err)
			}
			in, err := toValue(v)
			if err != nil {
				t.Fatal(err)
			}
			dec, err := e.Decide(ctx, c.Entrypoint, in)
			if err != nil {
				t.Fatal(err)
			}
			if dec.Allow {
				t.Fatalf("%s (%s) was admitted", c.ID, c.What)
			}
			// A job change is refused by exactly its rule (what a reviewer
			// reads); a request may break several at once (an agent on a
			// route of the operators' is outside its role and its scope).
			got := dec.RuleIDs()
			switch {
			case c.Entrypoint == policies.Admission && (len(got) != 1 || got[0] != c.Rule):
				t.Fatalf("%s denied by %v, want exactly [%s]: %+v", c.ID, got, c.Rule, dec.Violations)
			case !slices.Contains(got, c.Rule):
				t.Fatalf("%s denied by %v, want %s among them: %+v", c.ID, got, c.Rule, dec.Violations)
			}
		})
	}
	r, err := Audit(ctx, e, nil)
	if err != nil || r.Err() != nil || r.Checked != len(Corpus()) {
		t.Fatalf("audit of the shipped bundle: %+v, %v, %v", r, err, r.Err())
	}
}

func TestTheCorpusIDsAreUnique(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, c := range Corpus() {
		if seen[c.ID] || c.ID == "" || c.Rule == "" || c.What == "" {
			t.Errorf("case %+v: duplicate or incomplete", c)
		}
		seen[c.ID] = true
	}
	if len(seen) < 90 {
		t.Fatalf("the corpus has %d cases", len(seen))
	}
}

// loosenedBundle is the embedded bundle with H1 (privileged, capabilities,
// the driver) set to warn: a loosening a reviewer could make by accident.
func loosenedBundle(t *testing.T) string {
	t.Helper()
	edited := false
	dir := policytest.CopyWithSmallTests(t, policies.EmbeddedBundle(), policies.EntrypointNames())
	return policytest.EditFile(t, dir, "data.json", func(data []byte) []byte {
		edited = strings.Contains(string(data), `"enforcement": {}`)
		return []byte(strings.Replace(string(data), `"enforcement": {}`, `"enforcement": {"H1": "warn"}`, 1))
	}, &edited)
}

func TestTheAuditFindsABundleThatAdmitsPrivileged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := engine(t, policies.Config{Dir: loosenedBundle(t)})
	r, err := Audit(ctx, e, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range r.Admitted {
		ids = append(ids, f.ID)
		if f.Rule != "H1" || f.DecisionID == "" {
			t.Errorf("admitted %+v: only H1 cases should be", f)
		}
	}
	if !slices.Contains(ids, "job/privileged-true") || !errors.Is(r.Err(), ErrEscapes) {
		t.Fatalf("admitted %v, err %v: want job/privileged-true among them", ids, r.Err())
	}
	t.Logf("the loosened bundle admits %d of %d: %v", len(r.Admitted), r.Checked, ids)
}

func TestTheEngineRefusesALoosenedBundleUnlessEachCaseIsAccepted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := loosenedBundle(t)
	check, err := Check(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := policies.New(ctx, policies.Config{Dir: dir, Checks: []policies.Check{check}}); !errors.Is(err, policies.ErrCheck) || !errors.Is(err, ErrEscapes) {
		t.Fatalf("start with a loosened bundle: err = %v", err)
	}
	serving := engine(t, policies.Config{Checks: []policies.Check{check}})
	before := serving.Revision()
	if err := serving.Reload(ctx, policies.Config{Dir: dir, Checks: []policies.Check{check}}); !errors.Is(err, ErrEscapes) || serving.Revision() != before {
		t.Fatalf("reload of a loosened bundle: err = %v, serving %s", err, serving.Revision())
	}
	// Accepting every H1 case by id lets it serve, and each is reported.
	var accept []string
	for _, c := range Corpus() {
		if c.Rule == "H1" {
			accept = append(accept, c.ID)
		}
	}
	var logged []string
	check, err = Check(accept, func(_ string, f Finding) { logged = append(logged, f.ID) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := policies.New(ctx, policies.Config{Dir: dir, Checks: []policies.Check{check}}); err != nil {
		t.Fatalf("start with every H1 case accepted: %v", err)
	}
	if !slices.Contains(logged, "job/privileged-true") {
		t.Fatalf("the accepted cases were not reported: %v", logged)
	}
	// Accepting a case that does not exist is a configuration error.
	if _, err := Check([]string{"job/no-such-case"}, nil); err == nil {
		t.Fatal("an unknown case was accepted")
	}
}

// The end-to-end suite serves the bundle with its data patched (other
// images, amd64): the audit must pass that bundle too, or no e2e gateway
// starts. A case hard-wired to one architecture once admitted there.
func TestTheAuditPassesTheBundleAsTheE2ESuitePatchesIt(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../test/testdata/e2e-policy-data-patch.json")
	if err != nil {
		t.Fatal(err)
	}
	var patch any
	if err := json.Unmarshal(raw, &patch); err != nil {
		t.Fatal(err)
	}
	dir := policytest.Copy(t, policies.EmbeddedBundle(), func(p string, data []byte) ([]byte, error) {
		if p != "data.json" {
			return data, nil
		}
		var doc any
		if err := json.Unmarshal(data, &doc); err != nil {
			return nil, err
		}
		return json.Marshal(policytest.MergePatch(doc, patch))
	})
	e := engine(t, policies.Config{Dir: dir})
	r, err := Audit(context.Background(), e, nil)
	if err != nil || r.Err() != nil {
		t.Fatalf("audit of the e2e bundle: %v %v", err, r.Err())
	}
}
