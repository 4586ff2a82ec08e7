# Enforcement modes: how a violation of a rule is enforced, per rule id, from
# data.sandgate.config.enforcement ({"E3": "warn", ...}). The authz and
# admission decisions are built by decision() below:
#
#   deny    (the default) the violation refuses the request;
#   warn    the request is allowed; the violation comes back to the caller
#           (a `warnings` member and a Warning header) and is logged;
#   dryrun  the request is allowed; the violation is only logged.
#
# A mode never weakens fail-closed: an evaluation error still refuses, any
# value but "warn" or "dryrun" (missing, misspelt, mistyped) is deny, and
# INPUT (a malformed input) and T1 (a session token's shape) are deny
# whatever the data says. The gateway also refuses to load a bundle whose
# enforcement names an unknown rule or mode, or sets INPUT or T1.
package sandgate.lib.modes

import data.sandgate.config as cfg
import future.keywords.not

# Rules that are deny whatever the data says.
always_deny := {"INPUT", "T1"}

# mode is the enforcement mode of rule id.
mode(id) := m if {
	m := cfg.enforcement[id]
	m in {"warn", "dryrun"}
	not always_deny[id]
} else := "deny"

# decision splits violations by their rule's mode: only deny-mode
# violations refuse.
decision(violations) := {
	"allow": count(deny) == 0,
	"violations": deny,
	"warnings": {v | some v in violations; mode(v.rule) == "warn"},
	"dryrun": {v | some v in violations; mode(v.rule) == "dryrun"},
} if {
	deny := {v | some v in violations; mode(v.rule) == "deny"}
}
