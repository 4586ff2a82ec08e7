package policies

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"
)

func withEnforcement(t *testing.T, enforcement string) string {
	t.Helper()
	dir := copyBundleWithSmallTests(t)
	raw, err := os.ReadFile(filepath.Join(dir, "data.json"))
	if err != nil {
		t.Fatal(err)
	}
	data := string(raw)
	if !strings.Contains(data, `"enforcement": {}`) {
		t.Fatal(`data.json has no "enforcement": {}`)
	}
	writeFile(t, filepath.Join(dir, "data.json"), strings.Replace(data, `"enforcement": {}`, `"enforcement": `+enforcement, 1))
	return dir
}

func TestEnforcementThatMustNotLoad(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct{ enforcement, want string }{
		"INPUT softened":   {`{"INPUT": "warn"}`, "INPUT cannot be set below deny"},
		"T1 softened":      {`{"T1": "dryrun"}`, "T1 cannot be set below deny"},
		"an unknown rule":  {`{"H99": "warn"}`, "H99 is not a rule of the authz or admission decision"},
		"a lifecycle rule": {`{"L3": "warn"}`, "L3 is not a rule of the authz or admission decision"},
		"an unknown mode":  {`{"E3": "allow"}`, `mode "allow" is not deny, warn or dryrun`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := New(context.Background(), Config{Dir: withEnforcement(t, c.enforcement)})
			if !errors.Is(err, ErrEnforcement) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrEnforcement mentioning %q", err, c.want)
			}
		})
	}
}

func TestAWarnRuleAllowsAndReportsItsViolation(t *testing.T) {
	t.Parallel()
	e, err := New(context.Background(), Config{Dir: withEnforcement(t, `{"E3": "warn", "E1": "dryrun"}`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range e.Rules() {
		want := ModeDeny
		switch {
		case r.ID == "E3" && r.Entrypoint == Authz:
			want = ModeWarn
		case r.ID == "E1" && r.Entrypoint == Authz:
			want = ModeDryRun
		}
		if r.Mode != want {
			t.Errorf("rule %s (%s) mode %q, want %q", r.ID, r.Entrypoint, r.Mode, want)
		}
	}
	in := benchAuthzInput()
	in.Request.Route, in.Request.Method = "/v1/sandboxes/:id/logs", "GET"
	in.Request.Body = RequestBody{}
	in.Request.Query.Stream = "env"
	d, err := e.Decide(context.Background(), Authz, in.Value())
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allow || len(d.Violations) != 0 || len(d.Warnings) != 1 || d.Warnings[0].Rule != "E3" || d.Warnings[0].Mode != ModeWarn {
		t.Fatalf("a warn-mode violation: %+v", d)
	}
	// A warn rule never frees a request that another rule refuses.
	in.Token.Active = false
	d, err = e.Decide(context.Background(), Authz, in.Value())
	if err != nil || d.Allow || !slices.Contains(d.RuleIDs(), "T4") || len(d.Warnings) != 1 {
		t.Fatalf("warn plus a deny: %+v, %v", d, err)
	}
}

// The Rego list of rules that are always deny is Go's.
func TestTheAlwaysDenyRulesAgreeWithTheBundle(t *testing.T) {
	t.Parallel()
	b, err := loadBundle(bundleFiles, false)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := rego.New(rego.Query("data.sandgate.lib.modes.always_deny"), rego.ParsedBundle(BundleName, b)).Eval(context.Background())
	if err != nil || len(rs) != 1 {
		t.Fatalf("%v %v", rs, err)
	}
	var got []string
	for _, v := range rs[0].Expressions[0].Value.([]any) {
		got = append(got, v.(string))
	}
	slices.Sort(got)
	if !slices.Equal(got, alwaysDeny) {
		t.Fatalf("lib/modes.rego always_deny = %v, Go's alwaysDeny = %v", got, alwaysDeny)
	}
}
