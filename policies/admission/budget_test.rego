package sandgate.admission_test

import future.keywords.not

# B1 ----------------------------------------------------------------------------------------

test_b1_sandbox_count_overrun_by_one_denies if {
	_ids(_with("/budget/used/sandboxes", 10)) == {"B1"}
}

test_b1_last_sandbox_slot_is_allowed if {
	_ids(_with("/budget/used/sandboxes", 9)) == set()
}

test_b1_cpu_overrun_by_one_mhz_denies if {
	# 7501 used + 500 requested = 8001 = limit + 1
	_ids(_with("/budget/used/cpu_mhz", 7501)) == {"B1"}
}

test_b1_cpu_exactly_at_limit_is_allowed if {
	_ids(_with("/budget/used/cpu_mhz", 7500)) == set()
}

test_b1_memory_overrun_by_one_mb_denies if {
	# 15873 used + 512 requested = 16385 = limit + 1
	_ids(_with("/budget/used/memory_mb", 15873)) == {"B1"}
}

test_b1_message_shows_the_sum if {
	d := _decision(_with("/budget/used/cpu_mhz", 7501))
	d.violations == {{"rule": "B1", "msg": "node budget: 7501 used + 500 requested cpu_mhz exceeds 8000"}}
}

test_b1_missing_budget_limit_denies if {
	d := _decision(_without("/budget/limits/cpu_mhz"))
	{"rule": "B1", "msg": "budget.limits.cpu_mhz null must be a non-negative number"} in d.violations
	{v.rule | some v in d.violations} == {"B1"}
	_ids(_with("/budget/limits/max_sandboxes", "10")) == {"B1"}
}

test_b1_missing_or_negative_budget_usage_denies if {
	_ids(_without("/budget/used/memory_mb")) == {"B1"}
	_ids(_with("/budget/used/sandboxes", -1)) == {"B1"}
	_ids(_with("/budget/used/cpu_mhz", -8000)) == {"B1"}
}

test_b1_zero_limits_deny if {
	_ids(_with("/budget/limits", {"max_sandboxes": 0, "cpu_mhz": 8000, "memory_mb": 16384})) == {"B1"}
}

# B1: Nomad's room (node.capacity) ---------------------------------------------------------

test_b1_a_request_that_fills_nomads_room_exactly_is_allowed if {
	# 1000 others + max(1000 Nomad, 1500 reserved) + 500 requested = 3000
	_ids(_with("/node/capacity/allocatable/cpu_mhz", 3000)) == set()
}

test_b1_a_request_beyond_nomads_room_denies if {
	d := _decision(_with("/node/capacity/allocatable/cpu_mhz", 2999))
	d.violations == {{"rule": "B1", "msg": "node capacity: 1000 cpu_mhz held by other jobs + 1500 by sandboxes + 500 requested exceeds the 2999 Nomad can allocate on node w1"}}
}

test_b1_another_schedulers_job_filling_the_node_denies_within_the_budget if {
	# budget: 1536 + 512 of 16384 MB is fine; Nomad: 31000 + 1536 + 512 > 32768
	d := _decision(_with("/node/capacity/others/memory_mb", 31000))
	d.violations == {{"rule": "B1", "msg": "node capacity: 31000 memory_mb held by other jobs + 1536 by sandboxes + 512 requested exceeds the 32768 Nomad can allocate on node w1"}}
}

test_b1_sandboxes_nomad_holds_beyond_the_reservations_count if {
	# another gateway's sandboxes on the node: Nomad's count (8600) is the larger
	_ids(_with("/node/capacity/sandboxes/cpu_mhz", 8500)) == set()
	_ids(_with("/node/capacity/sandboxes/cpu_mhz", 8501)) == {"B1"}
}

test_b1_missing_capacity_denies if {
	d := _decision(_without("/node/capacity"))
	{"rule": "B1", "msg": "node.capacity.allocatable.cpu_mhz null must be a non-negative number"} in d.violations
	{"rule": "B1", "msg": "node.capacity.others.memory_mb null must be a non-negative number"} in d.violations
	{v.rule | some v in d.violations} == {"B1"}
}

test_b1_malformed_capacity_figures_deny if {
	_ids(_with("/node/capacity/allocatable/memory_mb", "32768")) == {"B1"}
	_ids(_with("/node/capacity/others/cpu_mhz", -1)) == {"B1"}
	_ids(_with("/node/capacity/sandboxes/memory_mb", null)) == {"B1"}
	_ids(_without("/node/capacity/sandboxes")) == {"B1"}
	_ids(_with("/node/capacity", [])) == {"B1"}
}

# B2 ----------------------------------------------------------------------------------------

test_b2_cpu_above_max_with_budget_room_denies if {
	_ids(_with(_task("Resources/CPU"), 2001)) == {"B2"}
}

test_b2_cpu_at_max_is_allowed if {
	_ids(_with(_task("Resources/CPU"), 2000)) == set()
}

test_b2_cpu_below_min_denies if {
	_ids(_with(_task("Resources/CPU"), 99)) == {"B2"}
}

test_b2_memory_above_max_denies if {
	_ids(_with(_task("Resources/MemoryMB"), 4097)) == {"B2"}
}

test_b2_memory_below_min_denies if {
	_ids(_with(_task("Resources/MemoryMB"), 63)) == {"B2"}
}

test_b2_missing_cpu_denies_b1_and_b2 if {
	_ids(_without(_task("Resources/CPU"))) == {"B1", "B2"}
}

test_b2_non_numeric_memory_denies if {
	_ids(_with(_task("Resources/MemoryMB"), "512")) == {"B1", "B2"}
}

test_b2_reserved_cores_deny if {
	_ids(_with(_task("Resources/Cores"), 1)) == {"B2"}
}

test_b2_zero_cores_is_unset if {
	_ids(_with(_task("Resources/Cores"), 0)) == set()
}

test_b2_missing_resources_denies if {
	ids := _ids(_without(_task("Resources")))
	ids == {"B1", "B2"}
}

# R1 ----------------------------------------------------------------------------------------

test_r1_priority_at_ceiling_denies if {
	_ids(_with("/job/Priority", 20)) == {"R1"}
}

test_r1_priority_just_below_ceiling_is_allowed if {
	_ids(_with("/job/Priority", 19)) == set()
}

test_r1_fractional_priority_just_below_ceiling_denies if {
	_ids(_with("/job/Priority", 19.5)) == {"R1"}
}

test_r1_priority_zero_denies if {
	# Nomad replaces 0 with its default priority, 50.
	_ids(_with("/job/Priority", 0)) == {"R1"}
}

test_r1_missing_priority_denies if {
	_ids(_without("/job/Priority")) == {"R1"}
	_ids(_with("/job/Priority", null)) == {"R1"}
}

test_r1_group_restart_attempts_deny if {
	_ids(_with(_group("RestartPolicy/Attempts"), 3)) == {"R1"}
	_ids(_with(_group("RestartPolicy"), null)) == {"R1"}
}

test_r1_task_restart_policy_with_attempts_denies if {
	_ids(_with(_task("RestartPolicy"), {"Attempts": 2, "Mode": "delay"})) == {"R1"}
}

test_r1_task_restart_policy_without_attempts_is_allowed if {
	_ids(_with(_task("RestartPolicy"), {"Attempts": 0, "Mode": "fail"})) == set()
}

test_r1_group_reschedule_attempts_deny if {
	_ids(_with(_group("ReschedulePolicy/Attempts"), 1)) == {"R1"}
}

test_r1_group_reschedule_unlimited_denies if {
	_ids(_with(_group("ReschedulePolicy/Unlimited"), true)) == {"R1"}
	_ids(_without(_group("ReschedulePolicy"))) == {"R1"}
}

test_r1_job_reschedule_denies if {
	_ids(_with("/job/Reschedule", {"Attempts": 0, "Unlimited": true})) == {"R1"}
	_ids(_with("/job/Reschedule", {"Attempts": 0, "Unlimited": false})) == set()
}

# B3 ----------------------------------------------------------------------------------------

test_b3_agent_below_the_default_quota_is_allowed if {
	_ids(_with("/principal/live_sandboxes", 4)) == set()
}

test_b3_agent_at_the_default_quota_denies if {
	_ids(_with("/principal/live_sandboxes", 5)) == {"B3"}
}

test_b3_the_token_quota_replaces_the_default if {
	_ids(_with("/principal", {"sub": "a", "role": "agent", "live_sandboxes": 1, "max_live_sandboxes": 1})) == {"B3"}
	_ids(_with("/principal", {"sub": "a", "role": "agent", "live_sandboxes": 7, "max_live_sandboxes": 8})) == set()
}

test_b3_a_zero_or_mistyped_quota_means_the_default if {
	_ids(_with("/principal", {"sub": "a", "role": "agent", "live_sandboxes": 5, "max_live_sandboxes": 0})) == {"B3"}
	_ids(_with("/principal", {"sub": "a", "role": "agent", "live_sandboxes": 5, "max_live_sandboxes": "99"})) == {"B3"}
}

test_b3_operators_have_no_principal_quota if {
	_ids(_with("/principal", {"sub": "ops", "role": "operator", "live_sandboxes": 500})) == set()
}

test_b3_default_comes_from_data if {
	ids := _ids(_base) with data.sandgate.config.agent_quota.default_max_live_sandboxes as 1
	ids == {"B3"}
}

test_input_principal_missing_or_malformed_denies if {
	_ids(_without("/principal")) == {"INPUT"}
	_ids(_with("/principal", {"role": "agent"})) == {"INPUT"}
	_ids(_with("/principal", {"role": 1, "live_sandboxes": 0})) == {"INPUT"}
	_ids(_with("/principal/live_sandboxes", -1)) == {"INPUT"}
}

test_b2_missing_bounds_in_data_deny if {
	ids := _ids(_base) with data.sandgate.config as _data_without("sandbox/max_cpu_mhz")
	ids == {"B2"}
	d := _decision(_base) with data.sandgate.config.sandbox.min_memory_mb as "64"
	d.violations == {{"rule": "B2", "msg": "task Resources.MemoryMB 512 must be a number in [64, 4096]"}}
}

test_b2_cores_false_is_set if {
	_ids(_with(_task("Resources/Cores"), false)) == {"B2"}
}

test_r1_missing_ceiling_in_data_denies if {
	d := _decision(_base) with data.sandgate.config as _data_without("priority/ceiling")
	d.violations == {{"rule": "R1", "msg": "job Priority 10 must be a number from 1 to null"}}
}

test_b3_missing_default_quota_in_data_refuses_agents if {
	d := _decision(_base) with data.sandgate.config as _data_without("agent_quota/default_max_live_sandboxes")
	d.violations == {{"rule": "B3", "msg": "agent agent:ci has 1 live sandboxes; its quota is null"}}
	ops := _with("/principal", {"sub": "ops", "role": "operator", "live_sandboxes": 3})
	ids := _ids(ops) with data.sandgate.config as _data_without("agent_quota/default_max_live_sandboxes")
	ids == set()
}
