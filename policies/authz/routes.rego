# T2 and C1: which token may call which route, on which sandbox, and whether
# the route is served at all. The route table is data.sandgate.config.routes,
# keyed by method, then by Echo route template; each entry names the roles
# that may call it, the scope a token needs, the capability it belongs to and
# (target: sandbox) that it acts on one sandbox record.
package sandgate.authz

import data.sandgate.config as cfg
import future.keywords.not

# ---------------------------------------------------------------------------
# T2: the route table
# ---------------------------------------------------------------------------

# METADATA
# title: The token may call this route
# description: >-
#   Deny by default: refuses a request whose method and route template are not
#   an entry of data.sandgate.config.routes (a handler nobody added to the
#   policy, a typo, a concrete path instead of a template, a method or route
#   that is missing or not a string); a request whose token.role is not one
#   of the route's roles (this keeps session tokens off list, create, extend,
#   hosts, tokens, decisions and policy routes, and agent tokens off extend,
#   hosts, tokens, decisions and policy routes); and a token whose scopes do
#   not include the route's scope (a token minted with fewer scopes cannot use
#   the rest of its role). The message names the first of these that fails:
#   a role that may not call a route is not also told it lacks the scope.
#   That each role a route lists is granted the route's scope in
#   roles.<role>.scopes depends on policy data alone, so it is not checked per
#   request: the bundle's tests hold the table and the roles together, and the
#   engine runs them before it serves a bundle from disk and on every reload.
# custom:
#   id: T2
#   severity: critical
violations contains {"rule": "T2", "msg": _unauthorized_msg} if {
	not {
		route := cfg.routes[input.request.method][input.request.route]
		input.token.role in route.roles
		route.scope in input.token.scopes
	}
}

# Which check the request fails, in the order above. A wording helper
# (docs/policies.md, "How a rule words its message"): a route missing from
# the table fails its roles and scope too, one cause that would otherwise be
# three lines; only read for a violation.
_unauthorized_msg := "request has no route key" if {
	not {
		is_string(input.request.method)
		is_string(input.request.route)
	}
} else := sprintf("route %v %v is not in the route table", [input.request.method, input.request.route]) if {
	not cfg.routes[input.request.method][input.request.route]
} else := sprintf("role may not call %v %v", [input.request.method, input.request.route]) if {
	not input.token.role in cfg.routes[input.request.method][input.request.route].roles
} else := sprintf("token lacks the scope of %v %v", [input.request.method, input.request.route])

# ---------------------------------------------------------------------------
# T2: the target sandbox (the routes under /v1/sandboxes/:id, which the route
# table marks target: sandbox; a test holds the two equal)
# ---------------------------------------------------------------------------

# METADATA
# title: A sandbox route has its target record
# description: >-
#   On a route under /v1/sandboxes/:id, refuses when the target record is
#   absent (input.sandbox missing, null or not an object), for every role:
#   ownership, expiry, ceiling and job name cannot be checked on a record that
#   was not seen. The gateway answers 404 for every role: sandbox ids carry 80
#   random bits, so telling a missing sandbox from another principal's reveals
#   nothing usable.
# custom:
#   id: T2
#   severity: critical
violations contains {"rule": "T2", "msg": "target sandbox record is absent"} if {
	startswith(input.request.route, "/v1/sandboxes/:id")
	not is_object(input.sandbox)
}

# METADATA
# title: A session token acts on its own sandbox only
# description: >-
#   On a route under /v1/sandboxes/:id, refuses a session token whose
#   sandbox_id is not the route's :id (params.id): a session token never
#   reaches another sandbox.
# custom:
#   id: T2
#   severity: critical
violations contains {"rule": "T2", "msg": "session token is bound to another sandbox"} if {
	input.token.role == "session"
	startswith(input.request.route, "/v1/sandboxes/:id")
	not input.token.sandbox_id == input.request.params.id
}

# METADATA
# title: An agent acts on the sandboxes it created only
# description: >-
#   On a route under /v1/sandboxes/:id with its record, refuses an agent token
#   whose principal ("agent:" + sub: role and subject together) is not the
#   record's principal: agents touch only the sandboxes they created, and an
#   agent token minted with an operator's subject owns none of the operator's.
#   Operators are not restricted by ownership; the route table lets no other
#   role reach a sandbox route (a test holds it).
# custom:
#   id: T2
#   severity: critical
violations contains {"rule": "T2", "msg": "sandbox belongs to another principal"} if {
	input.token.role == "agent"
	startswith(input.request.route, "/v1/sandboxes/:id")
	not {
		is_string(input.token.sub)
		input.sandbox.principal == concat(":", ["agent", input.token.sub])
	}
	is_object(input.sandbox)
}

# ---------------------------------------------------------------------------
# C1: capabilities
# ---------------------------------------------------------------------------

# METADATA
# title: A route is served only while its capability is advertised
# description: >-
#   Every route of the route table names the capability it belongs to
#   (routes.<method>.<route>.capability, e.g. hosts.v1), and the request is
#   allowed only when that capability is in data.sandgate.config.capabilities,
#   the list GET /v1/capabilities advertises. Clients and the dashboard
#   feature-detect on that list, so what is advertised and what is served can
#   never disagree, and a reviewer can switch a whole feature family off (for
#   example tokens.v1) by removing it from the list.
# custom:
#   id: C1
#   severity: medium
violations contains {"rule": "C1", "msg": sprintf("route %v %v belongs to capability %v, which this gateway does not advertise", [input.request.method, input.request.route, object.get(route, "capability", null)])} if {
	route := cfg.routes[input.request.method][input.request.route]
	not route.capability in cfg.capabilities
}
