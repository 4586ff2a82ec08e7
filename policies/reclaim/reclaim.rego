# METADATA
# title: Reclamation of a node's sandboxes
# description: >-
#   Decides whether the sandboxes live on a node may stay there. The gateway asks for
#   every node that holds live sandboxes: on each pass of its usage monitor, when it
#   observes a Nomad drain, and when an operator moves a node to draining. A deny with
#   R2 or R3 makes the gateway reclaim (destroy, through the lifecycle decision) every
#   sandbox on the node and release their budgets. A deny with INPUT reclaims nothing:
#   the gateway logs it and changes nothing, because destroying sandboxes on facts the
#   policy cannot read would be a fault, not a decision.
#
#   With a sandbox object in the input the question is about that one sandbox as well:
#   may it keep what it wrote to the task directories Nomad mounts from the node's disk
#   (/alloc, /local)? A deny with H5 makes the gateway end that sandbox alone, with reason
#   disk_quota.
# scope: package
package sandgate.reclaim

import data.sandgate.config as cfg
import data.sandgate.lib.numbers
import future.keywords.not

# METADATA
# title: Reclaim decision
# description: >-
#   allow is true when the node's sandboxes (and the sandbox given, if any) may stay. Each
#   violation names the rule id that requires reclamation (R2, R3), the sandbox's task
#   directories past the quota (H5) or the input gap (INPUT) and a message.
# entrypoint: true
decision := {"allow": count(violations) == 0, "violations": violations}

_node := input.node if is_object(input.node)

_usage := _node.usage if is_object(_node.usage)

_sandbox := input.sandbox if is_object(input.sandbox)

# The sandbox key is present, whatever its value.
_sandbox_given if _ = input.sandbox

# Bytes per MiB: the quota is kept in MiB, the usage is measured in bytes.
_mib := 1048576

# --- INPUT -----------------------------------------------------------------------------
#
# The gateway never reclaims on an INPUT deny.

# METADATA
# title: Reclaim input carries the time
# description: >-
#   input.now must be a number.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: now must be a number"} if not _now_ok

# METADATA
# title: Reclaim input carries the node
# description: >-
#   input.node must be an object with a non-empty string name.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: node must be an object with a non-empty string name"} if not _node_ok

# METADATA
# title: Reclaim input counts the node's live sandboxes
# description: >-
#   input.live_sandboxes must be a non-negative integer.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: live_sandboxes must be a non-negative integer"} if not _live_ok

# METADATA
# title: Reclaim input says whether the node drains
# description: >-
#   node.drain must be a boolean and node.operator_state a string (R2 reads them).
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: node.drain must be a boolean and node.operator_state a string"} if not _state_facts_ok

# METADATA
# title: The node's usage figures are numbers
# description: >-
#   node.usage.memory_percent and node.usage.disk_percent, when given (not null), must be
#   numbers (R3 reads them).
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": sprintf("input: node.usage.%v, when given, must be a number", [k])} if {
	some k in ["memory_percent", "disk_percent"]
	_usage[k] != null
	not is_number(_usage[k])
}

# METADATA
# title: A sandbox asked about is well formed
# description: >-
#   input.sandbox, when given, must be an object with a non-empty id, a non-negative
#   integer task_dir_bytes and a boolean walk_complete (H5 reads them).
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: sandbox, when given, must be an object with a non-empty string id, task_dir_bytes (a non-negative integer) and walk_complete (a boolean)"} if {
	_sandbox_given
	not _sandbox_ok
}

# METADATA
# title: A sandbox is judged against a task-directory quota
# description: >-
#   With a sandbox in the input, the policy data must hold a positive
#   docker.task_dirs.quota_mb.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "config: docker.task_dirs.quota_mb must be a positive number to judge a sandbox's task directories"} if {
	_sandbox_given
	not _quota_mb
}

_now_ok if is_number(input.now)

_sandbox_ok if {
	is_string(_sandbox.id)
	_sandbox.id != ""
	numbers.int_at_least(_sandbox.task_dir_bytes, 0)
	is_boolean(_sandbox.walk_complete)
}

_quota_mb := q if {
	q := cfg.docker.task_dirs.quota_mb
	is_number(q)
	q > 0
}

_node_ok if {
	is_string(_node.name)
	_node.name != ""
}

_live_ok if numbers.int_at_least(input.live_sandboxes, 0)

_state_facts_ok if {
	is_boolean(_node.drain)
	is_string(_node.operator_state)
}

# --- R2: a draining node's sandboxes are reclaimed first -------------------------------
#
# When a node drains, its sandboxes are reclaimed before the drain moves anything else:
# sandboxes are disposable and have the lowest priority (R1), so they go first and their
# budget is released.

# METADATA
# title: A node Nomad drains has its sandboxes reclaimed first
# description: >-
#   A node with live sandboxes that Nomad drains (drain true, as the gateway observes it)
#   has them reclaimed.
# custom:
#   id: R2
#   severity: high
violations contains {"rule": "R2", "msg": sprintf("node %v is draining in Nomad", [_node.name])} if {
	input.live_sandboxes > 0
	_node.drain == true
}

# METADATA
# title: A node the operator drains has its sandboxes reclaimed first
# description: >-
#   A node with live sandboxes whose operator state is draining has them reclaimed.
# custom:
#   id: R2
#   severity: high
violations contains {"rule": "R2", "msg": sprintf("node %v is draining (operator state)", [_node.name])} if {
	input.live_sandboxes > 0
	_node.operator_state == "draining"
}

# --- R3: a node under disk or memory pressure has its sandboxes reclaimed ---------------
#
# Nomad does not hard-cap ephemeral disk, so sandboxes could fill the node and hurt its
# managed applications. Unknown usage reclaims nothing (the monitor logs it); creation on
# such a node is already refused by P3.

# METADATA
# title: A node under disk or memory pressure has its sandboxes reclaimed
# description: >-
#   A node with live sandboxes whose disk use reaches thresholds.reclaim_disk_percent (92)
#   or whose memory use reaches thresholds.reclaim_memory_percent (96) has them all
#   reclaimed.
# custom:
#   id: R3
#   severity: high
violations contains {"rule": "R3", "msg": sprintf("node %v %v %v%% is at or above the reclaim threshold %v%%", [_node.name, label, x, limit])} if {
	input.live_sandboxes > 0
	some k, label in {"disk_percent": "disk", "memory_percent": "memory"}
	limit := cfg.thresholds[sprintf("reclaim_%v", [k])]
	x := _usage[k]
	is_number(x)
	x >= limit
}

# METADATA
# title: A node without reclaim thresholds has its sandboxes reclaimed
# description: >-
#   A reclaim threshold missing from policy data, or not a number, reclaims a node's live
#   sandboxes: the policy cannot tell that the node is not under pressure.
# custom:
#   id: R3
#   severity: high
violations contains {"rule": "R3", "msg": sprintf("policy data thresholds.reclaim_%v is missing or not a number: node %v's sandboxes are reclaimed", [k, _node.name])} if {
	input.live_sandboxes > 0
	some k in ["disk_percent", "memory_percent"]
	not is_number(object.get(cfg, ["thresholds", sprintf("reclaim_%v", [k])], null))
}

# --- H5: a sandbox past its task-directory quota is ended -------------------------------
#
# Nomad bind-mounts /alloc and /local from the node's disk into every task, read-write,
# and nothing in Nomad caps them (admission H5 shows them as input.nomad_mounts). The
# usage monitor walks both from outside through Nomad's fs/ls and asks about each running
# sandbox. The gateway ends that sandbox alone (reason disk_quota), releasing its budget.

# METADATA
# title: A sandbox past its task-directory quota is ended
# description: >-
#   A sandbox's task_dir_bytes (apparent file sizes plus a floor per entry) must not
#   exceed docker.task_dirs.quota_mb MiB.
# custom:
#   id: H5
#   severity: high
violations contains {"rule": "H5", "msg": sprintf("sandbox %v keeps %v bytes in its task directories (/alloc, /local), above the quota of %v MiB", [_sandbox.id, x, _quota_mb])} if {
	x := _sandbox.task_dir_bytes
	is_number(x)
	x > _quota_mb * _mib
}

# METADATA
# title: A sandbox whose task directories cannot be walked is ended
# description: >-
#   The walk of a sandbox's task directories must be complete: a walk that stopped at one
#   of its bounds (listings, entries, depth, answer size, time) or saw the tree change
#   under it is a tree shaped against the walk, and counts as over the quota.
# custom:
#   id: H5
#   severity: high
violations contains {"rule": "H5", "msg": sprintf("sandbox %v: the walk of its task directories (/alloc, /local) stopped at a bound or saw the tree change, and an incomplete walk counts as over the quota of %v MiB", [_sandbox.id, _quota_mb])} if {
	_sandbox.walk_complete == false
}
