package sandgate.admission_test

import future.keywords.not

# P1 ----------------------------------------------------------------------------------------

test_p1_node_pin_removed_denies if {
	_ids(_without("/job/Constraints/2")) == {"P1"}
}

test_p1_node_pin_to_other_node_denies if {
	_ids(_with("/job/Constraints/2/RTarget", "w2")) == {"P1"}
}

test_p1_node_pin_with_other_operand_denies if {
	_ids(_with("/job/Constraints/2/Operand", "!=")) == {"P1"}
}

test_p1_second_node_pin_denies if {
	_ids(_with("/job/Constraints/-", {"LTarget": "${node.unique.name}", "RTarget": "w2", "Operand": "="})) == {"P1"}
}

test_p1_duplicate_node_pin_denies if {
	_ids(_with("/job/Constraints/-", {"LTarget": "${node.unique.name}", "RTarget": "w1", "Operand": "="})) == {"P1"}
}

test_p1_pin_in_task_group_to_other_node_denies if {
	_ids(_with(_group("Constraints"), [{"LTarget": "${node.unique.name}", "RTarget": "w2", "Operand": "="}])) == {"P1"}
}

test_p1_no_constraints_at_all_denies if {
	_ids(_with("/job/Constraints", null)) == {"P1"}
}

test_p1_arch_constraint_other_than_the_node_denies if {
	_ids(_with("/job/Constraints/1/RTarget", _other_arch)) == {"P1"}
}

test_p1_kernel_constraint_windows_denies if {
	_ids(_with("/job/Constraints/0/RTarget", "windows")) == {"P1"}
}

test_p1_arch_constraint_with_regexp_operand_denies if {
	_ids(_with("/job/Constraints/1/Operand", "regexp")) == {"P1"}
}

test_p1_missing_kernel_constraint_denies if {
	_ids(_without("/job/Constraints/0")) == {"P1"}
}

test_p1_extra_conflicting_arch_constraint_in_task_denies if {
	_ids(_with(_task("Constraints"), [{"LTarget": "${attr.cpu.arch}", "RTarget": _other_arch, "Operand": "="}])) == {"P1"}
}

test_p1_node_arch_not_allowed_denies if {
	inp := json.patch(_base, [
		{"op": "replace", "path": "/node/attributes/cpu.arch", "value": _other_arch},
		{"op": "replace", "path": "/job/Constraints/1/RTarget", "value": _other_arch},
	])
	_ids(inp) == {"P1"}
}

test_p1_node_without_attributes_denies if {
	_ids(_without("/node/attributes")) == {"P1"}
}

test_p1_unenrolled_node_denies if {
	_ids(_with("/node/enrollment", "none")) == {"P1"}
	_ids(_without("/node/enrollment")) == {"P1"}
}

test_p1_unenrolled_node_denies_egress_as_p1_only if {
	_ids(_with_on(_egress, "/node/enrollment", "none")) == {"P1"}
}

test_p1_message_names_the_node if {
	d := _decision(_with("/job/Constraints/2/RTarget", "w2"))
	d.violations == {{"rule": "P1", "msg": "node pin ${node.unique.name} = w2 does not select node w1"}}
}

# P2 ----------------------------------------------------------------------------------------

test_p2_control_plane_verdict_denies if {
	_ids(_with("/node/control_plane", true)) == {"P2"}
}

test_p2_missing_control_plane_verdict_denies if {
	_ids(_without("/node/control_plane")) == {"P2"}
}

test_p2_node_role_server_meta_denies if {
	_ids(_with("/node/meta", {"node-role": "server"})) == {"P2"}
}

test_p2_control_plane_meta_any_case_denies if {
	_ids(_with("/node/meta", {"node-role": " Control-Plane"})) == {"P2"}
	_ids(_with("/node/meta", {"sandgate.control_plane": "true"})) == {"P2"}
}

test_p2_unrelated_meta_is_allowed if {
	_ids(_with("/node/meta", {"node-role": "worker", "rack": "r1"})) == set()
	_ids(_with("/node/meta", null)) == set()
}

test_p2_listed_node_name_denies if {
	ids := _ids(_base) with data.sandgate.config.placement.control_plane.node_names as ["w1"]
	ids == {"P2"}
}

test_p2_listed_hostname_denies if {
	other := _ids(_base) with data.sandgate.config.placement.control_plane.node_names as ["ctl-1"]
	other == set()
	ids := _ids(_with("/node/attributes/unique.hostname", "ctl-1")) with data.sandgate.config.placement.control_plane.node_names as ["ctl-1"]
	ids == {"P2"}
}

# P3 ----------------------------------------------------------------------------------------

test_p3_node_down_denies if {
	_ids(_with("/node/status", "down")) == {"P3"}
}

test_p3_node_ineligible_denies if {
	_ids(_with("/node/eligibility", "ineligible")) == {"P3"}
}

test_p3_node_draining_denies if {
	_ids(_with("/node/drain", true)) == {"P3"}
	_ids(_without("/node/drain")) == {"P3"}
}

test_p3_operator_state_frozen_denies if {
	_ids(_with("/node/operator_state", "frozen")) == {"P3"}
}

test_p3_operator_state_draining_denies if {
	_ids(_with("/node/operator_state", "draining")) == {"P3"}
}

test_p3_operator_state_reserved_or_missing_denies if {
	_ids(_with("/node/operator_state", "reserved")) == {"P3"}
	_ids(_without("/node/operator_state")) == {"P3"}
}

test_p3_memory_percent_90_denies if {
	_ids(_with("/node/usage/memory_percent", 90)) == {"P3"}
}

test_p3_memory_percent_at_threshold_denies if {
	_ids(_with("/node/usage/memory_percent", 85)) == {"P3"}
	_ids(_with("/node/usage/memory_percent", 84.9)) == set()
}

test_p3_disk_percent_at_threshold_denies if {
	_ids(_with("/node/usage/disk_percent", 85)) == {"P3"}
}

test_p3_unknown_usage_denies if {
	_ids(_without("/node/usage")) == {"P3"}
	_ids(_with("/node/usage/disk_percent", "22")) == {"P3"}
}

test_p3_message_names_the_state if {
	d := _decision(_with("/node/operator_state", "frozen"))
	d.violations == {{"rule": "P3", "msg": "node operator_state is frozen, must be active"}}
}

# I5 ----------------------------------------------------------------------------------------

test_i5_egress_on_sandbox_enrolled_node_denies if {
	_ids(_with_on(_egress, "/node/enrollment", "sandbox")) == {"I5"}
	_ids(_with_on(_workspace_egress, "/node/enrollment", "sandbox")) == {"I5"}
}

test_i5_egress_network_listing_plain_enrollment_still_needs_egress_enrollment if {
	inp := _with_on(_egress, "/node/enrollment", "sandbox")
	ids := _ids(inp) with data.sandgate.config.networks.egress.enrollment as ["sandbox", "sandbox+egress"]
	ids == {"I5"}
}

test_p1_node_of_an_unvetted_platform_is_one_message if {
	inp := json.patch(_base, [
		{"op": "replace", "path": "/node/attributes/cpu.arch", "value": _other_arch},
		{"op": "replace", "path": "/job/Constraints/1/RTarget", "value": _other_arch},
	])
	d := _decision(inp)
	d.violations == {{"rule": "P1", "msg": sprintf("node attribute cpu.arch is not one of %v", [_data.placement.allowed_architectures])}}
}

test_p1_missing_enrollments_in_data_deny if {
	ids := _ids(_base) with data.sandgate.config as _data_without("placement/enrollments")
	ids == {"P1"}
}

# One node, one cause: every indicator it shows is named in one P2 message.
test_p2_every_indicator_in_one_message if {
	inp := json.patch(_base, [
		{"op": "replace", "path": "/node/control_plane", "value": true},
		{"op": "replace", "path": "/node/meta", "value": {"sandgate.control_plane": "true", "node-role": "server"}},
	])
	d := _decision(inp)
	d.violations == {{"rule": "P2", "msg": concat("; ", [
		"node is (or may be) a control-plane node: control_plane must be false",
		"node meta node-role=server marks a control-plane node",
		"node meta sandgate.control_plane=true marks a control-plane node",
	])}}
}

test_p2_single_indicator_keeps_its_message if {
	d := _decision(_with("/node/control_plane", true))
	d.violations == {{"rule": "P2", "msg": "node is (or may be) a control-plane node: control_plane must be false"}}
}

test_p2_missing_node_facts_deny if {
	d := _decision(_without("/node"))
	{"rule": "P2", "msg": "node facts are missing: it may be a control-plane node"} in d.violations
}

test_p3_missing_threshold_in_data_denies if {
	ids := _ids(_base) with data.sandgate.config as _data_without("thresholds/refuse_create_memory_percent")
	ids == {"P3"}
	d := _decision(_base) with data.sandgate.config as _data_without("thresholds")
	d.violations == {
		{"rule": "P3", "msg": "node memory_percent 41.5 must be a number below null"},
		{"rule": "P3", "msg": "node disk_percent 22 must be a number below null"},
	}
}

test_i5_egress_needs_the_egress_enrollment_from_data if {
	ids := _ids(_egress) with data.sandgate.config as _data_without("placement/egress_enrollment")
	ids == {"I5"}
}
