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
# Negation: OPA evaluates the arguments of a call before a `not`, so every check that
# must fire on a missing fact is written as `not <zero-argument positive helper>`.

_actions := {"enroll", "unenroll", "state"}

_enrolling if input.action == "enroll"

_unenrolling if input.action == "unenroll"

_changing_state if input.action == "state"

_node := input.node if is_object(input.node)

_request := input.request if is_object(input.request)

_budget := _request.budget if is_object(_request.budget)

_live := input.live_sandboxes

# --- INPUT -----------------------------------------------------------------------------

_input contains "input: now must be a number" if not _now_ok

_input contains "input: action must be enroll, unenroll or state" if not _action_ok

_input contains "input: node must be an object with a non-empty string name" if not _node_ok

_input contains "input: request must be an object" if not _request

_input contains "input: live_sandboxes must be a non-negative integer" if not _live_ok

_input contains "input: effects.reclaim must be a boolean" if not _effects_ok

_input contains "input: enroll needs request.egress as a boolean" if {
	_enrolling
	not _egress_ok
}

_input contains "input: request.budget, when given, must be an object" if {
	_enrolling
	_request.budget != null
	not _budget
}

_input contains sprintf("input: request.state %v is not one of %v", [_state_value, object.get(cfg, ["hosts", "states"], "unset")]) if {
	_changing_state
	not _state_ok
}

_input contains "input: unenroll needs request.reclaim as a boolean" if {
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

# METADATA
# title: Hosts input is complete and well formed
# description: >-
#   The input must carry now, an action (enroll, unenroll or state), the node (an object
#   with a name: Nomad's view, its meta and attributes, the gateway's control_plane
#   verdict, its operator state and enrollment), the request (egress as a boolean and an
#   optional budget object to enroll; a known state to change state; reclaim as a boolean
#   to unenroll), the number of live sandboxes on the node and the effects the gateway
#   will carry out (effects.reclaim). Any gap denies: nothing changes on facts the policy
#   cannot see.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": msg} if {
	some msg in _input
}

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
violations contains {"rule": "P2", "msg": sprintf("enroll %v: %v", [_node.name, msg])} if {
	_enrolling
	some msg in nodes.control_plane_reasons(_node)
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
violations contains {"rule": "I5", "msg": msg} if {
	_enrolling
	_request.egress == true
	not nodes.isolation_declared(_node)
	msg := sprintf("enroll %v for egress: node meta %v must declare an accepted isolation bundle version %v (run sandgate isolation render --verify on the node first)", [_node.name, object.get(cfg, ["placement", "egress_isolation", "meta_key"], "unset"), object.get(cfg, ["placement", "egress_isolation", "accepted_versions"], "unset")])
}

# --- B1 --------------------------------------------------------------------------------

_b1 contains sprintf("budget.%v %v must be an integer of at least 1", [k, _budget[k]]) if {
	some k in object.keys(_budget)
	k in cfg.hosts.budget_figures
	not _positive_int(_budget[k])
}

_b1 contains sprintf("budget.%v is not a budget figure (want %v)", [k, object.get(cfg, ["hosts", "budget_figures"], "unset")]) if {
	some k in object.keys(_budget)
	not _budget_figure(k)
}

# A list of budget figures missing from policy data admits no figure.
_budget_figure(k) if k in cfg.hosts.budget_figures

# A ceiling missing from policy data admits no budget.
_b1 contains sprintf("budget.max_sandboxes %v exceeds the ceiling %v", [_budget.max_sandboxes, object.get(cfg, ["hosts", "max_sandboxes_ceiling"], "unset")]) if {
	_positive_int(_budget.max_sandboxes)
	not _within_ceiling
}

_within_ceiling if _budget.max_sandboxes <= cfg.hosts.max_sandboxes_ceiling

_b1 contains sprintf("budget.%v %v exceeds the %v Nomad can allocate on node %v (%v allocatable less %v held by other jobs); give at most %v or omit it (the default is clamped to it)", [k, _budget[k], _room(k), _node.name, _node.capacity.allocatable[k], _node.capacity.others[k], _room(k)]) if {
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

_b1 contains sprintf("node.capacity.%s.%s %v must be a non-negative number: an enrollment needs what Nomad can allocate on the node", [group, k, object.get(_node, ["capacity", group, k], null)]) if {
	some group in ["allocatable", "others"]
	some k in ["cpu_mhz", "memory_mb"]
	not _capacity_figure_ok(group, k)
}

_capacity_figure_ok(group, k) if numbers.at_least(_node.capacity[group][k], 0)

_positive_int(x) if numbers.int_at_least(x, 1)

# METADATA
# title: A node budget is sane and fits the node
# description: >-
#   The budget given at enrollment (max_sandboxes, cpu_mhz, memory_mb; omitted figures
#   take node_budget_default) holds only known figures, each an integer of at least 1;
#   max_sandboxes is at most hosts.max_sandboxes_ceiling; cpu_mhz and memory_mb do not
#   exceed what Nomad can allocate on the node: node.capacity.allocatable (NodeResources
#   less ReservedResources) less node.capacity.others (held by allocations of jobs without
#   the sandbox prefix), figures that must be known (fail closed). A budget larger than
#   the node would let sandboxes starve its managed applications, and Nomad would refuse
#   the sandboxes it admits. Omitted figures are not judged here: the gateway clamps the
#   default to the same room at every create (and admission's B1 checks the room).
# custom:
#   id: B1
#   severity: medium
violations contains {"rule": "B1", "msg": msg} if {
	_enrolling
	some msg in _b1
}

# --- R2 --------------------------------------------------------------------------------

_r2 contains sprintf("unenroll %v: %v live sandboxes; reclaim them first (unenroll with reclaim)", [_node.name, _live]) if {
	_unenrolling
	_live > 0
	input.effects.reclaim != true
}

_r2 contains sprintf("drain %v: its %v live sandboxes must be reclaimed first", [_node.name, _live]) if {
	_changing_state
	_request.state == "draining"
	_live > 0
	input.effects.reclaim != true
}

_r2 contains "reclaim: only a drain or an unenroll with reclaim=true destroys sandboxes" if {
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

# METADATA
# title: A node's sandboxes are reclaimed before it drains or leaves
# description: >-
#   Moving a node to draining reclaims (destroys) its live sandboxes first, and
#   unenrolling a node with live sandboxes is refused unless the operator asked for
#   reclaim=true, which does the same: no sandbox is left running, holding budget, on a
#   node sandgate no longer manages. Conversely, the gateway may reclaim only on those two
#   requests, never as a side effect of any other change.
# custom:
#   id: R2
#   severity: high
violations contains {"rule": "R2", "msg": msg} if {
	some msg in _r2
}
