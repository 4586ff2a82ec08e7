package sandgate.reclaim_test

import data.sandgate.reclaim

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
