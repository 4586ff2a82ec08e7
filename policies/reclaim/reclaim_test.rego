package sandgate.reclaim_test

import data.sandgate.reclaim
import future.keywords.not

_base := {
	"now": 1764410000, "live_sandboxes": 2,
	"node": {
		"name": "worker-1", "status": "ready", "drain": false, "operator_state": "active",
		"usage": {"memory_percent": 40, "disk_percent": 50},
	},
}

_ids(doc) := ids if {
	d := reclaim.decision with input as doc
	ids := {v.rule | some v in d.violations}
}

_with(doc, path, value) := json.patch(doc, [{"op": "add", "path": path, "value": value}])

_without(doc, path) := json.patch(doc, [{"op": "remove", "path": path}])

test_a_healthy_node_keeps_its_sandboxes if {
	reclaim.decision.allow with input as _base
}

test_unknown_usage_reclaims_nothing if {
	reclaim.decision.allow with input as _without(_base, "/node/usage")
	reclaim.decision.allow with input as _with(_base, "/node/usage", {"memory_percent": null, "disk_percent": null})
}

test_just_below_the_thresholds_keeps if {
	reclaim.decision.allow with input as _with(_with(_base, "/node/usage/disk_percent", 91.9), "/node/usage/memory_percent", 95.9)
}

test_input_empty_denied if {
	_ids({}) == {"INPUT"}
}

test_input_each_missing_fact_denied if {
	every path in ["/now", "/node", "/live_sandboxes", "/node/name", "/node/drain", "/node/operator_state"] {
		"INPUT" in _ids(_without(_base, path))
	}
}

test_input_mistyped_usage_denied if {
	_ids(_with(_base, "/node/usage/disk_percent", "93")) == {"INPUT"}
	_ids(_with(_base, "/live_sandboxes", -1)) == {"INPUT"}
}

test_r2_nomad_drain_reclaims if {
	_ids(_with(_base, "/node/drain", true)) == {"R2"}
}

test_r2_operator_draining_reclaims if {
	_ids(_with(_base, "/node/operator_state", "draining")) == {"R2"}
}

test_r2_frozen_or_reserved_keeps if {
	reclaim.decision.allow with input as _with(_base, "/node/operator_state", "frozen")
	reclaim.decision.allow with input as _with(_base, "/node/operator_state", "reserved")
}

test_r3_disk_at_92_reclaims if {
	_ids(_with(_base, "/node/usage/disk_percent", 92)) == {"R3"}
}

test_r3_memory_at_96_reclaims if {
	_ids(_with(_base, "/node/usage/memory_percent", 96.5)) == {"R3"}
}

test_r3_thresholds_come_from_data if {
	ids := _ids(_base) with data.sandgate.config.thresholds.reclaim_disk_percent as 50
	ids == {"R3"}
}

test_nothing_to_reclaim_on_an_empty_node if {
	doc := _with(_with(_with(_base, "/node/drain", true), "/node/usage/disk_percent", 99), "/live_sandboxes", 0)
	reclaim.decision.allow with input as doc
}

# --- H5: one sandbox's task directories -------------------------------------------------

_quota_bytes := data.sandgate.config.docker.task_dirs.quota_mb * 1048576

_sandbox_base := _with(_base, "/sandbox", {"id": "k7x2m9p4q8r5t1v6", "task_dir_bytes": 28682, "walk_complete": true})

test_h5_a_sandbox_under_its_quota_stays if {
	reclaim.decision.allow with input as _sandbox_base
	reclaim.decision.allow with input as _with(_sandbox_base, "/sandbox/task_dir_bytes", _quota_bytes)
	reclaim.decision.allow with input as _with(_sandbox_base, "/sandbox/task_dir_bytes", 0)
}

test_h5_a_sandbox_past_its_quota_is_denied if {
	_ids(_with(_sandbox_base, "/sandbox/task_dir_bytes", _quota_bytes + 1)) == {"H5"}
}

test_h5_the_message_gives_the_bytes_and_the_quota if {
	d := reclaim.decision with input as _with(_sandbox_base, "/sandbox/task_dir_bytes", 104857600)
	d.violations == {{"rule": "H5", "msg": sprintf("sandbox k7x2m9p4q8r5t1v6 keeps 104857600 bytes in its task directories (/alloc, /local), above the quota of %v MiB", [data.sandgate.config.docker.task_dirs.quota_mb])}}
}

test_h5_an_incomplete_walk_is_denied_even_under_the_quota if {
	d := reclaim.decision with input as _with(_sandbox_base, "/sandbox/walk_complete", false)
	d.violations == {{"rule": "H5", "msg": sprintf("sandbox k7x2m9p4q8r5t1v6: the walk of its task directories (/alloc, /local) stopped at a bound or saw the tree change, and an incomplete walk counts as over the quota of %v MiB", [data.sandgate.config.docker.task_dirs.quota_mb])}}
}

test_h5_over_the_quota_and_incomplete_gives_both_causes if {
	doc := _with(_with(_sandbox_base, "/sandbox/walk_complete", false), "/sandbox/task_dir_bytes", _quota_bytes + 1)
	d := reclaim.decision with input as doc
	count(d.violations) == 2
	_ids(doc) == {"H5"}
}

test_h5_the_quota_comes_from_data if {
	ids := _ids(_sandbox_base) with data.sandgate.config.docker.task_dirs.quota_mb as 0.01
	ids == {"H5"}
}

test_h5_input_malformed_sandbox_denied if {
	every doc in [
		_with(_base, "/sandbox", null),
		_with(_base, "/sandbox", "k7x2m9p4q8r5t1v6"),
		_without(_sandbox_base, "/sandbox/id"),
		_with(_sandbox_base, "/sandbox/id", ""),
		_without(_sandbox_base, "/sandbox/task_dir_bytes"),
		_with(_sandbox_base, "/sandbox/task_dir_bytes", "104857600"),
		_with(_sandbox_base, "/sandbox/task_dir_bytes", -1),
		_with(_sandbox_base, "/sandbox/task_dir_bytes", 1.5),
		_without(_sandbox_base, "/sandbox/walk_complete"),
		_with(_sandbox_base, "/sandbox/walk_complete", "false"),
	] {
		_ids(doc) == {"INPUT"}
	}
}

test_h5_input_without_a_quota_in_data_denied if {
	_ids(_sandbox_base) == {"INPUT"} with data.sandgate.config.docker.task_dirs.quota_mb as null
	_ids(_sandbox_base) == {"INPUT"} with data.sandgate.config.docker.task_dirs.quota_mb as 0
	d := reclaim.decision with input as _sandbox_base with data.sandgate.config.docker.task_dirs.quota_mb as null
	d.violations == {{"rule": "INPUT", "msg": "config: docker.task_dirs.quota_mb must be a positive number to judge a sandbox's task directories"}}
}

test_h5_a_node_question_needs_no_quota if {
	reclaim.decision.allow with input as _base with data.sandgate.config.docker.task_dirs.quota_mb as null
}

test_h5_a_sandbox_on_a_draining_node_gives_r2_and_h5 if {
	doc := _with(_with(_sandbox_base, "/node/drain", true), "/sandbox/task_dir_bytes", _quota_bytes + 1)
	_ids(doc) == {"R2", "H5"}
}

test_r3_a_threshold_missing_from_data_reclaims if {
	_ids(_base) == {"R3"} with data.sandgate.config.thresholds.reclaim_disk_percent as null
	_ids(_base) == {"R3"} with data.sandgate.config.thresholds.reclaim_memory_percent as "96"
}
