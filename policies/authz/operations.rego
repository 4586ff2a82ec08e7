package sandgate.authz

# Operations: C1 (a route is served only while its capability is advertised), T4 and
# B3 on token minting (role, lifetime and agent quota of a new operator or agent token).
# See authz.rego for how the rules, the fast paths and the checks fit together.

# --- C1 --------------------------------------------------------------------------------

# METADATA
# title: A route is served only while its capability is advertised
# description: >-
#   Every route of the route table names the capability it belongs to
#   (routes.<key>.capability, e.g. hosts.v1), and the request is allowed only when that
#   capability is in data.sandgate.config.capabilities, the list GET /v1/capabilities
#   advertises. Clients and the dashboard feature-detect on that list, so what is
#   advertised and what is served can never disagree, and a reviewer can switch a whole
#   feature family off (for example tokens.v1) by removing it from the list.
# custom:
#   id: C1
#   severity: medium
violations contains {"rule": "C1", "msg": msg} if {
	_route
	not _capability_advertised
	msg := sprintf("route %v belongs to capability %v, which this gateway does not advertise", [_route_key, object.get(_route, "capability", null)])
}

_capability_advertised if _route.capability in _cfg.capabilities

# --- T4, B3: minting ---------------------------------------------------------------------

_minting if _action == "tokens.mint"

_mint_errors contains sprintf("mint: role %v is not one of %v", [object.get(_body, "role", null), _cfg.tokens.mintable_roles]) if {
	not _mint_role_ok
}

_mint_role_ok if _body.role in _cfg.tokens.mintable_roles

_mint_errors contains sprintf("mint: ttl_seconds must be an integer in [%v, %v]", [_cfg.tokens.min_ttl_seconds, _cfg.tokens.max_ttl_seconds]) if {
	not _mint_ttl_ok
}

_mint_ttl_ok if _int_in(_body.ttl_seconds, _cfg.tokens.min_ttl_seconds, _cfg.tokens.max_ttl_seconds)

_mint_errors contains "mint: label must be a string of at most 128 bytes" if {
	_body.label != null
	not _label_ok
}

# count() of a string counts characters; the bound is in bytes, which
# hex.encode (two digits a byte of the UTF-8) counts.
_label_ok if {
	is_string(_body.label)
	count(hex.encode(_body.label)) <= 2 * 128
}

# METADATA
# title: A minted token has a mintable role and a bounded lifetime
# description: >-
#   POST /v1/tokens mints only the roles in tokens.mintable_roles (operator, agent:
#   session tokens come only from create, bound to their sandbox), for ttl_seconds, an
#   integer in [tokens.min_ttl_seconds, tokens.max_ttl_seconds]; the label is a string of
#   at most 128 bytes. Every minted token is recorded, listable and revocable.
# custom:
#   id: T4
#   severity: high
violations contains {"rule": "T4", "msg": msg} if {
	_minting
	some msg in _mint_errors
}

_quota_given if _body.quota != null

_quota_errors contains "mint: a quota applies to agent tokens only" if not _body.role == "agent"

_quota_errors contains sprintf("mint: quota.max_live_sandboxes must be an integer in [1, %v]", [_cfg.agent_quota.max_live_sandboxes]) if {
	not _quota_ok
}

_quota_ok if _int_in(_body.quota.max_live_sandboxes, 1, _cfg.agent_quota.max_live_sandboxes)

# METADATA
# title: An agent's quota is bounded when its token is minted
# description: >-
#   A quota (quota.max_live_sandboxes) may be given only to an agent token and must be an
#   integer in [1, agent_quota.max_live_sandboxes]; without one the agent gets
#   agent_quota.default_max_live_sandboxes. Admission enforces the quota at every create
#   (B3 in sandgate.admission).
# custom:
#   id: B3
#   severity: medium
violations contains {"rule": "B3", "msg": msg} if {
	_minting
	_quota_given
	some msg in _quota_errors
}
