package sandgate.hosts_test

import data.sandgate.hosts
import future.keywords.not

_node := {
	"id": "n-1", "name": "worker-1", "status": "ready", "eligibility": "eligible", "drain": false,
	"control_plane": false, "operator_state": "active", "enrollment": "none",
	"meta": {"sandgate.isolation": "v1"},
	"attributes": {"cpu.totalcompute": "8000", "memory.totalbytes": "17179869184", "unique.hostname": "worker-1"},
	"capacity": {
		"allocatable": {"cpu_mhz": 8500, "memory_mb": 16384},
		"others": {"cpu_mhz": 500, "memory_mb": 0},
		"sandboxes": {"cpu_mhz": 0, "memory_mb": 0},
	},
}

_enroll := {
	"now": 1764410000, "action": "enroll", "node": _node,
	"request": {"egress": false, "budget": {"max_sandboxes": 4, "cpu_mhz": 4000, "memory_mb": 8192}},
	"live_sandboxes": 0, "effects": {"reclaim": false},
}

_unenroll := {
	"now": 1764410000, "action": "unenroll", "node": _node,
	"request": {"reclaim": false}, "live_sandboxes": 0, "effects": {"reclaim": false},
}

_state(s, live, reclaim) := {
	"now": 1764410000, "action": "state", "node": _node,
	"request": {"state": s}, "live_sandboxes": live, "effects": {"reclaim": reclaim},
}

_ids(doc) := ids if {
	d := hosts.decision with input as doc
	ids := {v.rule | some v in d.violations}
}

_with(doc, path, value) := json.patch(doc, [{"op": "add", "path": path, "value": value}])

_without(doc, path) := json.patch(doc, [{"op": "remove", "path": path}])

# allow ----------------------------------------------------------------------------------

test_enroll_a_plain_worker_allowed if {
	hosts.decision.allow with input as _enroll
}

test_enroll_without_budget_allowed if {
	hosts.decision.allow with input as _without(_enroll, "/request/budget")
	hosts.decision.allow with input as _with(_enroll, "/request/budget", null)
}

test_enroll_for_egress_with_isolation_declared_allowed if {
	hosts.decision.allow with input as _with(_enroll, "/request/egress", true)
}

test_unenroll_an_empty_node_allowed if {
	hosts.decision.allow with input as _unenroll
}

test_unenroll_with_reclaim_allowed if {
	doc := json.patch(_unenroll, [
		{"op": "add", "path": "/request/reclaim", "value": true},
		{"op": "add", "path": "/live_sandboxes", "value": 3},
		{"op": "add", "path": "/effects/reclaim", "value": true},
	])
	hosts.decision.allow with input as doc
}

test_every_state_change_allowed if {
	every s in ["active", "frozen", "reserved", "draining"] {
		hosts.decision.allow with input as _state(s, 0, false)
	}
	hosts.decision.allow with input as _state("draining", 2, true)
	hosts.decision.allow with input as _state("frozen", 2, false)
}

# INPUT ----------------------------------------------------------------------------------

test_input_empty_denied if {
	ids := _ids({})
	ids == {"INPUT"}
}

test_input_each_missing_fact_denied if {
	every path in ["/now", "/action", "/node", "/request", "/live_sandboxes", "/effects", "/request/egress", "/node/name"] {
		"INPUT" in _ids(_without(_enroll, path))
	}
}

test_input_mistyped_facts_denied if {
	"INPUT" in _ids(_with(_enroll, "/action", "delete"))
	"INPUT" in _ids(_with(_enroll, "/live_sandboxes", -1))
	"INPUT" in _ids(_with(_enroll, "/live_sandboxes", 1.5))
	"INPUT" in _ids(_with(_enroll, "/request/budget", [1]))
	"INPUT" in _ids(_with(_enroll, "/node/name", ""))
	"INPUT" in _ids(_with(_enroll, "/effects/reclaim", "no"))
	"INPUT" in _ids(_state("paused", 0, false))
	"INPUT" in _ids(_without(_unenroll, "/request/reclaim"))
}

# P2 -------------------------------------------------------------------------------------

test_p2_enroll_control_plane_by_colocation_denied if {
	_ids(_with(_enroll, "/node/control_plane", true)) == {"P2"}
	_ids(_without(_enroll, "/node/control_plane")) == {"P2"}
}

test_p2_enroll_control_plane_by_meta_denied if {
	_ids(_with(_enroll, "/node/meta/sandgate.control_plane", "TRUE")) == {"P2"}
}

test_p2_enroll_control_plane_by_name_denied if {
	ids := _ids(_enroll) with data.sandgate.config.placement.control_plane.node_names as ["worker-1"]
	ids == {"P2"}
}

test_p2_only_judges_enrollment if {
	# A control plane that was somehow enrolled can still be frozen or unenrolled.
	hosts.decision.allow with input as _with(_unenroll, "/node/control_plane", true)
	hosts.decision.allow with input as _with(_state("frozen", 0, false), "/node/control_plane", true)
}

# I5 -------------------------------------------------------------------------------------

test_i5_egress_without_isolation_meta_denied if {
	doc := _with(_with(_enroll, "/request/egress", true), "/node/meta", {})
	_ids(doc) == {"I5"}
}

test_i5_egress_with_unaccepted_version_denied if {
	doc := _with(_with(_enroll, "/request/egress", true), "/node/meta/sandgate.isolation", "v0")
	_ids(doc) == {"I5"}
}

test_i5_sandbox_only_enrollment_needs_no_isolation if {
	hosts.decision.allow with input as _with(_enroll, "/node/meta", {})
}

# B1 -------------------------------------------------------------------------------------

test_b1_non_positive_or_fractional_figure_denied if {
	_ids(_with(_enroll, "/request/budget/max_sandboxes", 0)) == {"B1"}
	_ids(_with(_enroll, "/request/budget/cpu_mhz", 10.5)) == {"B1"}
	_ids(_with(_enroll, "/request/budget/memory_mb", "8192")) == {"B1"}
}

test_b1_unknown_figure_denied if {
	_ids(_with(_enroll, "/request/budget/gpus", 1)) == {"B1"}
}

test_b1_above_the_ceiling_denied if {
	_ids(_with(_enroll, "/request/budget/max_sandboxes", 1001)) == {"B1"}
}

test_b1_above_what_nomad_can_allocate_denied if {
	# room: 8500 allocatable - 500 held by other jobs = 8000 MHz; 16384 MB
	_ids(_with(_enroll, "/request/budget/cpu_mhz", 8001)) == {"B1"}
	_ids(_with(_enroll, "/request/budget/memory_mb", 16385)) == {"B1"}
	hosts.decision.allow with input as _with(_enroll, "/request/budget/memory_mb", 16384)
	hosts.decision.allow with input as _with(_enroll, "/request/budget/cpu_mhz", 8000)
}

test_b1_the_refusal_names_the_room if {
	d := hosts.decision with input as _with(_enroll, "/request/budget/cpu_mhz", 8001)
	d.violations == {{"rule": "B1", "msg": "budget.cpu_mhz 8001 exceeds the 8000 Nomad can allocate on node worker-1 (8500 allocatable less 500 held by other jobs); give at most 8000 or omit it (the default is clamped to it)"}}
}

test_b1_other_jobs_shrink_the_room if {
	_ids(_with(_enroll, "/node/capacity/others/memory_mb", 8193)) == {"B1"}
	hosts.decision.allow with input as _with(_enroll, "/node/capacity/others/memory_mb", 8192)
}

test_b1_the_totals_attributes_no_longer_bound_the_budget if {
	hosts.decision.allow with input as _with(_enroll, "/node/attributes", {})
}

test_b1_enrolling_without_known_capacity_denied if {
	_ids(_without(_enroll, "/node/capacity")) == {"B1"}
	_ids(_without(_without(_enroll, "/node/capacity"), "/request/budget")) == {"B1"}
	_ids(_with(_enroll, "/node/capacity/allocatable/cpu_mhz", "8500")) == {"B1"}
	_ids(_with(_enroll, "/node/capacity/others/memory_mb", -1)) == {"B1"}
	d := hosts.decision with input as _without(_enroll, "/node/capacity/others")
	{"rule": "B1", "msg": "node.capacity.others.cpu_mhz null must be a non-negative number: an enrollment needs what Nomad can allocate on the node"} in d.violations
}

test_b1_capacity_is_not_needed_to_unenroll_or_change_state if {
	hosts.decision.allow with input as _without(_unenroll, "/node/capacity")
	hosts.decision.allow with input as _without(_state("frozen", 0, false), "/node/capacity")
}

# R2 -------------------------------------------------------------------------------------

test_r2_unenroll_with_live_sandboxes_without_reclaim_denied if {
	_ids(_with(_unenroll, "/live_sandboxes", 2)) == {"R2"}
}

test_r2_drain_without_reclaiming_denied if {
	_ids(_state("draining", 2, false)) == {"R2"}
}

test_r2_reclaim_on_any_other_change_denied if {
	_ids(_state("frozen", 2, true)) == {"R2"}
	_ids(_with(_enroll, "/effects/reclaim", true)) == {"R2"}
	_ids(_with(_unenroll, "/effects/reclaim", true)) == {"R2"}
}

# Policy data B1 reads: missing, it admits no budget figure and no budget.

test_b1_ceiling_missing_from_data_denies if {
	_ids(_enroll) == {"B1"} with data.sandgate.config.hosts.max_sandboxes_ceiling as null
	hosts.decision.allow with input as _without(_enroll, "/request/budget") with data.sandgate.config.hosts.max_sandboxes_ceiling as null
}

test_b1_budget_figures_missing_from_data_deny if {
	_ids(_enroll) == {"B1"} with data.sandgate.config.hosts.budget_figures as null
}

test_state_list_missing_from_data_denies if {
	_ids(_state("frozen", 0, false)) == {"INPUT"} with data.sandgate.config.hosts.states as null
}

test_i5_isolation_data_missing_denies_egress if {
	_ids(_with(_enroll, "/request/egress", true)) == {"I5"} with data.sandgate.config.placement.egress_isolation as null
}
