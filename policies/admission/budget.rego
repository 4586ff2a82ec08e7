package sandgate.admission

# Budgets and priority: B1 (per-node budget), B2 (per-sandbox size), R1 (low priority, no
# restarts or reschedules). budget.used is summed in Go over everything live on the node,
# EXCLUDING the sandbox being admitted. See admission.rego for how the rules, the fast
# path and the checks fit together.

_budget_figures := {"limits": ["max_sandboxes", "cpu_mhz", "memory_mb"], "used": ["sandboxes", "cpu_mhz", "memory_mb"]}

# used + request <= limit, all numbers, used non-negative (limits are checked on their own).
_fits(used, request, limit) if {
	is_number(used)
	is_number(request)
	is_number(limit)
	used >= 0
	used + request <= limit
}

_sandboxes_fit if _fits(input.budget.used.sandboxes, 1, input.budget.limits.max_sandboxes)

_resource_fits(key, resource) if _fits(input.budget.used[key], _resources[resource], input.budget.limits[key])

_budget_value(section, k) := v if {
	v := input.budget[section][k]
} else := null

_resource_value(k) := v if {
	v := _resources[k]
} else := null

# --- B1 --------------------------------------------------------------------------------

# METADATA
# title: Node budget holds this sandbox
# description: >-
#   Every figure of budget.limits (max_sandboxes, cpu_mhz, memory_mb) and budget.used
#   (sandboxes, cpu_mhz, memory_mb) must be a non-negative number, and the live sandboxes
#   on the node plus this one, and the CPU (MHz) and memory (MB) already reserved plus the
#   task's Resources.CPU and Resources.MemoryMB, must not exceed the limits: sandboxes can
#   never starve the node's managed applications. Unknown figures refuse (fail closed).
# custom:
#   id: B1
#   severity: medium
violations contains {"rule": "B1", "msg": msg} if {
	not _canonical
	some msg in _b1
}

_b1 contains sprintf("budget.%s.%s %v must be a non-negative number", [section, k, _budget_value(section, k)]) if {
	some section, keys in _budget_figures
	some k in keys
	not _budget_figure(section, k)
}

_budget_figure(section, k) if {
	x := input.budget[section][k]
	is_number(x)
	x >= 0
}

_b1 contains sprintf("node budget: %v live sandboxes + 1 exceeds max_sandboxes %v", [_budget_value("used", "sandboxes"), _budget_value("limits", "max_sandboxes")]) if {
	not _sandboxes_fit
}

_b1 contains sprintf("node budget: %v used + %v requested %s exceeds %v", [_budget_value("used", key), _resource_value(resource), key, _budget_value("limits", key)]) if {
	some key, resource in {"cpu_mhz": "CPU", "memory_mb": "MemoryMB"}
	not _resource_fits(key, resource)
}

# --- B2 --------------------------------------------------------------------------------

# METADATA
# title: Sandbox size is within the per-sandbox range
# description: >-
#   The task's Resources.CPU and Resources.MemoryMB must be numbers within
#   [sandbox.min_cpu_mhz, sandbox.max_cpu_mhz] and [sandbox.min_memory_mb,
#   sandbox.max_memory_mb], and Resources.Cores must be unset (null, absent or 0): one
#   sandbox may not take a node's whole budget, a missing value would let Nomad apply its
#   own default, and reserved cores are exclusive and bypass the MHz budget of B1.
# custom:
#   id: B2
#   severity: medium
violations contains {"rule": "B2", "msg": msg} if {
	not _canonical
	some msg in _b2
}

_b2 contains sprintf("task Resources.%s %v must be a number in [%v, %v]", [resource, _resource_value(resource), range[0], range[1]]) if {
	some resource, range in {
		"CPU": [_cfg.sandbox.min_cpu_mhz, _cfg.sandbox.max_cpu_mhz],
		"MemoryMB": [_cfg.sandbox.min_memory_mb, _cfg.sandbox.max_memory_mb],
	}
	not _resource_in_range(resource, range[0], range[1])
}

_resource_in_range(resource, low, high) if _within(_resources[resource], low, high)

_b2 contains sprintf("task Resources.Cores must not be set, got %v", [_resource_value("Cores")]) if {
	not _no_cores
}

_no_cores if object.get(_resources, "Cores", null) in {null, 0}

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
violations contains {"rule": "R1", "msg": msg} if {
	not _canonical
	some msg in _r1
}

_priority_ok if _within(input.job.Priority, 1, _cfg.priority.ceiling - 1)

_r1 contains sprintf("job Priority %v must be a number from 1 to %v", [_job_value("Priority"), _cfg.priority.ceiling - 1]) if {
	not _priority_ok
}

_r1 contains "task group RestartPolicy.Attempts must be 0" if not _group.RestartPolicy.Attempts == 0

_r1 contains "task RestartPolicy.Attempts must be 0 when set" if {
	_set(_task.RestartPolicy)
	not _task.RestartPolicy.Attempts == 0
}

_r1 contains "task group ReschedulePolicy must have Attempts 0 and Unlimited false" if {
	not _group_no_reschedule
}

_group_no_reschedule if _no_reschedule(_group.ReschedulePolicy)

_r1 contains "job Reschedule must have Attempts 0 and Unlimited false when set" if {
	_set(input.job.Reschedule)
	not _no_reschedule(input.job.Reschedule)
}

_no_reschedule(p) if {
	p.Attempts == 0
	p.Unlimited == false
}

# --- B3 --------------------------------------------------------------------------------

# An agent's quota: its token's max_live_sandboxes when that is a positive number, else
# agent_quota.default_max_live_sandboxes. Operators have no per-principal quota (node
# budgets, B1, still bound them).
_quota(q) := q if {
	is_number(q)
	q > 0
} else := _cfg.agent_quota.default_max_live_sandboxes

_principal_room(role, _, _) if role != "agent"

_principal_room("agent", live, quota) if live + 1 <= _quota(quota)

_principal_quota_value := object.get(input.principal, "max_live_sandboxes", null)

# METADATA
# title: An agent stays within its quota of live sandboxes
# description: >-
#   An agent principal (principal.role "agent") may hold at most its quota of live
#   sandboxes: principal.live_sandboxes (its live sandboxes, counted in the same store
#   transaction that reserves this one, so concurrent creates cannot overrun it) plus
#   this one must not exceed principal.max_live_sandboxes (the quota given when its
#   token was minted) or, without one, agent_quota.default_max_live_sandboxes. One
#   runaway agent cannot take every node's budget.
# custom:
#   id: B3
#   severity: medium
violations contains {"rule": "B3", "msg": msg} if {
	not _canonical
	_principal_ok
	not _principal_room(input.principal.role, input.principal.live_sandboxes, _principal_quota_value)
	msg := sprintf("agent %v has %v live sandboxes; its quota is %v", [object.get(input.principal, "sub", "?"), input.principal.live_sandboxes, _quota(_principal_quota_value)])
}
