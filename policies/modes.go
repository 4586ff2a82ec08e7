package policies

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// moded are the entrypoints whose decisions honour enforcement modes: the
// request-facing ones. Lifecycle, hosts, reclaim and isolation decide the
// gateway's own actions and always deny.
var moded = []Entrypoint{Authz, Admission}

// alwaysDeny are the rules no enforcement may soften: a malformed input
// and a session token's shape (lib/modes.rego holds the same list; a test
// keeps them equal).
var alwaysDeny = []string{"INPUT", "T1"}

// ErrEnforcement means data.sandgate.config.enforcement names a rule that
// no moded decision has, a mode that does not exist, or softens INPUT or
// T1. Such a bundle is refused: a typo must not look like a loosening that
// took effect, nor a loosening like a typo.
var ErrEnforcement = errors.New("policies: enforcement")

// applyModes checks s.Enforcement against the bundle's rules and sets each
// rule's Mode.
func applyModes(s Settings, rules []Rule) error {
	known := map[string]bool{}
	for _, r := range rules {
		if slices.Contains(moded, r.Entrypoint) {
			known[r.ID] = true
		}
	}
	var problems []string
	for id, mode := range s.Enforcement {
		switch {
		case slices.Contains(alwaysDeny, id):
			problems = append(problems, fmt.Sprintf("%s cannot be set below deny (it is %q)", id, mode))
		case !known[id]:
			problems = append(problems, fmt.Sprintf("%s is not a rule of the authz or admission decision", id))
		case mode != ModeDeny && mode != ModeWarn && mode != ModeDryRun:
			problems = append(problems, fmt.Sprintf("%s: mode %q is not deny, warn or dryrun", id, mode))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return fmt.Errorf("%w: %s", ErrEnforcement, strings.Join(problems, "; "))
	}
	for i := range rules {
		rules[i].Mode = ModeDeny
		if m, ok := s.Enforcement[rules[i].ID]; ok && slices.Contains(moded, rules[i].Entrypoint) {
			rules[i].Mode = m
		}
	}
	return nil
}
