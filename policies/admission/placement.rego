package sandgate.admission

import data.sandgate.lib.nodes

# Placement: P1 (pinned to one enrolled worker of an allowed platform), P2 (never a control
# plane), P3 (node healthy and below the usage thresholds), I5 (egress only on nodes
# enrolled for egress). See admission.rego for how the rules, the fast path and the checks
# fit together.

# Nomad's constraint target for the node name (a Nomad name, not a threshold).
_node_pin_target := "${node.unique.name}"

# Platform constraints: the Nomad target, the node attribute it reads and the allowlist.
_platform := [
	{"target": "${attr.kernel.name}", "attribute": "kernel.name", "allowed": _cfg.placement.allowed_os},
	{"target": "${attr.cpu.arch}", "attribute": "cpu.arch", "allowed": _cfg.placement.allowed_architectures},
]

# Node fields for messages, null when absent.
_node_value(k) := v if {
	v := input.node[k]
} else := null

_enrolled if input.node.enrollment in _cfg.placement.enrollments

# --- P1 --------------------------------------------------------------------------------

# METADATA
# title: Job is pinned to one enrolled node of an allowed platform
# description: >-
#   The job (with its group and task) must carry exactly one ${node.unique.name}
#   constraint, operand "=", naming the node admission evaluated; the node must be enrolled
#   (enrollment in placement.enrollments); its kernel.name and cpu.arch attributes must be in
#   placement.allowed_os / allowed_architectures; and the job must carry ${attr.kernel.name}
#   and ${attr.cpu.arch} constraints, every one of them "=" an allowed value equal to the
#   node's attribute. Without the pin Nomad could place the sandbox on a node where no
#   placement, control-plane or budget check was made; without the platform constraints on
#   a platform whose images and hardening were never vetted.
# custom:
#   id: P1
#   severity: high
violations contains {"rule": "P1", "msg": msg} if {
	not _canonical
	some msg in _p1
}

# Every constraint of the job, its group and its task (constraints at all levels apply),
# duplicates included.
_constraints := array.concat(
	[c | some c in input.job.Constraints],
	array.concat([c | some c in _group.Constraints], [c | some c in _task.Constraints]),
)

_node_pins := [c | some c in _constraints; c.LTarget == _node_pin_target]

_p1 contains sprintf("job must carry exactly one %s constraint, found %d", [_node_pin_target, n]) if {
	n := count(_node_pins)
	n != 1
}

_p1 contains sprintf("node pin %v %v %v does not select node %v", [c.LTarget, c.Operand, c.RTarget, _node_value("name")]) if {
	some c in _node_pins
	not _pins_node(c)
}

_pins_node(c) if {
	c.Operand == "="
	c.RTarget == input.node.name
}

_p1 contains sprintf("node enrollment %v is not one of %v", [_node_value("enrollment"), _cfg.placement.enrollments]) if {
	not _enrolled
}

_p1 contains sprintf("node attribute %s is not one of %v", [p.attribute, p.allowed]) if {
	some p in _platform
	not _node_platform_ok(p)
}

_node_platform_ok(p) if input.node.attributes[p.attribute] in p.allowed

_p1 contains sprintf("job lacks a %s constraint", [p.target]) if {
	some p in _platform
	not _constrained(p.target)
}

_constrained(target) if {
	some c in _constraints
	c.LTarget == target
}

_p1 contains sprintf("constraint %v %v %v must be = an allowed value equal to the node's %s", [c.LTarget, c.Operand, c.RTarget, p.attribute]) if {
	some p in _platform
	some c in _constraints
	c.LTarget == p.target
	not _platform_constraint_ok(c, p)
}

_platform_constraint_ok(c, p) if {
	c.Operand == "="
	c.RTarget in p.allowed
	c.RTarget == input.node.attributes[p.attribute]
}

# --- P2 --------------------------------------------------------------------------------

# METADATA
# title: Never on a control-plane node
# description: >-
#   node.control_plane (the gateway's verdict from Nomad server co-location) must be
#   explicitly false; the node's meta must carry none of the key/values listed in
#   placement.control_plane.meta (compared case-insensitively); and neither its name nor its
#   unique.hostname may be listed in placement.control_plane.node_names. ANY indicator
#   refuses: a sandbox on a control plane could reach the Nomad servers and their state.
# custom:
#   id: P2
#   severity: critical
violations contains {"rule": "P2", "msg": msg} if {
	not _canonical
	some msg in _p2
}

# Every indicator the node shows (server co-location, meta, listed names), judged by the
# shared library so that enrollment (hosts) and creation agree. An absent node may be one.
_p2 := nodes.control_plane_reasons(input.node) if {
	is_object(input.node)
} else := {"node facts are missing: it may be a control-plane node"}

# --- P3 --------------------------------------------------------------------------------

# METADATA
# title: Node is ready, active and not overloaded
# description: >-
#   New sandboxes only go to nodes Nomad reports as status "ready" and eligibility
#   "eligible" that are not draining (drain explicitly false), whose operator_state is
#   "active" (not frozen, reserved or draining), and whose memory and disk use are known
#   and below thresholds.refuse_create_memory_percent / refuse_create_disk_percent: a down
#   or draining node would strand the sandbox with its budget reserved, and Nomad does not
#   hard-cap ephemeral disk, so a full node is about to be reclaimed (R3).
# custom:
#   id: P3
#   severity: medium
violations contains {"rule": "P3", "msg": msg} if {
	not _canonical
	some msg in _p3
}

_p3 contains sprintf("node %s is %v, must be %v", [field, _node_value(field), want]) if {
	some field, want in {"status": "ready", "eligibility": "eligible", "operator_state": "active"}
	not input.node[field] == want
}

_p3 contains "node is draining (drain must be false)" if not input.node.drain == false

_p3 contains sprintf("node %s %v must be a number below %v", [field, _usage_value(field), threshold]) if {
	some field, threshold in {
		"memory_percent": _cfg.thresholds.refuse_create_memory_percent,
		"disk_percent": _cfg.thresholds.refuse_create_disk_percent,
	}
	not _usage_below(field, threshold)
}

_usage_below(field, limit) if {
	x := input.node.usage[field]
	is_number(x)
	x < limit
}

_usage_value(k) := v if {
	v := input.node.usage[k]
} else := null

# --- I5 --------------------------------------------------------------------------------

# METADATA
# title: Network is allowed by the node's enrollment
# description: >-
#   An enrolled node only takes the networks whose networks.<name>.enrollment lists its
#   enrollment, and a network with any access at all (docker network_mode other than
#   "none") additionally needs the node to carry placement.egress_enrollment: egress is
#   only safe where the operator installed the isolation bundle (I1-I4). Nodes that are not
#   enrolled at all are refused by P1.
# custom:
#   id: I5
#   severity: high
violations contains {"rule": "I5", "msg": msg} if {
	not _canonical
	not _network_enrollment_ok
	_enrolled
	msg := sprintf("network %v is not allowed on a node enrolled as %v", [_sandbox_value("network"), input.node.enrollment])
}

_network_enrollment_ok if {
	input.node.enrollment in _network.enrollment
	not _egress
}

_network_enrollment_ok if {
	input.node.enrollment in _network.enrollment
	input.node.enrollment == _cfg.placement.egress_enrollment
}
