package sandgate.admission

import data.sandgate.config as cfg
import data.sandgate.lib.numbers
import future.keywords.not

# Budgets and priority: B1 (per-node budget), B2 (per-sandbox size), B3 (per-agent quota),
# R1 (low priority, no restarts or reschedules). budget.used is summed in Go over everything
# live on the node, EXCLUDING the sandbox being admitted, and principal.live_sandboxes is
# counted in Go too: Rego only compares. See admission.rego for how the rules are written.

_budget_value(section, k) := v if {
	v := input.budget[section][k]
} else := null

# --- B1: the node budget holds this sandbox ---------------------------------------------
#
# Sandboxes can never starve the node's managed applications: the budget given at
# enrollment bounds them, and the node's room as Nomad counts it must hold them too. A
# budget larger than the node, or a node another scheduler has filled, is refused here
# (429, retry later) instead of by Nomad after registration. Unknown figures refuse (fail
# closed).

# METADATA
# title: The node budget's figures are known
# description: >-
#   Every figure of budget.limits (max_sandboxes, cpu_mhz, memory_mb) and budget.used
#   (sandboxes, cpu_mhz, memory_mb) must be a non-negative number. budget.used is summed
#   in Go over everything live on the node, excluding the sandbox being admitted.
# custom:
#   id: B1
#   severity: medium
violations contains {"rule": "B1", "msg": sprintf("budget.%v.%v %v must be a non-negative number", [group, k, _budget_value(group, k)])} if {
	some [group, k] in [
		["limits", "max_sandboxes"], ["limits", "cpu_mhz"], ["limits", "memory_mb"],
		["used", "sandboxes"], ["used", "cpu_mhz"], ["used", "memory_mb"],
	]
	not numbers.at_least(input.budget[group][k], 0)
}

# What is in use plus this sandbox fits under each limit. Each fit reads numbers only: a
# figure that is not one is refused above, and again here.

# METADATA
# title: The node budget holds one more sandbox
# description: >-
#   The live sandboxes on the node plus this one must not exceed
#   budget.limits.max_sandboxes.
# custom:
#   id: B1
#   severity: medium
violations contains {"rule": "B1", "msg": sprintf("node budget: %v live sandboxes + 1 exceeds max_sandboxes %v", [_budget_value("used", "sandboxes"), _budget_value("limits", "max_sandboxes")])} if not {
	used := input.budget.used.sandboxes
	limit := input.budget.limits.max_sandboxes
	is_number(used)
	is_number(limit)
	used >= 0
	used + 1 <= limit
}

# METADATA
# title: The node budget holds the sandbox's CPU
# description: >-
#   The CPU (MHz) already reserved on the node plus the task's Resources.CPU must not
#   exceed budget.limits.cpu_mhz.
# custom:
#   id: B1
#   severity: medium
violations contains {"rule": "B1", "msg": sprintf("node budget: %v used + %v requested cpu_mhz exceeds %v", [_budget_value("used", "cpu_mhz"), _resource_value("CPU"), _budget_value("limits", "cpu_mhz")])} if not {
	used := input.budget.used.cpu_mhz
	request := input.job.TaskGroups[0].Tasks[0].Resources.CPU
	limit := input.budget.limits.cpu_mhz
	is_number(used)
	is_number(request)
	is_number(limit)
	used >= 0
	used + request <= limit
}

# METADATA
# title: The node budget holds the sandbox's memory
# description: >-
#   The memory (MB) already reserved on the node plus the task's Resources.MemoryMB must
#   not exceed budget.limits.memory_mb.
# custom:
#   id: B1
#   severity: medium
violations contains {"rule": "B1", "msg": sprintf("node budget: %v used + %v requested memory_mb exceeds %v", [_budget_value("used", "memory_mb"), _resource_value("MemoryMB"), _budget_value("limits", "memory_mb")])} if not {
	used := input.budget.used.memory_mb
	request := input.job.TaskGroups[0].Tasks[0].Resources.MemoryMB
	limit := input.budget.limits.memory_mb
	is_number(used)
	is_number(request)
	is_number(limit)
	used >= 0
	used + request <= limit
}

# Nomad's room: node.capacity, summed in Go from the node's resources and its
# allocations.

# METADATA
# title: The node's room as Nomad counts it is known
# description: >-
#   node.capacity.allocatable (NodeResources less ReservedResources),
#   node.capacity.others (held by allocations of jobs without the sandbox prefix) and
#   node.capacity.sandboxes (held by sandbox allocations) must each carry non-negative
#   cpu_mhz and memory_mb.
# custom:
#   id: B1
#   severity: medium
violations contains {"rule": "B1", "msg": sprintf("node.capacity.%v.%v %v must be a non-negative number", [group, k, _capacity_value(group, k)])} if {
	some group in ["allocatable", "others", "sandboxes"]
	some k in ["cpu_mhz", "memory_mb"]
	not _capacity_figure_ok(group, k)
}

_capacity_figure_ok(group, k) if numbers.at_least(input.node.capacity[group][k], 0)

_capacity_value(group, k) := v if {
	v := input.node.capacity[group][k]
} else := null

# METADATA
# title: Nomad can allocate the sandbox on the node
# description: >-
#   What other jobs hold (node.capacity.others) plus the larger of the sandboxes' holding
#   as Nomad counts it (node.capacity.sandboxes) and budget.used, plus the request, must
#   not exceed node.capacity.allocatable, in CPU and in memory: a starting sandbox has no
#   allocation yet, another gateway's sandbox no reservation here.
# custom:
#   id: B1
#   severity: medium
violations contains {"rule": "B1", "msg": sprintf("node capacity: %v %v held by other jobs + %v by sandboxes + %v requested exceeds the %v Nomad can allocate on node %v", [_capacity_value("others", k), k, _sandboxes_held(k), _resource_value(field), _capacity_value("allocatable", k), _node_value("name")])} if {
	some k, field in {"cpu_mhz": "CPU", "memory_mb": "MemoryMB"}
	not _capacity_fits(k, field)
}

_capacity_fits(k, field) if {
	others := input.node.capacity.others[k]
	held := _sandboxes_held(k)
	request := input.job.TaskGroups[0].Tasks[0].Resources[field]
	allocatable := input.node.capacity.allocatable[k]
	is_number(others)
	is_number(held)
	is_number(request)
	is_number(allocatable)
	others >= 0
	held >= 0
	(others + held) + request <= allocatable
}

# The larger of Nomad's sandbox holding and budget.used; null when either is not a number.
_sandboxes_held(k) := max([nomad, reserved]) if {
	nomad := input.node.capacity.sandboxes[k]
	reserved := input.budget.used[k]
	is_number(nomad)
	is_number(reserved)
} else := null

# --- B2: the sandbox's size is within the per-sandbox range ------------------------------
#
# One sandbox may not take a node's whole budget, and a missing value would let Nomad
# apply its own default. A bound missing from policy data refuses.

# METADATA
# title: The sandbox's CPU is within the per-sandbox range
# description: >-
#   The task's Resources.CPU must be a number within [sandbox.min_cpu_mhz,
#   sandbox.max_cpu_mhz].
# custom:
#   id: B2
#   severity: medium
violations contains {"rule": "B2", "msg": sprintf("task Resources.CPU %v must be a number in [%v, %v]", [_resource_value("CPU"), _data_value(["sandbox", "min_cpu_mhz"]), _data_value(["sandbox", "max_cpu_mhz"])])} if not {
	cpu := input.job.TaskGroups[0].Tasks[0].Resources.CPU
	cpu >= cfg.sandbox.min_cpu_mhz
	cpu <= cfg.sandbox.max_cpu_mhz
}

# METADATA
# title: The sandbox's memory is within the per-sandbox range
# description: >-
#   The task's Resources.MemoryMB must be a number within [sandbox.min_memory_mb,
#   sandbox.max_memory_mb].
# custom:
#   id: B2
#   severity: medium
violations contains {"rule": "B2", "msg": sprintf("task Resources.MemoryMB %v must be a number in [%v, %v]", [_resource_value("MemoryMB"), _data_value(["sandbox", "min_memory_mb"]), _data_value(["sandbox", "max_memory_mb"])])} if not {
	memory := input.job.TaskGroups[0].Tasks[0].Resources.MemoryMB
	memory >= cfg.sandbox.min_memory_mb
	memory <= cfg.sandbox.max_memory_mb
}

# METADATA
# title: The sandbox reserves no cores
# description: >-
#   The task's Resources.Cores must be unset (null, absent or 0): reserved cores are
#   exclusive and bypass the MHz budget of B1.
# custom:
#   id: B2
#   severity: medium
violations contains {"rule": "B2", "msg": sprintf("task Resources.Cores must not be set, got %v", [cores])} if {
	cores := input.job.TaskGroups[0].Tasks[0].Resources.Cores
	not cores in {null, 0}
}

# --- R1: low priority, never restarted or rescheduled ------------------------------------
#
# Sandboxes are always preempted before the cluster's managed applications. A restarted
# sandbox would hand a fresh container to a caller holding an old session token, and a
# rescheduled one would land on a node admission never evaluated.

# METADATA
# title: The job has a low priority
# description: >-
#   Priority must be a number from 1 to priority.ceiling - 1: sandboxes are always
#   preempted before the cluster's managed applications (0 is refused because Nomad
#   replaces it with its default, 50).
# custom:
#   id: R1
#   severity: high
violations contains {"rule": "R1", "msg": sprintf("job Priority %v must be a number from 1 to %v", [_job_value("Priority"), _priority_max])} if not {
	input.job.Priority >= 1
	input.job.Priority <= cfg.priority.ceiling - 1
}

# The highest priority allowed, for the message; null when policy data lacks the ceiling.
_priority_max := max if {
	is_number(cfg.priority.ceiling)
	max := cfg.priority.ceiling - 1
} else := null

# METADATA
# title: The task group is never restarted
# description: >-
#   The group RestartPolicy must have Attempts 0.
# custom:
#   id: R1
#   severity: high
violations contains {"rule": "R1", "msg": "task group RestartPolicy.Attempts must be 0"} if {
	not input.job.TaskGroups[0].RestartPolicy.Attempts == 0
}

# METADATA
# title: The task is never restarted
# description: >-
#   A task RestartPolicy, which overrides the group's, must have Attempts 0 too.
# custom:
#   id: R1
#   severity: high
violations contains {"rule": "R1", "msg": "task RestartPolicy.Attempts must be 0 when set"} if {
	policy := input.job.TaskGroups[0].Tasks[0].RestartPolicy
	not policy in {null, "", [], {}}
	not policy.Attempts == 0
}

# METADATA
# title: The task group is never rescheduled
# description: >-
#   The group ReschedulePolicy must have Attempts 0 and Unlimited false.
# custom:
#   id: R1
#   severity: high
violations contains {"rule": "R1", "msg": "task group ReschedulePolicy must have Attempts 0 and Unlimited false"} if not {
	input.job.TaskGroups[0].ReschedulePolicy.Attempts == 0
	input.job.TaskGroups[0].ReschedulePolicy.Unlimited == false
}

# METADATA
# title: The job is never rescheduled
# description: >-
#   A job-level Reschedule must have Attempts 0 and Unlimited false too.
# custom:
#   id: R1
#   severity: high
violations contains {"rule": "R1", "msg": "job Reschedule must have Attempts 0 and Unlimited false when set"} if {
	policy := input.job.Reschedule
	not policy in {null, "", [], {}}
	not {
		policy.Attempts == 0
		policy.Unlimited == false
	}
}

# --- B3 --------------------------------------------------------------------------------

# METADATA
# title: An agent stays within its quota of live sandboxes
# description: >-
#   An agent principal (principal.role "agent") may hold at most its quota of live
#   sandboxes: principal.live_sandboxes (its live sandboxes, counted in the same store
#   transaction that reserves this one, so concurrent creates cannot overrun it) plus
#   this one must not exceed principal.max_live_sandboxes (the quota given when its
#   token was minted) or, without one, agent_quota.default_max_live_sandboxes. One
#   runaway agent cannot take every node's budget; without a default quota in policy
#   data, agents are refused. Operators have no per-principal quota (node budgets, B1,
#   still bound them).
# custom:
#   id: B3
#   severity: medium
violations contains {"rule": "B3", "msg": sprintf("agent %v has %v live sandboxes; its quota is %v", [object.get(input.principal, "sub", "?"), live, _agent_quota])} if {
	input.principal.role == "agent"
	live := input.principal.live_sandboxes
	is_number(live)
	live >= 0
	not live + 1 <= _agent_quota
}

# An agent's quota: its token's max_live_sandboxes when that is a positive number, else
# agent_quota.default_max_live_sandboxes (null when policy data lacks it: every agent is
# then refused).
_agent_quota := q if {
	q := input.principal.max_live_sandboxes
	is_number(q)
	q > 0
} else := q if {
	q := cfg.agent_quota.default_max_live_sandboxes
	is_number(q)
} else := null
