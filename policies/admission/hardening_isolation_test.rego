package sandgate.admission_test

import future.keywords.not

# H4 ----------------------------------------------------------------------------------------

test_h4_identity_env_true_denies if {
	_ids(_with(_task("Identity/Env"), true)) == {"H4"}
}

test_h4_identity_file_true_denies if {
	_ids(_with(_task("Identity/File"), true)) == {"H4"}
}

test_h4_identity_missing_denies if {
	_ids(_with(_task("Identity"), null)) == {"H4"}
	_ids(_without(_task("Identity"))) == {"H4"}
}

test_h4_vault_denies if {
	_ids(_with(_task("Vault"), {"Policies": ["x"]})) == {"H4"}
}

test_h4_templates_deny if {
	_ids(_with(_task("Templates"), [{"EmbeddedTmpl": "x", "DestPath": "local/x"}])) == {"H4"}
}

test_h4_other_task_blocks_deny if {
	_ids(_with(_task("Identities"), [{"Name": "vault_default", "Audience": ["vault.io"]}])) == {"H4"}
	_ids(_with(_task("Consul"), {"Namespace": "default"})) == {"H4"}
	_ids(_with(_task("Artifacts"), [{"GetterSource": "https://example.com/x"}])) == {"H4"}
	_ids(_with(_task("Secrets"), [{"Name": "s", "Provider": "vault"}])) == {"H4"}
}

test_h4_group_consul_denies if {
	_ids(_with(_group("Consul"), {"Namespace": "default"})) == {"H4"}
}

test_h4_job_namespaces_deny if {
	_ids(_with("/job/ConsulNamespace", "prod")) == {"H4"}
	_ids(_with("/job/VaultNamespace", "prod")) == {"H4"}
	_ids(_with("/job/VaultNamespace", "")) == set()
}

test_h4_message_names_the_block if {
	d := _decision(_with(_task("Vault"), {"Policies": ["x"]}))
	d.violations == {{"rule": "H4", "msg": "task Vault must not be set"}}
}

# H5 ----------------------------------------------------------------------------------------

test_h5_docker_volumes_deny if {
	_ids(_with(_cfg("volumes"), ["/etc:/host-etc"])) == {"H5"}
}

test_h5_other_host_access_keys_deny if {
	_ids(_with(_cfg("devices"), [{"host_path": "/dev/kvm"}])) == {"H5"}
	_ids(_with(_cfg("pid_mode"), "host")) == {"H5"}
	_ids(_with(_cfg("userns_mode"), "host")) == {"H5"}
	_ids(_with(_cfg("sysctl"), {"net.ipv4.ip_forward": "1"})) == {"H5"}
	_ids(_with(_cfg("volumes"), [])) == {"H5"}
}

test_h5_docker_socket_bind_mount_denies if {
	sock := {"type": "bind", "source": "/var/run/docker.sock", "target": "/var/run/docker.sock"}
	_ids(_with(_cfg("mount/-"), sock)) == {"H5"}
}

test_h5_docker_socket_message if {
	sock := {"type": "bind", "source": "/var/run/docker.sock", "target": "/var/run/docker.sock"}
	d := _decision(_with(_cfg("mount/-"), sock))
	{"rule": "H5", "msg": "mount 2 refers to the Docker socket"} in d.violations
	{"rule": "H5", "msg": "mount 2 must be of type tmpfs, got bind"} in d.violations
}

test_h5_volume_mount_at_work_area_denies if {
	_ids(_with(_cfg("mount/0/type"), "volume")) == {"H5"}
}

test_h5_tmpfs_with_source_denies if {
	_ids(_with(_cfg("mount/1/source"), "/srv")) == {"H5"}
}

test_h5_tmpfs_at_other_target_denies if {
	extra := {"type": "tmpfs", "target": "/run", "readonly": false, "tmpfs_options": {"size": 1048576}}
	_ids(_with(_cfg("mount/-"), extra)) == {"H5"}
}

test_h5_mount_not_a_list_or_not_objects_denies if {
	ids := _ids(_with(_cfg("mount"), {"type": "tmpfs", "target": "/workspace"}))
	ids == {"H5", "H6"}
	_ids(_with(_cfg("mount/-"), "/var/run/docker.sock:/var/run/docker.sock")) == {"H5"}
}

test_h5_nomad_volumes_and_devices_deny if {
	_ids(_with(_task("VolumeMounts"), [{"Volume": "data", "Destination": "/data"}])) == {"H5"}
	_ids(_with(_group("Volumes"), {"data": {"Type": "host", "Source": "data"}})) == {"H5"}
	_ids(_with(_task("Resources/Devices"), [{"Name": "nvidia/gpu"}])) == {"H5"}
}

test_h5_nomad_host_disk_mounts_without_a_quota_deny if {
	# The input is built first: its EphemeralDisk reads the quota from data.
	inp := _base
	_ids(inp) == {"H5"} with data.sandgate.config.docker.task_dirs.quota_mb as 0
	_ids(inp) == {"H5"} with data.sandgate.config.docker.task_dirs.quota_mb as "64"
	_ids(inp) == {"H5"} with data.sandgate.config.docker.task_dirs.quota_mb as null
}

test_h5_nomad_host_disk_mounts_message_names_them if {
	inp := _base
	d := _decision(inp) with data.sandgate.config.docker.task_dirs.quota_mb as 0
	d.violations == {{"rule": "H5", "msg": `Nomad mounts ["/alloc", "/local"] from the node's disk into the task and docker.task_dirs.quota_mb is not a positive number: nothing would bound them`}}
}

test_h5_nomad_tmpfs_mounts_alone_need_no_quota if {
	tmpfs_only := [m | some m in _nomad_mounts; m.host_disk == false]
	inp := json.patch(_base, [
		{"op": "replace", "path": "/nomad_mounts", "value": tmpfs_only},
		{"op": "replace", "path": _group("EphemeralDisk"), "value": null},
	])
	_ids(inp) == set() with data.sandgate.config.docker.task_dirs.quota_mb as 0
}

test_h5_ephemeral_disk_must_declare_the_quota if {
	quota := data.sandgate.config.docker.task_dirs.quota_mb
	_ids(_with(_group("EphemeralDisk/SizeMB"), quota + 1)) == {"H5"}
	_ids(_with(_group("EphemeralDisk/SizeMB"), quota - 1)) == {"H5"}
	_ids(_with(_group("EphemeralDisk/Sticky"), true)) == {"H5"}
	_ids(_with(_group("EphemeralDisk/Migrate"), true)) == {"H5"}
	_ids(_with(_group("EphemeralDisk"), null)) == {"H5"}
	_ids(_without(_group("EphemeralDisk"))) == {"H5"}
}

test_h5_ephemeral_disk_message if {
	quota := data.sandgate.config.docker.task_dirs.quota_mb
	d := _decision(_with(_group("EphemeralDisk/SizeMB"), 100000))
	d.violations == {{"rule": "H5", "msg": sprintf("task group EphemeralDisk must be {SizeMB: %v, Sticky: false, Migrate: false} (docker.task_dirs.quota_mb), got {\"Migrate\": false, \"SizeMB\": 100000, \"Sticky\": false}", [quota])}}
}

# H6 ----------------------------------------------------------------------------------------

test_h6_workspace_tmpfs_options_removed_denies if {
	_ids(_without(_cfg("mount/0/tmpfs_options"))) == {"H6"}
}

test_h6_tmpfs_size_zero_or_above_max_denies if {
	_ids(_with(_cfg("mount/0/tmpfs_options/size"), 0)) == {"H6"}
	_ids(_with(_cfg("mount/1/tmpfs_options/size"), 536870913)) == {"H6"}
	_ids(_with(_cfg("mount/1/tmpfs_options/size"), "64m")) == {"H6"}
}

test_h6_tmpfs_size_at_max_is_allowed if {
	_ids(_with(_cfg("mount/0/tmpfs_options/size"), 2147483648)) == set()
}

test_h6_missing_tmp_mount_denies if {
	d := _decision(_without(_cfg("mount/1")))
	d.violations == {{"rule": "H6", "msg": "tmpfs /tmp must be mounted exactly once, found 0"}}
}

test_h6_no_mounts_denies if {
	_ids(_without(_cfg("mount"))) == {"H6"}
}

test_h6_duplicate_work_area_denies if {
	dup := {"type": "tmpfs", "target": "/tmp", "readonly": false, "tmpfs_options": {"size": 1048576}}
	_ids(_with(_cfg("mount/-"), dup)) == {"H6"}
}

test_h6_readonly_rootfs_false_on_strict_denies if {
	_ids(_with(_cfg("readonly_rootfs"), false)) == {"H6"}
	_ids(_without(_cfg("readonly_rootfs"))) == {"H6"}
}

test_h6_workspace_rootfs_may_be_absent_or_read_only if {
	_ids(json.patch(_workspace, [{"op": "remove", "path": _cfg("readonly_rootfs")}])) == set()
	_ids(_with_on(_workspace, _cfg("readonly_rootfs"), true)) == set()
}

test_h6_workspace_rootfs_not_a_boolean_denies if {
	_ids(_with_on(_workspace, _cfg("readonly_rootfs"), "no")) == {"H6"}
}

# H7 ----------------------------------------------------------------------------------------

test_h7_group_services_deny if {
	_ids(_with(_group("Services"), [{"Name": "x"}])) == {"H7"}
}

test_h7_task_services_with_tags_deny if {
	_ids(_with(_task("Services"), [{"Name": "x", "Tags": ["a"]}])) == {"H7"}
}

test_h7_docker_ports_deny if {
	_ids(_with(_cfg("ports"), ["http"])) == {"H7"}
}

test_h7_other_network_keys_deny if {
	d := _decision(_with(_cfg("extra_hosts"), ["metadata:169.254.169.254"]))
	d.violations == {{"rule": "H7", "msg": "docker config keys [\"extra_hosts\"] are not allowed"}}
	_ids(_with(_cfg("dns_servers"), ["10.0.0.2"])) == {"H7"}
}

test_h7_network_mode_host_denies if {
	_ids(_with(_cfg("network_mode"), "host")) == {"H7"}
	_ids(_with_on(_egress, _cfg("network_mode"), "host")) == {"H7"}
}

test_h7_network_mode_other_modes_deny if {
	_ids(_with(_cfg("network_mode"), "bridge")) == {"H7"}
	_ids(_with(_cfg("network_mode"), "container:abc")) == {"H7"}
	_ids(_with(_cfg("network_mode"), "sandgate-egress")) == {"H7"}
	_ids(_without(_cfg("network_mode"))) == {"H7"}
}

test_h7_egress_sandbox_without_network_mode_none_denies if {
	_ids(_with_on(_egress, _cfg("network_mode"), "none")) == {"H7"}
}

test_h7_nomad_networks_deny if {
	_ids(_with(_group("Networks"), [{"Mode": "host"}])) == {"H7"}
	_ids(_with(_task("Resources/Networks"), [{"MBits": 10}])) == {"H7"}
}

test_h7_egress_with_its_resolvers_allowed if {
	_ids(_egress) == set()
}

test_h7_resolvers_on_a_network_without_any_deny if {
	_ids(_with(_cfg("dns_servers"), ["1.1.1.1", "9.9.9.9"])) == {"H7"}
	_ids(_with(_cfg("dns_search_domains"), ["corp"])) == {"H7"}
}

test_h7_egress_with_other_or_no_resolvers_denies if {
	_ids(_with_on(_egress, _cfg("dns_servers"), ["10.0.0.2"])) == {"H7"}
	_ids(_with_on(_egress, _cfg("dns_servers"), ["1.1.1.1"])) == {"H7"}
	_ids(_with_on(_egress, _cfg("dns_servers"), "1.1.1.1")) == {"H7"}
	_ids(json.patch(_egress, [{"op": "remove", "path": _cfg("dns_servers")}])) == {"H7"}
}

test_h4_fields_are_named if {
	d := _decision(json.patch(_base, [
		{"op": "replace", "path": _task("Identity/Env"), "value": true},
		{"op": "replace", "path": _group("Consul"), "value": {"Namespace": "x"}},
		{"op": "replace", "path": "/job/VaultNamespace", "value": "prod"},
	]))
	d.violations == {
		{"rule": "H4", "msg": "task Identity must set Env false and File false"},
		{"rule": "H4", "msg": "task group Consul must not be set"},
		{"rule": "H4", "msg": "job VaultNamespace must not be set"},
	}
}

test_h4_without_null_fields_is_allowed if {
	inp := json.patch(_base, [
		{"op": "remove", "path": _task("Vault")},
		{"op": "remove", "path": _group("Consul")},
		{"op": "remove", "path": "/job/ConsulNamespace"},
	])
	_ids(inp) == set()
}

# Each mount names its target; one without (or with another) is refused.
test_h5_mount_without_target_denies if {
	extra := {"type": "tmpfs", "readonly": false, "tmpfs_options": {"size": 1048576}}
	d := _decision(_with(_cfg("mount/-"), extra))
	d.violations == {{"rule": "H5", "msg": "mount 2 target null is not a tmpfs work area"}}
}

test_h5_h7_table_messages if {
	d := _decision(json.patch(_base, [
		{"op": "replace", "path": _task("Resources/Devices"), "value": [{"Name": "gpu"}]},
		{"op": "replace", "path": _task("Resources/Networks"), "value": [{"MBits": 1}]},
	]))
	d.violations == {
		{"rule": "H5", "msg": "task Resources.Devices must not be set"},
		{"rule": "H7", "msg": "task Resources.Networks must not be set"},
	}
}

test_h6_missing_area_cap_in_data_denies if {
	d := _decision(_base) with data.sandgate.config as _data_without("docker/tmpfs/~1tmp/max_mb")
	d.violations == {{"rule": "H6", "msg": "tmpfs /tmp must set tmpfs_options.size in [1, null] bytes"}}
}

test_h7_missing_network_keys_in_data_refuse_them_under_h1 if {
	ids := _ids(_with(_cfg("ports"), ["http"])) with data.sandgate.config as _data_without("docker/network_keys")
	ids == {"H1", "H7"}
}

# Policy data the checks read: a deny-list missing from data refuses, it never opens.

test_h5_host_access_keys_missing_from_data_denies if {
	_ids(_base) == {"H5"} with data.sandgate.config as _data_without("docker/host_access_keys")
}

test_h7_network_keys_missing_from_data_denies if {
	_ids(_base) == {"H7"} with data.sandgate.config as _data_without("docker/network_keys")
}

test_p2_control_plane_tables_missing_from_data_deny if {
	_ids(_base) == {"P2"} with data.sandgate.config.placement.control_plane.meta as null
	_ids(_base) == {"P2"} with data.sandgate.config.placement.control_plane.node_names as "w1"
	_ids(_base) == set() with data.sandgate.config.placement.control_plane.meta as {}
}
