# Token rules T1-T4: what a token is, what it may call, for how long.
package sandgate.authz

# The store's sandbox states that hold budget and may run work
# (sandbox.states.live: starting, running). Every other state, the store's
# terminal ones (failed, ended) and any name the policy does not know, is not
# live: a positive list fails closed.
_live_states := {s | some s in _cfg.sandbox.states.live}

# The caller's principal: role and subject together, as the store records a
# sandbox's owner ("agent:ci"). Two tokens of different roles never share it.
_token_principal := concat(":", [input.token.role, input.token.sub])

# Actions an operator or agent may still perform on a sandbox that has expired
# or ended but has not been reaped yet: look at it, read its logs, destroy it.
_after_expiry_actions := {"sandbox.status", "sandbox.logs", "sandbox.destroy"}

# ---------------------------------------------------------------------------
# T1: session token shape
# ---------------------------------------------------------------------------

# METADATA
# title: A session token is bound to one sandbox and carries only session scopes
# description: >-
#   For session tokens. Refuses a token without a non-empty sandbox_id claim:
#   it is the only thing that scopes the token to one sandbox (T2 compares it
#   with the route's :id). Refuses a token carrying any scope outside
#   roles.session.scopes (status, exec, logs, destroy): a session token
#   claiming list, create, extend, tokens, hosts or policy scopes was not
#   minted by the gateway for a sandbox and is refused as a whole. (scopes
#   that are not an array are refused by INPUT.)
# custom:
#   id: T1
#   severity: critical
violations contains {"rule": "T1", "msg": msg} if {
	_is_session
	some msg in _t1_errors
}

_t1_errors contains "session token has no sandbox_id" if not _session_sid_ok

_t1_errors contains "session token carries a scope outside the session role" if {
	some scope in input.token.scopes
	not scope in _cfg.roles.session.scopes
}

_session_sid_ok if {
	is_string(input.token.sandbox_id)
	input.token.sandbox_id != ""
}

# ---------------------------------------------------------------------------
# T2: route, role, scope and ownership
# ---------------------------------------------------------------------------

# Fast path: the request may call this route on this target.
_authorized if {
	_route
	input.token.role in _route.roles
	_route.scope in input.token.scopes
	_route.scope in _cfg.roles[input.token.role].scopes
	_target_owned
}

_target_owned if not _targets_sandbox

_target_owned if {
	_has_sandbox
	_is_operator
}

_target_owned if {
	_has_sandbox
	_is_agent
	_token_principal == _sandbox.principal
}

_target_owned if {
	_has_sandbox
	_is_session
	input.token.sandbox_id == _params.id
}

# Slow path: one message per problem.
_t2_errors contains sprintf("route %v is not in the route table", [_route_key]) if not _route

_t2_errors contains "request has no route key" if not _route_key

_t2_errors contains sprintf("role may not call %v", [_route_key]) if {
	_route
	not _role_allowed
}

_t2_errors contains sprintf("token lacks the scope of %v", [_route_key]) if {
	_route
	not _scope_held
}

_t2_errors contains sprintf("role is not granted the scope of %v", [_route_key]) if {
	_route
	not _scope_granted
}

_t2_errors contains "target sandbox record is absent" if {
	_targets_sandbox
	not _has_sandbox
}

_t2_errors contains "session token is bound to another sandbox" if {
	_targets_sandbox
	_is_session
	not _session_owns
}

_t2_errors contains "sandbox belongs to another principal" if {
	_targets_sandbox
	_is_agent
	_has_sandbox
	not _agent_owns
}

_role_allowed if input.token.role in _route.roles

_scope_held if _route.scope in input.token.scopes

_scope_granted if _route.scope in _cfg.roles[input.token.role].scopes

_session_owns if input.token.sandbox_id == _params.id

_agent_owns if _token_principal == _sandbox.principal

# Never empty when the fast path fails, so T2 always fires then.
_t2_messages := _t2_errors if {
	count(_t2_errors) > 0
} else := {"request is not authorized for this route"}

# METADATA
# title: The token may call this route on this target
# description: >-
#   Deny by default. Refuses when the request's "<METHOD> <route template>" is
#   not a key of data.sandgate.config.routes (a handler nobody added to the
#   policy, a typo, a missing method or route); when token.role is not in the
#   route's roles (this keeps session tokens off list, create, extend, hosts,
#   tokens and policy routes, and agent tokens off extend, hosts, tokens and
#   policy routes); when the route's scope is not in token.scopes (a token
#   minted with fewer scopes cannot use the rest of its role); when the role's
#   scopes in policy data do not grant the route's scope (defence against drift
#   in the route table). On a sandbox route it also refuses when the target
#   record is absent, for every role, since ownership, expiry, ceiling and job
#   name cannot be checked on a record that was not seen (the gateway
#   answers 404 for every role: sandbox ids carry 80 random bits, so telling
#   a missing sandbox from another principal's reveals nothing usable); a
#   session token
#   whose sandbox_id is not the route's :id (never another sandbox); an agent
#   token whose principal ("agent:" + sub: role and subject together) is not
#   the record's principal (agents touch only the sandboxes they created, and
#   an agent token minted with an operator's subject owns none of the
#   operator's). Operators are not restricted by ownership.
# custom:
#   id: T2
#   severity: critical
violations contains {"rule": "T2", "msg": msg} if {
	not _authorized
	some msg in _t2_messages
}

# ---------------------------------------------------------------------------
# T3: expiry at authorization time
# ---------------------------------------------------------------------------

# The token itself is still valid at input.now (exp is not an INPUT fact: a
# missing or mistyped exp makes this false, so T3 fires; a bad now is INPUT).
_token_unexpired if {
	is_number(input.token.exp)
	input.now < input.token.exp
}

# The target sandbox is before its expiry and its ceiling, and in a live state.
# INPUT guarantees now, expires_at, ceiling_at are numbers and state a string
# whenever a record is given; anything missing makes this false, so T3 fires.
_sandbox_live if {
	input.now < _sandbox.expires_at
	input.now < _sandbox.ceiling_at
	_sandbox.state in _live_states
}

# METADATA
# title: The token has not expired
# description: >-
#   Refuses when now >= token.exp, and when exp is missing or not a number.
#   Expiry is enforced here at authorization time, independently of the JWT
#   library's own check.
# custom:
#   id: T3
#   severity: high
violations contains {"rule": "T3", "msg": "token has expired or has no exp"} if {
	not _token_unexpired
}

# METADATA
# title: Nothing runs on an expired sandbox; session tokens die with it
# description: >-
#   On a sandbox route whose record has expired (now >= expires_at or now >=
#   ceiling_at) or is not live (its state is not in sandbox.states.live, the
#   store's starting and running: a failed or ended record is refused), even
#   if the reaper has not
#   run yet. A session token is refused for every action, including destroy:
#   it is refused one second past the sandbox's expiry and the reaper cleans
#   up. Operator and agent tokens may still GET the status, read the logs and
#   DELETE the sandbox, so its owner can see what happened and clean up; exec
#   and extend are refused (an expired sandbox runs nothing more and is not
#   resurrected: create a new one).
# custom:
#   id: T3
#   severity: high
violations contains {"rule": "T3", "msg": msg} if {
	_targets_sandbox
	_has_sandbox
	not _sandbox_live
	some msg in _t3_target_errors
}

_t3_target_errors contains "sandbox has expired or ended" if _is_session

_t3_target_errors contains sprintf("%v is refused on an expired or ended sandbox", [_route_key]) if {
	not _is_session
	not _after_expiry_ok
}

_after_expiry_ok if _action in _after_expiry_actions

# ---------------------------------------------------------------------------
# T4: revocation
# ---------------------------------------------------------------------------

_token_active if input.token.active == true

# METADATA
# title: The token is active
# description: >-
#   token.active is the gateway's verdict that the token's record exists, is
#   not revoked and (for session tokens) that its SHA-256 digest matches the
#   live sandbox record. Anything but exactly true (false, missing, a string)
#   is refused, so destroy and revoke take effect immediately.
# custom:
#   id: T4
#   severity: critical
violations contains {"rule": "T4", "msg": "token is revoked, unknown or not active"} if {
	not _token_active
}
