# METADATA
# title: Host enrollment and operator state
# description: >-
#   Decides every change an operator makes to a host through sandgate: enrolling a
#   Nomad client node for sandboxes (with or without egress, with its budget),
#   unenrolling it, and moving it between the operator states active, frozen, reserved
#   and draining. Rules: INPUT, P2 (never a control-plane node), I5 (egress only on a
#   node that declares the isolation bundle), B1 (a node budget is sane and fits the
#   node), R2 (a node's sandboxes are reclaimed before it drains or leaves).
# scope: package
package sandgate.hosts

import data.sandgate.config as cfg
import data.sandgate.lib.nodes
import data.sandgate.lib.numbers
import future.keywords.not

# METADATA
# title: Hosts decision
# description: >-
#   Allows the change only when no violation fires. Each violation names the rule id
#   that refused (INPUT, P2, I5, B1, R2) and a message.
# entrypoint: true
decision := {"allow": count(violations) == 0, "violations": violations}

# --- shared helpers --------------------------------------------------------------------
#
# Negation: this module imports future.keywords.not, like every module of the bundle,
# so `not <expr>` holds whenever <expr> does not, a missing fact included
# (docs/policies.md, "One meaning of `not`").

_actions := {"enroll", "unenroll", "state"}

_enrolling if input.action == "enroll"

_unenrolling if input.action == "unenroll"

_changing_state if input.action == "state"

_node := input.node if is_object(input.node)

_request := input.request if is_object(input.request)

_budget := _request.budget if is_object(_request.budget)

_live := input.live_sandboxes

# --- INPUT -----------------------------------------------------------------------------
#
# The input must carry now, an action (enroll, unenroll or state), the node (an object
# with a name: Nomad's view, its meta and attributes, the gateway's control_plane verdict,
# its operator state and enrollment), the request (egress as a boolean and an optional
# budget object to enroll; a known state to change state; reclaim as a boolean to
# unenroll), the number of live sandboxes on the node and the effects the gateway will
# carry out (effects.reclaim). Any gap denies: nothing changes on facts the policy cannot
# see.

# METADATA
# title: Hosts input carries the time
# description: >-
#   input.now must be a number.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: now must be a number"} if not _now_ok

# METADATA
# title: Hosts input names its action
# description: >-
#   input.action must be enroll, unenroll or state.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: action must be enroll, unenroll or state"} if not _action_ok

# METADATA
# title: Hosts input carries the node
# description: >-
#   input.node must be an object with a non-empty string name: Nomad's view of the node,
#   its meta and attributes, the gateway's control_plane verdict, its operator state and
#   enrollment.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: node must be an object with a non-empty string name"} if not _node_ok

# METADATA
# title: Hosts input carries the request
# description: >-
#   input.request must be an object.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: request must be an object"} if not _request

# METADATA
# title: Hosts input counts the node's live sandboxes
# description: >-
#   input.live_sandboxes must be a non-negative integer.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: live_sandboxes must be a non-negative integer"} if not _live_ok

# METADATA
# title: Hosts input says whether the gateway reclaims
# description: >-
#   input.effects.reclaim must be a boolean: whether the gateway will reclaim the node's
#   sandboxes with this change (R2).
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: effects.reclaim must be a boolean"} if not _effects_ok

# METADATA
# title: An enrollment says whether it is for egress
# description: >-
#   To enroll, request.egress must be a boolean.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: enroll needs request.egress as a boolean"} if {
	_enrolling
	not _egress_ok
}

# METADATA
# title: An enrollment's budget is an object
# description: >-
#   To enroll, request.budget, when given (not null), must be an object.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: request.budget, when given, must be an object"} if {
	_enrolling
	_request.budget != null
	not _budget
}

# METADATA
# title: A state change names a known state
# description: >-
#   To change state, request.state must be one of hosts.states.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": sprintf("input: request.state %v is not one of %v", [_state_value, object.get(cfg, ["hosts", "states"], "unset")])} if {
	_changing_state
	not _state_ok
}

# METADATA
# title: An unenrollment says whether to reclaim
# description: >-
#   To unenroll, request.reclaim must be a boolean.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: unenroll needs request.reclaim as a boolean"} if {
	_unenrolling
	not _reclaim_request_ok
}

_now_ok if is_number(input.now)

_effects_ok if is_boolean(input.effects.reclaim)

_egress_ok if is_boolean(_request.egress)

_reclaim_request_ok if is_boolean(_request.reclaim)

_action_ok if input.action in _actions

_node_ok if {
	is_string(_node.name)
	_node.name != ""
}

_live_ok if numbers.int_at_least(_live, 0)

_state_ok if _request.state in cfg.hosts.states

_state_value := v if {
	v := _request.state
} else := null

# --- P2 --------------------------------------------------------------------------------

# METADATA
# title: A control-plane node is never enrolled
# description: >-
#   Enrollment is refused when the node shows ANY control-plane indicator
#   (data.sandgate.lib.nodes.control_plane_reasons): the gateway's Nomad server
#   co-location verdict (node.control_plane must be exactly false, unless
#   placement.control_plane.server_colocation is false), a meta key/value listed in
#   placement.control_plane.meta, or a name listed in placement.control_plane.node_names.
#   Admission applies the same test at every create, so a node that becomes a control
#   plane after enrollment takes no new sandboxes either.
# custom:
#   id: P2
#   severity: critical
violations contains {"rule": "P2", "msg": sprintf("enroll %v: %v", [_node.name, reason])} if {
	_enrolling
	some reason in nodes.control_plane_reasons(_node)
}

# --- I5 --------------------------------------------------------------------------------

# METADATA
# title: Egress enrollment needs the isolation bundle declared
# description: >-
#   A node is enrolled for egress (sandbox+egress) only when its Nomad meta carries
#   placement.egress_isolation.meta_key with one of accepted_versions: the operator ran
#   `sandgate isolation render ... --apply` and `--verify` on it (I1-I4) and recorded the
#   bundle version in the node's meta. Without it, an egress sandbox could reach the
#   overlay, the Nomad API or cloud metadata.
# custom:
#   id: I5
#   severity: critical
violations contains {"rule": "I5", "msg": sprintf("enroll %v for egress: node meta %v must declare an accepted isolation bundle version %v (run sandgate isolation render --verify on the node first)", [_node.name, object.get(cfg, ["placement", "egress_isolation", "meta_key"], "unset"), object.get(cfg, ["placement", "egress_isolation", "accepted_versions"], "unset")])} if {
	_enrolling
	_request.egress == true
	not nodes.isolation_declared(_node)
}

# --- B1: a node budget is sane and fits the node ---------------------------------------
#
# The budget given at enrollment (max_sandboxes, cpu_mhz, memory_mb; omitted figures take
# node_budget_default) must not let sandboxes starve the node's managed applications, and
# Nomad would refuse the sandboxes it admits on a budget larger than the node. Omitted
# figures are not judged here: the gateway clamps the default to the same room at every
# create (and admission's B1 checks the room).

# METADATA
# title: A budget figure is a positive integer
# description: >-
#   Each figure of the budget given at enrollment that is one of hosts.budget_figures
#   must be an integer of at least 1.
# custom:
#   id: B1
#   severity: medium
violations contains {"rule": "B1", "msg": sprintf("budget.%v %v must be an integer of at least 1", [k, _budget[k]])} if {
	_enrolling
	some k in object.keys(_budget)
	k in cfg.hosts.budget_figures
	not _positive_int(_budget[k])
}

# METADATA
# title: A budget holds only known figures
# description: >-
#   Every key of the budget given at enrollment must be one of hosts.budget_figures
#   (max_sandboxes, cpu_mhz, memory_mb). A list missing from policy data admits no figure.
# custom:
#   id: B1
#   severity: medium
violations contains {"rule": "B1", "msg": sprintf("budget.%v is not a budget figure (want %v)", [k, object.get(cfg, ["hosts", "budget_figures"], "unset")])} if {
	_enrolling
	some k in object.keys(_budget)
	not _budget_figure(k)
}

_budget_figure(k) if k in cfg.hosts.budget_figures

# METADATA
# title: A budget's sandbox count is under the ceiling
# description: >-
#   max_sandboxes must be at most hosts.max_sandboxes_ceiling. A ceiling missing from
#   policy data admits no budget.
# custom:
#   id: B1
#   severity: medium
violations contains {"rule": "B1", "msg": sprintf("budget.max_sandboxes %v exceeds the ceiling %v", [_budget.max_sandboxes, object.get(cfg, ["hosts", "max_sandboxes_ceiling"], "unset")])} if {
	_enrolling
	_positive_int(_budget.max_sandboxes)
	not _within_ceiling
}

_within_ceiling if _budget.max_sandboxes <= cfg.hosts.max_sandboxes_ceiling

# METADATA
# title: A budget fits what Nomad can allocate on the node
# description: >-
#   cpu_mhz and memory_mb must not exceed what Nomad can allocate on the node:
#   node.capacity.allocatable (NodeResources less ReservedResources) less
#   node.capacity.others (held by allocations of jobs without the sandbox prefix).
# custom:
#   id: B1
#   severity: medium
violations contains {"rule": "B1", "msg": sprintf("budget.%v %v exceeds the %v Nomad can allocate on node %v (%v allocatable less %v held by other jobs); give at most %v or omit it (the default is clamped to it)", [k, _budget[k], _room(k), _node.name, _node.capacity.allocatable[k], _node.capacity.others[k], _room(k)])} if {
	_enrolling
	some k in ["cpu_mhz", "memory_mb"]
	_positive_int(_budget[k])
	_budget[k] > _room(k)
}

# What Nomad can still allocate to sandboxes on the node: allocatable less what other jobs
# hold; undefined when a figure is missing (refused below).
_room(k) := _node.capacity.allocatable[k] - _node.capacity.others[k] if {
	_capacity_figure_ok("allocatable", k)
	_capacity_figure_ok("others", k)
}

# METADATA
# title: An enrollment knows what Nomad can allocate on the node
# description: >-
#   node.capacity.allocatable and node.capacity.others must carry non-negative cpu_mhz
#   and memory_mb: the figures a budget is judged against must be known (fail closed).
# custom:
#   id: B1
#   severity: medium
violations contains {"rule": "B1", "msg": sprintf("node.capacity.%v.%v %v must be a non-negative number: an enrollment needs what Nomad can allocate on the node", [group, k, object.get(_node, ["capacity", group, k], null)])} if {
	_enrolling
	some group in ["allocatable", "others"]
	some k in ["cpu_mhz", "memory_mb"]
	not _capacity_figure_ok(group, k)
}

_capacity_figure_ok(group, k) if numbers.at_least(_node.capacity[group][k], 0)

_positive_int(x) if numbers.int_at_least(x, 1)

# --- R2: a node's sandboxes are reclaimed before it drains or leaves --------------------
#
# No sandbox is left running, holding budget, on a node sandgate no longer manages.

# METADATA
# title: A node with live sandboxes leaves only with reclaim
# description: >-
#   Unenrolling a node with live sandboxes is refused unless the operator asked for
#   reclaim=true, which reclaims (destroys) them first.
# custom:
#   id: R2
#   severity: high
violations contains {"rule": "R2", "msg": sprintf("unenroll %v: %v live sandboxes; reclaim them first (unenroll with reclaim)", [_node.name, _live])} if {
	_unenrolling
	_live > 0
	input.effects.reclaim != true
}

# METADATA
# title: A draining node's sandboxes are reclaimed first
# description: >-
#   Moving a node to draining reclaims (destroys) its live sandboxes first.
# custom:
#   id: R2
#   severity: high
violations contains {"rule": "R2", "msg": sprintf("drain %v: its %v live sandboxes must be reclaimed first", [_node.name, _live])} if {
	_changing_state
	_request.state == "draining"
	_live > 0
	input.effects.reclaim != true
}

# METADATA
# title: Sandboxes are reclaimed only on a drain or an unenroll
# description: >-
#   The gateway may reclaim only when a node moves to draining or is unenrolled with
#   reclaim=true, never as a side effect of any other change.
# custom:
#   id: R2
#   severity: high
violations contains {"rule": "R2", "msg": "reclaim: only a drain or an unenroll with reclaim=true destroys sandboxes"} if {
	input.effects.reclaim == true
	not _reclaim_asked
}

_reclaim_asked if {
	_changing_state
	_request.state == "draining"
}

_reclaim_asked if {
	_unenrolling
	_request.reclaim == true
}
