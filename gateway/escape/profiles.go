package escape

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"sandgate/policies"
	"sandgate/render"
)

// The profile cases are generated from the profiles in the candidate's own
// data, whatever their names: a bundle (a data.yml beside data.json, say)
// may bring a profile nobody reviewed, and the shipped corpus only knows
// strict and workspace.
//
// The contract every profile is held to (docs/policies.md, "The escape
// audit"), from the two reviewed profiles, strict and workspace:
//
//   - no profile adds a capability outside the workspace set (CHOWN,
//     DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID, SETFCAP): that
//     set is the most any sandbox may have, whatever the profile is called;
//   - strict, the default profile, is a read-only root with no
//     capabilities at all;
//   - any other profile may have a writable root with a subset of the
//     workspace set: it is then no looser than workspace.
//
// A profile that breaks the contract gives one case per breach, whose
// input is the job exactly as the renderer emits it for that profile: a
// bundle that admits it admits a sandbox beyond the contract (ADMITTED,
// naming the profile and the capability). Every profile also gives the
// cases the shipped corpus has for strict and workspace: a capability
// outside its own list (H1) and, when its root is read-only, the root made
// writable (H6).

// profileCaseIDPrefix starts the id of every generated profile case;
// policy.accept_escapes may name such an id before the bundle that has the
// profile is loaded.
const profileCaseIDPrefix = "profile/"

// dangerousCaps are the capabilities tried as "outside the profile", in
// order: the first one the profile does not list is added.
var dangerousCaps = []string{"SYS_ADMIN", "NET_ADMIN", "SYS_PTRACE", "SYS_MODULE", "DAC_READ_SEARCH", "NET_RAW"}

// profileCases returns the cases of every profile of s, by profile name.
func profileCases(s policies.Settings) []Case {
	reviewed := render.WorkspaceCapabilities()
	var cases []Case
	for _, name := range slices.Sorted(maps.Keys(s.Profiles)) {
		p := s.Profiles[name]
		profile := render.Profile(name)
		id := func(what string) string { return profileCaseIDPrefix + name + "/" + what }
		// The contract: the job as rendered for the profile.
		for _, c := range p.CapAdd {
			switch {
			case !slices.Contains(reviewed, c):
				cases = append(cases, renderedCase(id("adds-"+c), profile, "H1",
					fmt.Sprintf("profile %s as rendered: cap_add %s, beyond the reviewed workspace set %s", name, c, strings.Join(reviewed, ", "))))
			case profile == render.ProfileStrict:
				cases = append(cases, renderedCase(id("adds-"+c), profile, "H1",
					fmt.Sprintf("profile strict as rendered: cap_add %s, and strict has no capabilities", c)))
			}
		}
		if profile == render.ProfileStrict && !p.ReadonlyRootfs {
			cases = append(cases, renderedCase(id("writable-root"), profile, "H6",
				"profile strict as rendered: a writable root, and strict's root is read-only"))
		}
		// The profile's own list and root hold.
		if i := slices.IndexFunc(dangerousCaps, func(c string) bool { return !slices.Contains(p.CapAdd, c) }); i >= 0 {
			extra := dangerousCaps[i]
			cases = append(cases, mutatedCase(mutation{
				ID: id("a-cap-add-outside-the-profile"), Rule: "H1", profile: profile,
				What: fmt.Sprintf("a cap_add outside profile %s (%s)", name, extra),
				mutate: func(d doc) {
					caps, _ := config(d)["cap_add"].([]any)
					config(d)["cap_add"] = append(caps, extra)
				},
			}))
		}
		if p.ReadonlyRootfs {
			cases = append(cases, mutatedCase(mutation{
				ID: id("readonly-off"), Rule: "H6", profile: profile,
				What:   fmt.Sprintf("readonly off in profile %s, whose root is read-only", name),
				mutate: func(d doc) { config(d)["readonly_rootfs"] = false },
			}))
		}
	}
	return cases
}

// renderedCase is the base job of profile, unchanged: an escape when the
// profile itself breaks the contract.
func renderedCase(id string, profile render.Profile, rule, what string) Case {
	return mutatedCase(mutation{ID: id, What: what, Rule: rule, profile: profile, mutate: func(doc) {}})
}

// isProfileCaseID tells whether id has the shape of a generated profile
// case id: profile/<name>/<case>.
func isProfileCaseID(id string) bool {
	rest, ok := strings.CutPrefix(id, profileCaseIDPrefix)
	name, what, found := strings.Cut(rest, "/")
	return ok && found && name != "" && what != ""
}
