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

# --- B1 --------------------------------------------------------------------------------

# METADATA
# title: Node budget holds this sandbox
# description: >-
#   Every figure of budget.limits (max_sandboxes, cpu_mhz, memory_mb) and budget.used
#   (sandboxes, cpu_mhz, memory_mb) must be a non-negative number, and the live sandboxes
#   on the node plus this one, and the CPU (MHz) and memory (MB) already reserved plus the
#   task's Resources.CPU and Resources.MemoryMB, must not exceed the limits: sandboxes can
#   never starve the node's managed applications. The node's room as Nomad counts it must
#   hold the sandbox too: node.capacity.allocatable (NodeResources less
#   ReservedResources), node.capacity.others (held by allocations of jobs without the
#   sandbox prefix) and node.capacity.sandboxes (held by sandbox allocations) must each
#   carry non-negative cpu_mhz and memory_mb, and others + the larger of the sandboxes'
#   holding and budget.used + the request must not exceed allocatable, in each
#   dimension: a budget larger than the node, or a node another scheduler has filled,
#   is refused here (429, retry later) instead of by Nomad after registration. Unknown
#   figures refuse (fail closed).
# custom:
#   id: B1
#   severity: medium
violations contains {"rule": "B1", "msg": msg} if some msg in _b1

_b1 contains sprintf("budget.%s.%s %v must be a non-negative number", [group, k, _budget_value(group, k)]) if {
	some [group, k] in [
		["limits", "max_sandboxes"], ["limits", "cpu_mhz"], ["limits", "memory_mb"],
		["used", "sandboxes"], ["used", "cpu_mhz"], ["used", "memory_mb"],
	]
	not numbers.at_least(input.budget[group][k], 0)
}

# What is in use plus this sandbox fits under each limit. Each fit reads numbers only: a
# figure that is not one is refused above, and again here.
_b1 contains sprintf("node budget: %v live sandboxes + 1 exceeds max_sandboxes %v", [_budget_value("used", "sandboxes"), _budget_value("limits", "max_sandboxes")]) if not {
	used := input.budget.used.sandboxes
	limit := input.budget.limits.max_sandboxes
	is_number(used)
	is_number(limit)
	used >= 0
	used + 1 <= limit
}

_b1 contains sprintf("node budget: %v used + %v requested cpu_mhz exceeds %v", [_budget_value("used", "cpu_mhz"), _resource_value("CPU"), _budget_value("limits", "cpu_mhz")]) if not {
	used := input.budget.used.cpu_mhz
	request := input.job.TaskGroups[0].Tasks[0].Resources.CPU
	limit := input.budget.limits.cpu_mhz
	is_number(used)
	is_number(request)
	is_number(limit)
	used >= 0
	used + request <= limit
}

_b1 contains sprintf("node budget: %v used + %v requested memory_mb exceeds %v", [_budget_value("used", "memory_mb"), _resource_value("MemoryMB"), _budget_value("limits", "memory_mb")]) if not {
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
# allocations. Each figure must be a non-negative number.
_b1 contains sprintf("node.capacity.%s.%s %v must be a non-negative number", [group, k, _capacity_value(group, k)]) if {
	some group in ["allocatable", "others", "sandboxes"]
	some k in ["cpu_mhz", "memory_mb"]
	not _capacity_figure_ok(group, k)
}

_capacity_figure_ok(group, k) if numbers.at_least(input.node.capacity[group][k], 0)

_capacity_value(group, k) := v if {
	v := input.node.capacity[group][k]
} else := null

# Other jobs' holding + what sandboxes hold (the larger of Nomad's count and the gateway's
# reservations: a starting sandbox has no allocation yet, another gateway's sandbox no
# reservation here) + the request fits in what Nomad can allocate on the node.
_b1 contains sprintf("node capacity: %v %s held by other jobs + %v by sandboxes + %v requested exceeds the %v Nomad can allocate on node %v", [_capacity_value("others", k), k, _sandboxes_held(k), _resource_value(field), _capacity_value("allocatable", k), _node_value("name")]) if {
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

# --- B2 --------------------------------------------------------------------------------

# METADATA
# title: Sandbox size is within the per-sandbox range
# description: >-
#   The task's Resources.CPU and Resources.MemoryMB must be numbers within
#   [sandbox.min_cpu_mhz, sandbox.max_cpu_mhz] and [sandbox.min_memory_mb,
#   sandbox.max_memory_mb], and Resources.Cores must be unset (null, absent or 0): one
#   sandbox may not take a node's whole budget, a missing value would let Nomad apply its
#   own default, and reserved cores are exclusive and bypass the MHz budget of B1. A bound
#   missing from policy data refuses.
# custom:
#   id: B2
#   severity: medium
violations contains {"rule": "B2", "msg": msg} if some msg in _b2

_b2 contains sprintf("task Resources.CPU %v must be a number in [%v, %v]", [_resource_value("CPU"), _data_value(["sandbox", "min_cpu_mhz"]), _data_value(["sandbox", "max_cpu_mhz"])]) if not {
	cpu := input.job.TaskGroups[0].Tasks[0].Resources.CPU
	cpu >= cfg.sandbox.min_cpu_mhz
	cpu <= cfg.sandbox.max_cpu_mhz
}

_b2 contains sprintf("task Resources.MemoryMB %v must be a number in [%v, %v]", [_resource_value("MemoryMB"), _data_value(["sandbox", "min_memory_mb"]), _data_value(["sandbox", "max_memory_mb"])]) if not {
	memory := input.job.TaskGroups[0].Tasks[0].Resources.MemoryMB
	memory >= cfg.sandbox.min_memory_mb
	memory <= cfg.sandbox.max_memory_mb
}

_b2 contains sprintf("task Resources.Cores must not be set, got %v", [cores]) if {
	cores := input.job.TaskGroups[0].Tasks[0].Resources.Cores
	not cores in {null, 0}
}

# --- R1 --------------------------------------------------------------------------------

# METADATA
# title: Low priority, never restarted or rescheduled
# description: >-
#   Priority must be a number from 1 to priority.ceiling - 1: sandboxes are always preempted before
#   the cluster's managed applications (0 is refused because Nomad replaces it with its
#   default, 50). The group RestartPolicy must have Attempts 0, and a task RestartPolicy
#   (which overrides it) too; the group ReschedulePolicy must have Attempts 0 and Unlimited
#   false, and a job-level Reschedule too: a restarted sandbox would hand a fresh container
#   to a caller holding an old session token, and a rescheduled one would land on a node
#   admission never evaluated.
# custom:
#   id: R1
#   severity: high
violations contains {"rule": "R1", "msg": msg} if some msg in _r1

_r1 contains sprintf("job Priority %v must be a number from 1 to %v", [_job_value("Priority"), _priority_max]) if not {
	input.job.Priority >= 1
	input.job.Priority <= cfg.priority.ceiling - 1
}

# The highest priority allowed, for the message; null when policy data lacks the ceiling.
_priority_max := max if {
	is_number(cfg.priority.ceiling)
	max := cfg.priority.ceiling - 1
} else := null

_r1 contains "task group RestartPolicy.Attempts must be 0" if {
	not input.job.TaskGroups[0].RestartPolicy.Attempts == 0
}

_r1 contains "task RestartPolicy.Attempts must be 0 when set" if {
	policy := input.job.TaskGroups[0].Tasks[0].RestartPolicy
	not policy in {null, "", [], {}}
	not policy.Attempts == 0
}

_r1 contains "task group ReschedulePolicy must have Attempts 0 and Unlimited false" if not {
	input.job.TaskGroups[0].ReschedulePolicy.Attempts == 0
	input.job.TaskGroups[0].ReschedulePolicy.Unlimited == false
}

_r1 contains "job Reschedule must have Attempts 0 and Unlimited false when set" if {
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
violations contains {"rule": "B3", "msg": msg} if {
	input.principal.role == "agent"
	live := input.principal.live_sandboxes
	is_number(live)
	live >= 0
	not live + 1 <= _agent_quota
	msg := sprintf("agent %v has %v live sandboxes; its quota is %v", [object.get(input.principal, "sub", "?"), live, _agent_quota])
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
