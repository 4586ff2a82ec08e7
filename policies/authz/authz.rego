# Request authorization for the sandgate REST gateway.
#
# The gateway evaluates data.sandgate.authz.decision on every API request,
# after the JWT is verified and before anything is forwarded to Nomad. The
# input document is described in docs/policies.md ("The authz input").
#
# Layout:
#   authz.rego      entrypoint, INPUT, shared helpers
#   tokens.rego     T1-T4 (token shape, route/role/scope/ownership, expiry, revocation)
#   sandboxes.rego  E1-E3, L2, H9, B2, H11
#
# Shape of every rule: one annotated `violations` body per rule id (or per
# route family of a rule id), gated by a cached test, that reports every
# problem found by a helper set of messages (`_input_errors`, `_t2_errors`,
# ...). Each message names the exact check; the METADATA lists them all.
#
# How this package fails closed
#
# A request is allowed only when no violation fires. Rego has a trap here: a
# comparison with an undefined value is undefined, and OPA evaluates the
# arguments of a call (is_number, `in`, `<`, `!=`, any function) BEFORE
# applying `not`, so `not is_number(input.now)` is undefined (nothing fires)
# when input.now is missing. So:
#
#   1. A check that must fire on a missing fact is written as
#      `not <zero-argument positive helper>` (`not _now_ok`), or as a function
#      whose arguments are always defined (iteration variables, literals).
#   2. Every fact the rules compare directly (now, method, route, the token's
#      role/sub/scopes, the sandbox record's fields) is covered by INPUT, which
#      fires when it is missing or mistyped. Other rules may then compare those
#      facts inline: if one is missing their comparison is skipped, but INPUT
#      has already denied the request.
#   3. Where a fast path decides whether a rule's messages need computing:
#      `_well_formed` (INPUT) and `_authorized` (T2) are exact, and a fallback
#      message guarantees the rule still fires if no specific message matched
#      (`_input_messages`, `_t2_messages`); `_exec_body_ok` (E1, E2) may be
#      stricter than its messages (a long argv or a null field takes the slow,
#      exact path) but never looser, which every E1/E2 deny test checks.
#
# Speed: this runs on every request. OPA visits every `violations` body on
# every evaluation (about 1 microsecond each even when its first expression is
# false), so bodies are few; the common case is decided by fast paths
# (_well_formed, _authorized, _exec_body_ok); lookups are equality/`in` on
# the route table and role scopes; only argv (and a session token's scopes)
# is iterated.
package sandgate.authz

import data.sandgate.lib.modes

# METADATA
# title: Request authorization decision
# description: >-
#   The single entrypoint of the authz package. A request is allowed only when
#   no violation fires; violations carry a stable rule id (INPUT, T1-T4, E1-E3,
#   L2, H9, B2, H11) and a message. Unknown routes, unknown roles, missing
#   facts and mistyped facts all produce violations, so the default is deny.
# entrypoint: true
decision := modes.decision(violations)

# ---------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------

_cfg := data.sandgate.config

# Route key "<METHOD> <route template>", looked up directly in the route table.
_route_key := concat(" ", [input.request.method, input.request.route]) if {
	is_string(input.request.method)
	is_string(input.request.route)
}

_route := _cfg.routes[_route_key]

_action := _route.action

_targets_sandbox if _route.target == "sandbox"

_is_session if input.token.role == "session"

_is_agent if input.token.role == "agent"

_is_operator if input.token.role == "operator"

# Optional request containers. JSON null is treated like absent (Go marshals a
# nil map or pointer as null); a present value of another type is an INPUT
# violation and the container is read as empty.
_params := input.request.params if {
	is_object(input.request.params)
} else := {}

_query := input.request.query if {
	is_object(input.request.query)
} else := {}

_body := input.request.body if {
	is_object(input.request.body)
} else := {}

# The target sandbox record, defined only when it is an object. Absent or null
# means "no such record" (see T2).
_sandbox := input.sandbox if is_object(input.sandbox)

_has_sandbox if _sandbox

_sandbox_given if input.sandbox != null

# x is an integer in [lo, hi].
_int_in(x, lo, hi) if {
	is_number(x)
	floor(x) == x
	x >= lo
	x <= hi
}

# A threshold for messages only: always defined, so a message can never make a
# violation disappear when policy data lacks the key.
_limit(section, key) := object.get(_cfg, [section, key], "unset")

# ---------------------------------------------------------------------------
# INPUT: missing or malformed facts
# ---------------------------------------------------------------------------

# Fast path: every INPUT condition in one rule. request and token being
# objects is implied by their string fields.
_well_formed if {
	is_number(input.now)
	is_string(input.request.method)
	is_string(input.request.route)
	count(_bad_containers) == 0
	is_string(input.token.role)
	_cfg.roles[input.token.role]
	is_string(input.token.sub)
	input.token.sub != ""
	is_array(input.token.scopes)
	_sandbox_well_formed
}

_sandbox_well_formed if not _sandbox_given

_sandbox_well_formed if {
	is_string(input.sandbox.id)
	is_string(input.sandbox.job_id)
	is_string(input.sandbox.principal)
	is_string(input.sandbox.state)
	is_number(input.sandbox.expires_at)
	is_number(input.sandbox.ceiling_at)
}

# request.params/query/body present (not null) but not objects.
_bad_containers contains key if {
	some key in ["params", "query", "body"]
	value := input.request[key]
	value != null
	not is_object(value)
}

# Slow path: one message per problem.
_input_errors contains "now is missing or not a number" if not _now_ok

_input_errors contains "request is missing or not an object" if not _request_ok

_input_errors contains "request.method is missing or not a string" if not _method_ok

_input_errors contains "request.route is missing or not a string" if not _route_tpl_ok

_input_errors contains sprintf("request.%s is not an object", [key]) if some key in _bad_containers

_input_errors contains "token is missing or not an object" if not _token_ok

_input_errors contains "token.role is missing or not a string" if not _role_ok

_input_errors contains "token.role is not a known role" if {
	_role_ok
	not _role_known
}

_input_errors contains "token.sub is missing or not a non-empty string" if not _sub_ok

_input_errors contains "token.scopes is missing or not an array" if not _scopes_ok

_input_errors contains "sandbox is not an object" if {
	_sandbox_given
	not _has_sandbox
}

_input_errors contains sprintf("sandbox.%s is missing or not a string", [field]) if {
	_has_sandbox
	some field in ["id", "job_id", "principal", "state"]
	not _sandbox_string_field(field)
}

_input_errors contains sprintf("sandbox.%s is missing or not a number", [field]) if {
	_has_sandbox
	some field in ["expires_at", "ceiling_at"]
	not _sandbox_number_field(field)
}

# Never empty when the fast path fails, so INPUT always fires then.
_input_messages := _input_errors if {
	count(_input_errors) > 0
} else := {"input is malformed"}

_now_ok if is_number(input.now)

_request_ok if is_object(input.request)

_method_ok if is_string(input.request.method)

_route_tpl_ok if is_string(input.request.route)

_token_ok if is_object(input.token)

_role_ok if is_string(input.token.role)

_role_known if _cfg.roles[input.token.role]

_sub_ok if {
	is_string(input.token.sub)
	input.token.sub != ""
}

_scopes_ok if is_array(input.token.scopes)

_sandbox_string_field(field) if is_string(_sandbox[field])

_sandbox_number_field(field) if is_number(_sandbox[field])

# METADATA
# title: The request's facts are present and well-typed
# description: >-
#   Fail closed on missing facts. Refuses when input.now is not a number;
#   input.request is not an object or its method or route template is not a
#   string; request.params, query or body is present (not null) but not an
#   object; input.token is not an object, its role is not a string or not a
#   role in data.sandgate.config.roles, its sub is not a non-empty string, or
#   its scopes are not an array; input.sandbox is present (not null) but not an
#   object, or lacks id, job_id, principal, state (strings), expires_at or
#   ceiling_at (numbers). Every other rule compares these facts, and a
#   comparison with a missing value would silently not fire.
# custom:
#   id: INPUT
#   severity: critical
violations contains {"rule": "INPUT", "msg": msg} if {
	_malformed
	some msg in _input_messages
}

_malformed if not _well_formed

# METADATA
# title: Create names a known profile, network and node
# description: >-
#   On create, body.profile (default strict) must be a key of
#   data.sandgate.config.profiles, body.network (default none) a key of
#   data.sandgate.config.networks, and body.node (default: the gateway picks)
#   a non-empty string, whenever present and not null. An unknown profile or
#   network would reach the renderer without a vetted capability list or
#   network mode; admission (P1-P3) decides whether the node may host it.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": msg} if {
	_create
	some msg in _create_input_errors
}

_create_input_errors contains "create: profile is not a known profile" if {
	_body.profile != null
	not _profile_ok
}

_create_input_errors contains "create: network is not a known network" if {
	_body.network != null
	not _network_ok
}

_create_input_errors contains "create: node is not a non-empty string" if {
	_body.node != null
	not _node_ok
}

_profile_ok if {
	is_string(_body.profile)
	_cfg.profiles[_body.profile]
}

_network_ok if {
	is_string(_body.network)
	_cfg.networks[_body.network]
}

_node_ok if {
	is_string(_body.node)
	_body.node != ""
}
