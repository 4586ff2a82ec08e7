package sandgate.admission_test

import future.keywords.not

# H1 ----------------------------------------------------------------------------------------

test_h1_privileged_true_denies if {
	_ids(_with(_cfg("privileged"), true)) == {"H1"}
	_ids(_with_on(_workspace_egress, _cfg("privileged"), true)) == {"H1"}
}

test_h1_privileged_absent_or_not_false_denies if {
	_ids(_without(_cfg("privileged"))) == {"H1"}
	_ids(_with(_cfg("privileged"), "false")) == {"H1"}
}

test_h1_cap_add_sys_admin_denies if {
	_ids(_with(_cfg("cap_add"), ["SYS_ADMIN"])) == {"H1"}
	_ids(_with_on(_workspace, _cfg("cap_add"), array.concat(_workspace_caps, ["SYS_ADMIN"]))) == {"H1"}
}

test_h1_cap_add_chown_on_strict_denies if {
	_ids(_with(_cfg("cap_add"), ["CHOWN"])) == {"H1"}
}

test_h1_cap_add_subset_on_workspace_is_allowed if {
	_ids(_with_on(_workspace, _cfg("cap_add"), ["CHOWN"])) == set()
}

test_h1_cap_add_not_a_list_denies if {
	_ids(_with(_cfg("cap_add"), "SYS_ADMIN")) == {"H1"}
}

test_h1_cap_drop_empty_denies if {
	_ids(_with(_cfg("cap_drop"), [])) == {"H1"}
}

test_h1_cap_drop_net_raw_only_denies if {
	_ids(_with(_cfg("cap_drop"), ["NET_RAW"])) == {"H1"}
	_ids(_without(_cfg("cap_drop"))) == {"H1"}
}

test_h1_driver_raw_exec_denies if {
	_ids(_with(_task("Driver"), "raw_exec")) == {"H1"}
}

test_h1_two_task_groups_deny if {
	d := _decision(_with("/job/TaskGroups/-", _base_group))
	d.allow == false
	{"rule": "H1", "msg": "job must have exactly one task group"} in d.violations
}

test_h1_no_task_groups_deny if {
	"H1" in _ids(_with("/job/TaskGroups", []))
	"H1" in _ids(_without("/job/TaskGroups"))
}

test_h1_group_count_two_denies if {
	_ids(_with(_group("Count"), 2)) == {"H1"}
}

test_h1_second_task_denies if {
	d := _decision(_with(_group("Tasks/-"), _base_task))
	{"rule": "H1", "msg": "task group must have exactly one task"} in d.violations
}

test_h1_group_and_task_names_deny if {
	_ids(_with(_group("Name"), "other")) == {"H1"}
	_ids(_with(_task("Name"), "other")) == {"H1"}
}

test_h1_config_not_an_object_denies if {
	d := _decision(_with(_task("Config"), "privileged"))
	{"rule": "H1", "msg": "task Config must be an object"} in d.violations
}

test_h1_job_type_service_denies if {
	_ids(_with("/job/Type", "service")) == {"H1"}
	_ids(_without("/job/Type")) == {"H1"}
}

test_h1_periodic_parameterized_multiregion_deny if {
	_ids(_with("/job/Periodic", {"Enabled": true, "Spec": "* * * * *"})) == {"H1"}
	_ids(_with("/job/ParameterizedJob", {"Payload": "optional"})) == {"H1"}
	_ids(_with("/job/Multiregion", {"Regions": [{"Name": "eu"}]})) == {"H1"}
}

test_h1_lifecycle_hook_denies if {
	_ids(_with(_task("Lifecycle"), {"Hook": "prestart", "Sidecar": true})) == {"H1"}
}

test_h1_unknown_docker_keys_deny if {
	d := _decision(_with(_cfg("shm_size"), 1073741824))
	d.violations == {{"rule": "H1", "msg": "docker config keys [\"shm_size\"] are not allowed"}}
	_ids(_with(_cfg("memory_hard_limit"), 8192)) == {"H1"}
}

# H2 ----------------------------------------------------------------------------------------

test_h2_security_opt_empty_denies if {
	_ids(_with(_cfg("security_opt"), [])) == {"H2"}
}

test_h2_security_opt_missing_or_not_a_list_denies if {
	_ids(_without(_cfg("security_opt"))) == {"H2"}
	_ids(_with(_cfg("security_opt"), "no-new-privileges")) == {"H2"}
}

test_h2_security_opt_false_spelling_denies if {
	_ids(_with(_cfg("security_opt"), ["no-new-privileges", "no-new-privileges=0"])) == {"H2"}
	_ids(_with(_cfg("security_opt"), [true])) == {"H2"}
}

test_h2_security_opt_disabled_denies_h2_and_h10 if {
	_ids(_with(_cfg("security_opt"), ["no-new-privileges:false"])) == {"H2", "H10"}
}

# H3 ----------------------------------------------------------------------------------------

test_h3_pids_limit_removed_denies if {
	_ids(_without(_cfg("pids_limit"))) == {"H3"}
}

test_h3_pids_limit_out_of_range_denies if {
	_ids(_with(_cfg("pids_limit"), 0)) == {"H3"}
	_ids(_with(_cfg("pids_limit"), -1)) == {"H3"}
	_ids(_with(_cfg("pids_limit"), 1025)) == {"H3"}
	_ids(_with(_cfg("pids_limit"), "256")) == {"H3"}
}

test_h3_pids_limit_at_max_is_allowed if {
	_ids(_with(_cfg("pids_limit"), 1024)) == set()
}

test_h3_memory_max_above_memory_denies if {
	_ids(_with(_task("Resources/MemoryMaxMB"), 513)) == {"H3"}
}

test_h3_memory_max_equal_or_zero_is_allowed if {
	_ids(_with(_task("Resources/MemoryMaxMB"), 512)) == set()
	_ids(_with(_task("Resources/MemoryMaxMB"), 0)) == set()
}

test_h3_ulimit_missing_denies if {
	_ids(_without(_cfg("ulimit"))) == {"H3"}
	_ids(_with(_cfg("ulimit"), null)) == {"H3"}
	_ids(_without(_cfg("ulimit/0/nproc"))) == {"H3"}
}

test_h3_ulimit_hard_above_max_denies if {
	_ids(_with(_cfg("ulimit/0/nofile"), "1024:65536")) == {"H3"}
	_ids(_with(_cfg("ulimit/0/nproc"), "1025")) == {"H3"}
}

test_h3_ulimit_malformed_denies if {
	_ids(_with(_cfg("ulimit/0/nofile"), "-1")) == {"H3"}
	_ids(_with(_cfg("ulimit/0/nofile"), 1024)) == {"H3"}
	_ids(_with(_cfg("ulimit/0/nofile"), "2048:1024")) == {"H3"}
}

test_h3_ulimit_single_value_within_max_is_allowed if {
	_ids(_with(_cfg("ulimit/0/nofile"), "4096")) == set()
}

test_h3_ulimit_list_of_one_map_with_soft_below_hard_is_allowed if {
	_ids(_with(_cfg("ulimit"), [{"nofile": "512:1024", "nproc": "256:512"}])) == set()
}

test_h3_other_ulimit_denies if {
	d := _decision(_with(_cfg("ulimit/0/rtprio"), "99:99"))
	d.violations == {{"rule": "H3", "msg": "docker config ulimit keys [\"rtprio\"] are not allowed"}}
}

_ulimit_form_msg := {"rule": "H3", "msg": "docker config ulimit must be a list of exactly one map of strings"}

# The docker driver registers an object and then fails the task at start ("list of map of
# string required").
test_h3_ulimit_object_form_denies if {
	d := _decision(_with(_cfg("ulimit"), {"nofile": "1024:1024", "nproc": "512:512"}))
	d.violations == {_ulimit_form_msg}
	_ids(_with(_cfg("ulimit"), {"nofile": "1024:1024", "nproc": "512:512"})) == {"H3"}
}

# Nomad merges the maps of a longer list: one map is what H3 checked.
test_h3_ulimit_several_maps_denies if {
	two := [{"nofile": "1024:1024"}, {"nproc": "512:512"}]
	d := _decision(_with(_cfg("ulimit"), two))
	d.violations == {_ulimit_form_msg}
	_ids(_with(_cfg("ulimit"), two)) == {"H3"}
	_ids(_with(_cfg("ulimit/-"), {"nofile": "1048576:1048576"})) == {"H3"}
}

test_h3_ulimit_other_shapes_deny if {
	every ulimit in [[], [[]], ["nofile=1024"], "nofile=1024:1024", [{"nofile": 1024, "nproc": "512:512"}]] {
		_decision(_with(_cfg("ulimit"), ulimit)).violations == {_ulimit_form_msg}
		_ids(_with(_cfg("ulimit"), ulimit)) == {"H3"}
	}
}

test_h3_init_ipc_cpu_hard_limit_deny if {
	_ids(_with(_cfg("init"), false)) == {"H3"}
	_ids(_without(_cfg("init"))) == {"H3"}
	_ids(_with(_cfg("ipc_mode"), "host")) == {"H3"}
	_ids(_with(_cfg("ipc_mode"), "shareable")) == {"H3"}
	_ids(_with(_cfg("cpu_hard_limit"), false)) == {"H3"}
}

# H10 ---------------------------------------------------------------------------------------

test_h10_seccomp_unconfined_denies if {
	_ids(_with(_cfg("security_opt"), ["no-new-privileges", "seccomp=unconfined"])) == {"H10"}
}

test_h10_other_confinement_overrides_deny if {
	_ids(_with(_cfg("security_opt"), ["no-new-privileges", "apparmor=unconfined"])) == {"H10"}
	_ids(_with(_cfg("security_opt"), ["no-new-privileges", "systempaths=unconfined"])) == {"H10"}
	_ids(_with(_cfg("security_opt"), ["no-new-privileges", "label=disable"])) == {"H10"}
	_ids(_with(_cfg("security_opt"), ["no-new-privileges", "seccomp:unconfined"])) == {"H10"}
}

test_h2_unknown_spelling_of_a_forbidden_option_denies if {
	# Docker's option names are case-sensitive: it rejects this one, and so does H2.
	_ids(_with(_cfg("security_opt"), ["no-new-privileges", "SECCOMP=unconfined"])) == {"H2"}
}

test_h10_runtime_kata_denies if {
	_ids(_with(_cfg("runtime"), "kata-runtime")) == {"H10"}
}

test_h10_runtime_missing_denies if {
	_ids(_without(_cfg("runtime"))) == {"H10"}
}

test_h10_runsc_is_allowed if {
	_ids(_with(_cfg("runtime"), "runsc")) == set()
	_ids(_with_on(_egress, _cfg("runtime"), "runsc")) == set()
}

test_h10_egress_requires_egress_runtime if {
	ids := _ids(_egress) with data.sandgate.config.runtimes.egress_allowed as ["runsc"]
	ids == {"H10"}
	none := _ids(_base) with data.sandgate.config.runtimes.egress_allowed as ["runsc"]
	none == set()
}

# H11 ---------------------------------------------------------------------------------------

test_h11_image_not_allowlisted_denies if {
	_ids(_with(_cfg("image"), "evil:latest")) == {"H11"}
	_ids(_with(_cfg("image"), concat("", [_image, "@sha256:0000"]))) == {"H11"}
}

test_h11_image_missing_denies if {
	_ids(_without(_cfg("image"))) == {"H11"}
}

test_h11_every_allowlisted_image_is_allowed if {
	count(_data.images.allowed) > 0 # not vacuous, whatever the deployment allows
	every image in _data.images.allowed {
		_ids(_with(_cfg("image"), image)) == set()
	}
}

# The other rules read the first group and its first task: a second one is refused by H1
# alone, whatever it holds.
test_h1_a_second_group_or_task_is_one_cause if {
	privileged := json.patch(_base_group, [{"op": "replace", "path": "/Tasks/0/Config/privileged", "value": true}])
	d := _decision(_with("/job/TaskGroups/-", privileged))
	d.violations == {{"rule": "H1", "msg": "job must have exactly one task group"}}
	_decision(_with(_group("Tasks/-"), _base_task)).violations == {{"rule": "H1", "msg": "task group must have exactly one task"}}
}

test_h1_fixed_fields_are_named if {
	d := _decision(json.patch(_base, [
		{"op": "replace", "path": "/job/Periodic", "value": {"Enabled": true}},
		{"op": "replace", "path": _group("Count"), "value": 3},
		{"op": "replace", "path": _task("Lifecycle"), "value": {"Hook": "prestart"}},
	]))
	d.violations == {
		{"rule": "H1", "msg": "job Periodic must not be set"},
		{"rule": "H1", "msg": "task group Count must be 1"},
		{"rule": "H1", "msg": "task Lifecycle must not be set"},
	}
}

test_h1_missing_key_lists_in_data_refuse_every_key if {
	ids := _ids(_with(_cfg("volumes"), ["/:/host"])) with data.sandgate.config as _data_without("docker/host_access_keys")
	ids == {"H1", "H5"}
	d := _decision(_base) with data.sandgate.config as _data_without("docker/allowed_config_keys")
	count(d.violations) == 1
	some v in d.violations
	v.rule == "H1"
	startswith(v.msg, "docker config keys [\"args\", \"cap_drop\",")
}

test_h1_missing_job_settings_in_data_deny if {
	d := _decision(_base) with data.sandgate.config as _data_without("job")
	d.violations == {
		{"rule": "H1", "msg": "task Driver must be null"},
		{"rule": "H1", "msg": "task group Name must be null"},
		{"rule": "H1", "msg": "task Name must be null"},
		{"rule": "H1", "msg": "job Type batch is not one of null"},
	}
}

test_h2_missing_required_list_in_data_denies if {
	ids := _ids(_base) with data.sandgate.config as _data_without("docker/required_security_opt")
	ids == {"H2"}
}

test_h3_missing_limits_in_data_deny if {
	ids := _ids(_base) with data.sandgate.config as _data_without("docker/pids_limit_max")
	ids == {"H3"}
	d := _decision(_base) with data.sandgate.config as _data_without("docker/ulimit_max")
	d.violations == {{"rule": "H3", "msg": "docker config ulimit keys [\"nofile\", \"nproc\"] are not allowed"}}
}

test_h11_missing_allowlist_in_data_denies if {
	ids := _ids(_base) with data.sandgate.config as _data_without("images/allowed")
	ids == {"H11"}
}

test_h10_forbidden_security_opt_prefixes_missing_from_data_denies if {
	_ids(_base) == {"H10"} with data.sandgate.config as _data_without("docker/forbidden_security_opt_prefixes")
}
