package sandgate.admission

import data.sandgate.config as cfg
import data.sandgate.lib.nodes
import future.keywords.not

# Placement: P1 (pinned to one enrolled worker of an allowed platform), P2 (never a control
# plane), P3 (node healthy and below the usage thresholds), I5 (egress only on nodes
# enrolled for egress). See admission.rego for how the rules are written.

# Node fields for messages, null when absent.
_node_value(k) := v if {
	v := input.node[k]
} else := null

# --- P1: the job is pinned to one enrolled node of an allowed platform -----------------
#
# Without the pin Nomad could place the sandbox on a node where no placement,
# control-plane or budget check was made; without the platform constraints on a platform
# whose images and hardening were never vetted.

# Every constraint of the job, its group and its task (constraints at all levels apply),
# duplicates included.
_constraints := array.concat(
	[c | some c in input.job.Constraints],
	array.concat(
		[c | some c in input.job.TaskGroups[0].Constraints],
		[c | some c in input.job.TaskGroups[0].Tasks[0].Constraints],
	),
)

# METADATA
# title: The job carries one node pin
# description: >-
#   The job (with its group and task) must carry exactly one ${node.unique.name}
#   constraint.
# custom:
#   id: P1
#   severity: high
violations contains {"rule": "P1", "msg": sprintf("job must carry exactly one ${node.unique.name} constraint, found %v", [n])} if {
	n := count([c | some c in _constraints; c.LTarget == "${node.unique.name}"])
	n != 1
}

# METADATA
# title: The node pin selects the node admission evaluated
# description: >-
#   Every ${node.unique.name} constraint must have operand "=" and name the node
#   admission evaluated (node.name).
# custom:
#   id: P1
#   severity: high
violations contains {"rule": "P1", "msg": sprintf("node pin %v %v %v does not select node %v", [c.LTarget, c.Operand, c.RTarget, _node_value("name")])} if {
	some c in _constraints
	c.LTarget == "${node.unique.name}"
	not {
		c.Operand == "="
		c.RTarget == input.node.name
	}
}

# METADATA
# title: The node is enrolled
# description: >-
#   The node's enrollment must be one of placement.enrollments.
# custom:
#   id: P1
#   severity: high
violations contains {"rule": "P1", "msg": sprintf("node enrollment %v is not one of %v", [_node_value("enrollment"), _data_value(["placement", "enrollments"])])} if {
	not input.node.enrollment in cfg.placement.enrollments
}

# METADATA
# title: The node runs an allowed operating system
# description: >-
#   The node's kernel.name attribute must be in placement.allowed_os.
# custom:
#   id: P1
#   severity: high
violations contains {"rule": "P1", "msg": sprintf("node attribute kernel.name is not one of %v", [_data_value(["placement", "allowed_os"])])} if {
	not input.node.attributes["kernel.name"] in cfg.placement.allowed_os
}

# METADATA
# title: The node has an allowed architecture
# description: >-
#   The node's cpu.arch attribute must be in placement.allowed_architectures.
# custom:
#   id: P1
#   severity: high
violations contains {"rule": "P1", "msg": sprintf("node attribute cpu.arch is not one of %v", [_data_value(["placement", "allowed_architectures"])])} if {
	not input.node.attributes["cpu.arch"] in cfg.placement.allowed_architectures
}

# METADATA
# title: The job carries the platform constraints
# description: >-
#   The job must carry ${attr.kernel.name} and ${attr.cpu.arch} constraints.
# custom:
#   id: P1
#   severity: high
violations contains {"rule": "P1", "msg": sprintf("job lacks a %v constraint", [target])} if {
	some target in ["${attr.kernel.name}", "${attr.cpu.arch}"]
	not {
		some c in _constraints
		c.LTarget == target
	}
}

# METADATA
# title: The platform constraints pin the node's own platform
# description: >-
#   Every ${attr.kernel.name} and ${attr.cpu.arch} constraint must be "=" the node's
#   attribute: with the node attribute checked against the allowlist, that keeps the job
#   on a vetted platform.
# custom:
#   id: P1
#   severity: high
violations contains {"rule": "P1", "msg": sprintf("constraint %v %v %v must be = an allowed value equal to the node's %v", [c.LTarget, c.Operand, c.RTarget, attribute])} if {
	some c in _constraints
	attribute := {"${attr.kernel.name}": "kernel.name", "${attr.cpu.arch}": "cpu.arch"}[c.LTarget]
	not {
		c.Operand == "="
		c.RTarget == input.node.attributes[attribute]
	}
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
#   One message names every indicator the node shows (the shared library judges them, so
#   that enrollment and creation agree); an absent node may be one.
# custom:
#   id: P2
#   severity: critical
violations contains {"rule": "P2", "msg": _control_plane_msg} if {
	_control_plane_reasons != set()
}

_control_plane_reasons := nodes.control_plane_reasons(input.node) if {
	is_object(input.node)
} else := {"node facts are missing: it may be a control-plane node"}

# Every indicator the node shows, in one line. A wording helper (docs/policies.md, "How a
# rule words its message"): one cause, a control-plane node, would otherwise be a line per
# indicator; only read for a violation.
_control_plane_msg := concat("; ", sort(_control_plane_reasons))

# --- P3: the node is ready, active and not overloaded -----------------------------------
#
# A down or draining node would strand the sandbox with its budget reserved, and Nomad
# does not hard-cap ephemeral disk, so a full node is about to be reclaimed (R3).

# METADATA
# title: The node is ready
# description: >-
#   Nomad must report the node's status as "ready".
# custom:
#   id: P3
#   severity: medium
violations contains {"rule": "P3", "msg": sprintf("node status is %v, must be ready", [_node_value("status")])} if {
	not input.node.status == "ready"
}

# METADATA
# title: The node is eligible
# description: >-
#   Nomad must report the node's scheduling eligibility as "eligible".
# custom:
#   id: P3
#   severity: medium
violations contains {"rule": "P3", "msg": sprintf("node eligibility is %v, must be eligible", [_node_value("eligibility")])} if {
	not input.node.eligibility == "eligible"
}

# METADATA
# title: The node is active
# description: >-
#   The node's operator_state must be "active": not frozen, reserved or draining.
# custom:
#   id: P3
#   severity: medium
violations contains {"rule": "P3", "msg": sprintf("node operator_state is %v, must be active", [_node_value("operator_state")])} if {
	not input.node.operator_state == "active"
}

# METADATA
# title: The node is not draining
# description: >-
#   The node's drain must be explicitly false.
# custom:
#   id: P3
#   severity: medium
violations contains {"rule": "P3", "msg": "node is draining (drain must be false)"} if not input.node.drain == false

# METADATA
# title: The node is below the usage thresholds
# description: >-
#   The node's memory and disk use must be known and below
#   thresholds.refuse_create_memory_percent / refuse_create_disk_percent.
# custom:
#   id: P3
#   severity: medium
violations contains {"rule": "P3", "msg": sprintf("node %v %v must be a number below %v", [field, _usage_value(field), _data_value(["thresholds", threshold])])} if {
	some field, threshold in {"memory_percent": "refuse_create_memory_percent", "disk_percent": "refuse_create_disk_percent"}
	not {
		x := input.node.usage[field]
		is_number(x)
		x < cfg.thresholds[threshold]
	}
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
violations contains {"rule": "I5", "msg": sprintf("network %v is not allowed on a node enrolled as %v", [_sandbox_value("network"), enrollment])} if {
	enrollment := input.node.enrollment
	enrollment in cfg.placement.enrollments
	not {
		network := cfg.networks[input.sandbox.network]
		enrollment in network.enrollment
		_egress_allowed(network, enrollment)
	}
}

# A network without access ("none") goes on any enrolled node; any other one only on nodes
# enrolled for egress. (H10 asks the same of the runtime.)
_egress_allowed(network, _) if not network.network_mode != "none"

_egress_allowed(_, enrollment) if enrollment == cfg.placement.egress_enrollment
