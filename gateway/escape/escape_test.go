package escape

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
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
	for _, c := range CorpusFor(e.Settings()) {
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
	if err != nil || r.Err() != nil || r.Checked != len(CorpusFor(e.Settings())) {
		t.Fatalf("audit of the shipped bundle: %+v, %v, %v", r, err, r.Err())
	}
}

func TestTheCorpusIDsAreUnique(t *testing.T) {
	t.Parallel()
	e := engine(t, policies.Config{})
	seen := map[string]bool{}
	for _, c := range CorpusFor(e.Settings()) {
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
	for _, c := range CorpusFor(serving.Settings()) {
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

// The attack of issue 21: a data.yml adds a `builder` profile with
// SYS_ADMIN and a writable root. The shipped corpus knew only strict and
// workspace, so the audit passed and the gateway served it. The audit now
// generates its cases from the profiles in the data: it fails, naming the
// profile and the capability, and the gateway refuses the bundle.
func TestTheAuditRefusesAProfileBeyondTheWorkspaceSet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := policytest.CopyWithSmallTests(t, policies.EmbeddedBundle(), policies.EntrypointNames())
	policytest.AddBuilderProfile(t, dir)
	e := engine(t, policies.Config{Dir: dir})
	if _, ok := e.Settings().Profiles["builder"]; !ok {
		t.Fatal("OPA did not load the builder profile: the attack is not reproduced")
	}
	r, err := Audit(ctx, e, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range r.Admitted {
		ids = append(ids, f.ID)
	}
	if !slices.Equal(ids, []string{"profile/builder/adds-SYS_ADMIN"}) {
		t.Fatalf("admitted %v, want exactly profile/builder/adds-SYS_ADMIN", ids)
	}
	err = r.Err()
	if !errors.Is(err, ErrEscapes) || !strings.Contains(err.Error(), "builder") || !strings.Contains(err.Error(), "SYS_ADMIN") {
		t.Fatalf("audit error %v: want ErrEscapes naming builder and SYS_ADMIN", err)
	}
	// The builder's own list holds: a capability outside it is refused.
	for _, c := range CorpusFor(e.Settings()) {
		if c.ID == "profile/builder/a-cap-add-outside-the-profile" && !strings.Contains(c.What, "NET_ADMIN") {
			t.Errorf("%s: %s, want NET_ADMIN (SYS_ADMIN is in the profile)", c.ID, c.What)
		}
	}
	check, err := Check(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := policies.New(ctx, policies.Config{Dir: dir, Checks: []policies.Check{check}}); !errors.Is(err, ErrEscapes) {
		t.Fatalf("start with the builder profile: err = %v", err)
	}
	// An operator may accept it by its id, before any bundle has it.
	check, err = Check([]string{"profile/builder/adds-SYS_ADMIN"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := policies.New(ctx, policies.Config{Dir: dir, Checks: []policies.Check{check}}); err != nil {
		t.Fatalf("start with the builder profile accepted: %v", err)
	}
}

// The profile contract: which profiles of a bundle's data the audit
// reports, and by which case.
func TestTheProfileContract(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		profiles string // YAML of sandgate/config/profiles/data.yml
		admitted []string
	}{
		{"a profile with a subset of the workspace set and a writable root", "ci:\n  cap_add: [CHOWN, SETUID]\n  readonly_rootfs: false\n", nil},
		{"a writable root with no capabilities", "scratch:\n  cap_add: []\n  readonly_rootfs: false\n", nil},
		{"a read-only profile with the whole workspace set", "ro:\n  cap_add: [CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID, SETFCAP]\n  readonly_rootfs: true\n", nil},
		{"two capabilities beyond the set", "net:\n  cap_add: [NET_ADMIN, NET_RAW, CHOWN]\n  readonly_rootfs: true\n",
			[]string{"profile/net/adds-NET_ADMIN", "profile/net/adds-NET_RAW"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := policytest.CopyWithSmallTests(t, policies.EmbeddedBundle(), policies.EntrypointNames())
			writeProfiles(t, dir, tt.profiles)
			r, err := Audit(context.Background(), engine(t, policies.Config{Dir: dir}), nil)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, f := range r.Admitted {
				ids = append(ids, f.ID)
			}
			if !slices.Equal(ids, tt.admitted) {
				t.Fatalf("admitted %v, want %v", ids, tt.admitted)
			}
		})
	}
	// strict is the default: a capability of the workspace set or a
	// writable root loosens it.
	dir := policytest.CopyWithSmallTests(t, policies.EmbeddedBundle(), policies.EntrypointNames())
	found := false
	dir = policytest.EditFile(t, dir, "data.json", func(b []byte) []byte {
		strict := regexp.MustCompile(`"strict": \{\s*"cap_add": \[\],\s*"readonly_rootfs": true\s*\}`)
		found = len(strict.FindAllIndex(b, -1)) == 1
		return strict.ReplaceAll(b, []byte(`"strict": {"cap_add": ["CHOWN"], "readonly_rootfs": false}`))
	}, &found)
	r, err := Audit(context.Background(), engine(t, policies.Config{Dir: dir}), nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range r.Admitted {
		ids = append(ids, f.ID)
	}
	if !slices.Contains(ids, "profile/strict/adds-CHOWN") || !slices.Contains(ids, "profile/strict/writable-root") {
		t.Fatalf("a loosened strict: admitted %v, want profile/strict/adds-CHOWN and profile/strict/writable-root", ids)
	}
}

func writeProfiles(t *testing.T, dir, yaml string) {
	t.Helper()
	out := filepath.Join(dir, "sandgate", "config", "profiles", "data.yml")
	if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}
