package sandgate.admission_test

import future.keywords.not

# H8 ----------------------------------------------------------------------------------------

test_h8_sleep_past_ceiling_denies if {
	_ids(_with(_cfg("args"), ["999999"])) == {"H8"}
}

test_h8_sleep_past_sandbox_ceiling_at_denies if {
	# The lifetime ceiling allows 14400 s, but this sandbox's ceiling_at is 1 h after creation.
	_ids(_with("/sandbox/ceiling_at", 1764410400)) == {"H8"}
	_ids(json.patch(_base, [
		{"op": "replace", "path": "/sandbox/ceiling_at", "value": 1764410400},
		{"op": "replace", "path": _cfg("args"), "value": ["3600"]},
	])) == set()
}

test_h8_shorter_sleep_is_allowed if {
	_ids(_with(_cfg("args"), ["60"])) == set()
}

test_h8_args_shapes_deny if {
	_ids(_with(_cfg("args"), ["infinity"])) == {"H8"}
	_ids(_with(_cfg("args"), ["4h"])) == {"H8"}
	_ids(_with(_cfg("args"), ["0"])) == {"H8"}
	_ids(_with(_cfg("args"), ["-1"])) == {"H8"}
	_ids(_with(_cfg("args"), [14400])) == {"H8"}
	_ids(_with(_cfg("args"), ["60", "60"])) == {"H8"}
	_ids(_with(_cfg("args"), [])) == {"H8"}
	_ids(_without(_cfg("args"))) == {"H8"}
}

test_h8_command_not_sleep_denies if {
	_ids(_with(_cfg("command"), "/bin/sh")) == {"H8"}
	_ids(_without(_cfg("command"))) == {"H8"}
}

test_h8_entrypoint_denies_h8_only if {
	# entrypoint is a command key (docker.command_keys): H8 owns it, not the H1 catch-all.
	_ids(_with(_cfg("entrypoint"), ["/bin/sh", "-c"])) == {"H8"}
}

test_h8_missing_sandbox_times_deny_h8_and_input if {
	_ids(_without("/sandbox/created_at")) == {"INPUT", "H8"}
}

# H9 ----------------------------------------------------------------------------------------

test_h9_job_id_without_prefix_denies if {
	_ids(_with("/job/ID", "other-k7x2m9p4q8r5t1v6")) == {"H9"}
}

test_h9_job_id_messages if {
	d := _decision(_with("/job/ID", "other-k7x2m9p4q8r5t1v6"))
	{"rule": "H9", "msg": "job ID must start with sandgate-sbx-"} in d.violations
	{"rule": "H9", "msg": "job ID other-k7x2m9p4q8r5t1v6 must be sandgate-sbx-k7x2m9p4q8r5t1v6"} in d.violations
	{"rule": "H9", "msg": "job Name must equal job ID"} in d.violations
}

test_h9_job_id_of_another_sandbox_denies if {
	_ids(json.patch(_base, [
		{"op": "replace", "path": "/job/ID", "value": "sandgate-sbx-othersandbox1"},
		{"op": "replace", "path": "/job/Name", "value": "sandgate-sbx-othersandbox1"},
	])) == {"H9"}
}

test_h9_name_differs_from_id_denies if {
	_ids(_with("/job/Name", "sandgate-sbx-othersandbox1")) == {"H9"}
	_ids(_without("/job/Name")) == {"H9"}
}

test_h9_missing_job_id_denies if {
	_ids(_without("/job/ID")) == {"H9"}
}

test_h9_sandbox_id_pattern_denies if {
	inp := json.patch(_base, [
		{"op": "replace", "path": "/sandbox/id", "value": "K7X.2"},
		{"op": "replace", "path": "/job/ID", "value": "sandgate-sbx-K7X.2"},
		{"op": "replace", "path": "/job/Name", "value": "sandgate-sbx-K7X.2"},
		{"op": "replace", "path": "/job/Meta/sandgate.sandbox_id", "value": "K7X.2"},
	])
	_ids(inp) == {"H9"}
}

test_h9_meta_sandbox_id_mismatch_denies if {
	_ids(_with("/job/Meta/sandgate.sandbox_id", "othersandbox1")) == {"H9"}
	_ids(_with("/job/Meta", null)) == {"H9"}
}

_labels_form_msg := {"rule": "H9", "msg": "docker config labels must be a list of exactly one map of strings"}

test_h9_labels_absent_null_or_with_other_keys_are_allowed if {
	_ids(_without(_cfg("labels"))) == set()
	_ids(_with(_cfg("labels"), null)) == set()
	_ids(_with(_cfg("labels/0/team"), "ci")) == set()
}

# The docker driver registers an object and then fails the task at start ("list of map of
# string required").
test_h9_labels_object_form_denies if {
	d := _decision(_with(_cfg("labels"), {"sandgate.sandbox_id": _sandbox_id}))
	d.violations == {_labels_form_msg}
	_ids(_with(_cfg("labels"), {"sandgate.sandbox_id": _sandbox_id})) == {"H9"}
}

# Nomad merges the maps of a longer list.
test_h9_labels_several_maps_deny if {
	d := _decision(_with(_cfg("labels/-"), {"sandgate.sandbox_id": "othersandbox1"}))
	d.violations == {_labels_form_msg}
	_ids(_with(_cfg("labels/-"), {"sandgate.sandbox_id": "othersandbox1"})) == {"H9"}
}

test_h9_labels_other_shapes_deny if {
	every labels in [[], {}, "", [[]], ["sandgate.sandbox_id=x"], [{"sandgate.sandbox_id": 1}]] {
		_decision(_with(_cfg("labels"), labels)).violations == {_labels_form_msg}
		_ids(_with(_cfg("labels"), labels)) == {"H9"}
	}
}

test_h8_missing_ceiling_in_data_denies if {
	ids := _ids(_base) with data.sandgate.config as _data_without("lifetime/ceiling_seconds")
	ids == {"H8"}
}

test_h9_missing_prefix_or_pattern_in_data_deny if {
	ids := _ids(_base) with data.sandgate.config as _data_without("prefix")
	ids == {"H9"}
	pattern := _ids(_base) with data.sandgate.config as _data_without("sandbox_id_pattern")
	pattern == {"H9"}
}
