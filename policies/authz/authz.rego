# Request authorization for the sandgate REST gateway.
#
# The gateway evaluates data.sandgate.authz.decision on every API request,
# after the JWT is verified and before anything is forwarded to Nomad. The
# input document is described in docs/policies.md ("The authz input").
#
# Where each rule is (grep `"rule": "<ID>"` finds every body of a rule id):
#
#   authz.rego      the entrypoint; INPUT on the facts every request carries
#   routes.rego     T2 (route table, role, scopes, ownership of the target), C1
#   tokens.rego     T1, T3 (the token's expiry), T4, and minting (T4, B3)
#   sandboxes.rego  the routes under /v1/sandboxes/:id: T3 (the target's expiry),
#                   H9, E1 and E2 (exec), E3 (logs), L2 (extend)
#   create.rego     POST /v1/sandboxes: INPUT on its body, L2, B2, H11
#   ratelimit.rego  Q1 (the caller's role has a rate limit in policy data)
#
# Every check is written once, as one `violations` body (or one iteration over
# a literal list of fields of the same shape) that names what it refuses.
# There are no fast paths: the check that decides is the one that explains.
#
# How this package stays fast
#
# OPA evaluates every body of `violations` that its rule index cannot rule
# out, so a body that applies to one route family starts with literal
# comparisons the index reads: `input.request.method == "POST"`,
# `input.request.route == "/v1/sandboxes/:id/exec"`, a `startswith` on the
# route, `input.token.role == "session"`. A body whose route or role does not
# match is never entered. Policy data is read by direct lookup (the route
# table is keyed by method, then by route template); no per-request
# comprehension rebuilds a set from data; what depends on policy data alone
# (that the roles a route lists are granted its scope) is held by the bundle's
# tests, not re-checked per request. No helper rule is read on the allow path
# (each reference to a virtual document costs several evaluation steps). A
# message is written in the head of its body (docs/policies.md, "How a rule
# words its message"), which is only evaluated for a violation, so no sprintf
# runs before a check has failed; the few wording helpers (_container_msg,
# _role_msg, _unauthorized_msg) are read from heads only. Only what varies per
# request is iterated: argv, a session token's scopes, and the fields of a
# container (a literal list).
#
# How this package fails closed
#
# A request is allowed only when no violation fires. Every module imports
# future.keywords.not: `not <expr>` then holds whenever <expr> does not,
# including when a fact it reads is missing (without the import, OPA
# evaluates the arguments of a negated call before the `not`, so
# `not is_number(input.now)` would be undefined, not true, when input.now is
# missing, and the violation would silently not fire). So:
#
#   1. A check is written as the negation of what makes a request acceptable
#      (`not is_number(input.now)`, `not x <= limit`); a missing fact, a
#      mistyped fact and a threshold missing from policy data all make it
#      fire.
#   2. A positive comparison skips a rule when a fact is missing; it is used
#      only to say where a rule applies (the route, the role, "the field is
#      present"), never as the check itself.
#   3. Builtins that reject a type (concat, regex.match, startswith, count)
#      are only called after is_string/is_array/is_object: with strict builtin
#      errors a type error would be an evaluation error, not a violation.
#
# JSON null is read as absent for every optional fact (Go marshals a nil map
# or pointer as null); a present optional value of the wrong type is refused.
package sandgate.authz

import data.sandgate.config as cfg
import data.sandgate.lib.modes
import future.keywords.not

# METADATA
# title: Request authorization decision
# description: >-
#   The single entrypoint of the authz package. A request is allowed only when
#   no violation fires; violations carry a stable rule id (INPUT, T1-T4, E1-E3,
#   L2, H9, B2, B3, H11, C1, Q1) and a message. Unknown routes, unknown roles,
#   missing facts and mistyped facts all produce violations, so the default is
#   deny.
# entrypoint: true
decision := modes.decision(violations)

# ---------------------------------------------------------------------------
# INPUT: missing or malformed facts
#
# Every other rule compares these facts, so they are checked here with a
# message that names the fact. A container that is missing or not an object
# (request, token, sandbox) is one cause and gets one message, not one per
# field it lacks.
# ---------------------------------------------------------------------------

# METADATA
# title: The request carries the time of the decision
# description: >-
#   Refuses when input.now (unix seconds, set by the gateway) is missing or not
#   a number: expiry (T3) and the lifetime ceiling (L2) are judged against it.
# custom:
#   id: INPUT
#   severity: critical
violations contains {"rule": "INPUT", "msg": "now is missing or not a number"} if {
	not is_number(input.now)
}

# METADATA
# title: The request names its method and route template
# description: >-
#   Refuses when input.request is missing or not an object, and when its method
#   or route (the Echo route template, e.g. /v1/sandboxes/:id) is missing or
#   not a string.
# custom:
#   id: INPUT
#   severity: critical
violations contains {"rule": "INPUT", "msg": _container_msg("request", sprintf("request.%v is missing or not a string", [field]))} if {
	some field in ["method", "route"]
	not is_string(input.request[field])
}

# METADATA
# title: The request's params, query and body are objects
# description: >-
#   Refuses when request.params, request.query or request.body is present
#   (not null) but not an object.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": sprintf("request.%v is not an object", [field])} if {
	request := input.request
	some field in ["params", "query", "body"]
	value := request[field]
	not is_object(value)
	value != null
}

# METADATA
# title: The token's role is a role of policy data
# description: >-
#   Refuses when input.token is missing or not an object, when token.role is
#   missing or not a string, and when it is not a key of
#   data.sandgate.config.roles (operator, agent, session).
# custom:
#   id: INPUT
#   severity: critical
violations contains {"rule": "INPUT", "msg": _container_msg("token", _role_msg)} if {
	not cfg.roles[input.token.role]
}

# A role that is missing or not a string is not a known role either: one
# cause, one message (a wording helper).
_role_msg := "token.role is not a known role" if {
	is_string(input.token.role)
} else := "token.role is missing or not a string"

# METADATA
# title: The token names its subject
# description: >-
#   Refuses a token.sub that is missing or not a non-empty string: the subject
#   is half of a principal (T2, B3). A token that is missing or not an object
#   gets the token's own message.
# custom:
#   id: INPUT
#   severity: critical
violations contains {"rule": "INPUT", "msg": _container_msg("token", "token.sub is missing or not a non-empty string")} if {
	not {
		is_string(input.token.sub)
		input.token.sub != ""
	}
}

# METADATA
# title: The token carries its scopes
# description: >-
#   Refuses token.scopes that are missing or not an array. A token that is
#   missing or not an object gets the token's own message.
# custom:
#   id: INPUT
#   severity: critical
violations contains {"rule": "INPUT", "msg": _container_msg("token", "token.scopes is missing or not an array")} if {
	not is_array(input.token.scopes)
}

# METADATA
# title: The target record carries its names, state and deadlines
# description: >-
#   input.sandbox is the stored record the route targets; absent or null means
#   "no such record" (T2 decides what that means). Refuses any other value
#   that is not an object, and a record whose id, job_id, principal or state
#   is missing or not a string, or whose expires_at or ceiling_at (unix
#   seconds) is missing or not a number: ownership (T2), naming (H9),
#   liveness and expiry (T3) and the ceiling (L2) are judged on them.
# custom:
#   id: INPUT
#   severity: critical
violations contains {"rule": "INPUT", "msg": _container_msg("sandbox", sprintf("sandbox.%v is missing or not a %v", [field, type]))} if {
	sandbox := input.sandbox
	sandbox != null
	some field, type in {"id": "string", "job_id": "string", "principal": "string", "state": "string", "expires_at": "number", "ceiling_at": "number"}
	not type_name(sandbox[field]) == type
}

# The message for a missing or malformed field, msg, unless the container
# itself is missing or not an object: then the container's own message (one
# cause, one message). A wording helper (docs/policies.md, "How a rule words
# its message"): only read for a violation.
_container_msg(container, msg) := _missing_container_msg[container] if {
	not is_object(input[container])
} else := msg

_missing_container_msg := {
	"request": "request is missing or not an object",
	"token": "token is missing or not an object",
	"sandbox": "sandbox is not an object",
}
