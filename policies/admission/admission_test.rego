package sandgate.admission_test

import data.sandgate.admission
import future.keywords.not

# --- fixtures --------------------------------------------------------------------------
# One valid input: a strict sandbox without network on node w1, with the job exactly as the
# renderer marshals it (render/testdata/strict-none.golden). Every other test input is this
# one with a json.patch applied. The values an operator is expected to change (the allowed
# architectures and images) are read from the policy data, so that the tests hold for any
# data.json (the e2e suite runs the bundle with test/testdata/e2e-policy-data-patch.json).

_data := data.sandgate.config

# The node's architecture and the job's image: the first allowed architecture and the
# default image.
_arch := _data.placement.allowed_architectures[0]

_image := _data.images.default

# An architecture the policy data does not allow.
_other_arch := [a | some a in ["amd64", "arm64", "riscv64", "s390x", "ppc64le"]; not a in _data.placement.allowed_architectures][0]

_sandbox_id := "k7x2m9p4q8r5t1v6"

_job_id := "sandgate-sbx-k7x2m9p4q8r5t1v6"

_group_path := "/job/TaskGroups/0"

_task_path := "/job/TaskGroups/0/Tasks/0"

_cfg_path := "/job/TaskGroups/0/Tasks/0/Config"

_base_config := {
	"args": ["14400"],
	"cap_drop": ["ALL"],
	"command": "sleep",
	"cpu_hard_limit": true,
	"image": _image,
	"init": true,
	"ipc_mode": "private",
	"labels": [{"sandgate.sandbox_id": _sandbox_id}],
	"mount": [
		{"readonly": false, "target": "/workspace", "tmpfs_options": {"size": 268435456}, "type": "tmpfs"},
		{"readonly": false, "target": "/tmp", "tmpfs_options": {"size": 67108864}, "type": "tmpfs"},
	],
	"network_mode": "none",
	"pids_limit": 256,
	"privileged": false,
	"readonly_rootfs": true,
	"runtime": "runc",
	"security_opt": ["no-new-privileges"],
	"ulimit": [{"nofile": "1024:1024", "nproc": "512:512"}],
}

_base_task := {
	"Name": "sandbox",
	"Driver": "docker",
	"User": "",
	"Lifecycle": null,
	"Config": _base_config,
	"Constraints": null,
	"Affinities": null,
	"Env": null,
	"Services": null,
	"Resources": {
		"CPU": 500, "Cores": null, "MemoryMB": 512, "MemoryMaxMB": null, "DiskMB": null,
		"Networks": null, "Devices": null, "NUMA": null, "SecretsMB": null, "IOPS": null,
	},
	"RestartPolicy": null,
	"Meta": null,
	"KillTimeout": 5000000000,
	"LogConfig": {"MaxFiles": 2, "MaxFileSizeMB": 5, "Enabled": null, "Disabled": null},
	"Artifacts": null,
	"Vault": null,
	"Consul": null,
	"Templates": null,
	"DispatchPayload": null,
	"VolumeMounts": null,
	"Leader": false,
	"ShutdownDelay": 0,
	"KillSignal": "",
	"Kind": "",
	"ScalingPolicies": null,
	"Secrets": null,
	"Identity": {
		"Name": "", "Audience": null, "ChangeMode": "", "ChangeSignal": "", "Env": false,
		"File": false, "Filepath": "", "ServiceName": "", "TTL": 0, "ExtraClaims": null,
	},
	"Identities": null,
	"Actions": null,
	"Schedule": null,
}

_base_group := {
	"Name": "sandbox",
	"Count": 1,
	"Constraints": null,
	"Affinities": null,
	"Tasks": [_base_task],
	"Spreads": null,
	"Volumes": null,
	"RestartPolicy": {"Interval": null, "Attempts": 0, "Delay": null, "Mode": "fail", "RenderTemplates": null},
	"Disconnect": null,
	"ReschedulePolicy": {
		"Attempts": 0, "Interval": null, "Delay": null, "DelayFunction": null,
		"MaxDelay": null, "Unlimited": false,
	},
	"EphemeralDisk": {"Sticky": false, "SizeMB": _data.docker.task_dirs.quota_mb, "Migrate": false},
	"Update": null,
	"Migrate": null,
	"Networks": null,
	"Meta": null,
	"Services": null,
	"ShutdownDelay": null,
	"MaxRunDuration": null,
	"StopAfterClientDisconnect": null,
	"MaxClientDisconnect": null,
	"Scaling": null,
	"Consul": null,
	"PreventRescheduleOnLost": null,
}

_base_job := {
	"Region": null,
	"Namespace": "default",
	"ID": _job_id,
	"Name": _job_id,
	"Type": "batch",
	"Priority": 10,
	"AllAtOnce": null,
	"Datacenters": ["*"],
	"NodePool": "default",
	"Constraints": [
		{"LTarget": "${attr.kernel.name}", "RTarget": "linux", "Operand": "="},
		{"LTarget": "${attr.cpu.arch}", "RTarget": _arch, "Operand": "="},
		{"LTarget": "${node.unique.name}", "RTarget": "w1", "Operand": "="},
	],
	"Affinities": null,
	"TaskGroups": [_base_group],
	"Update": null,
	"Multiregion": null,
	"Spreads": null,
	"Periodic": null,
	"ParameterizedJob": null,
	"Reschedule": null,
	"Migrate": null,
	"Meta": {
		"sandgate.ceiling_at": "1764421200",
		"sandgate.network": "none",
		"sandgate.profile": "strict",
		"sandgate.sandbox_id": _sandbox_id,
	},
	"UI": null,
	"Stop": null,
	"ParentID": null,
	"Dispatched": false,
	"DispatchIdempotencyToken": null,
	"Payload": null,
	"ConsulNamespace": null,
	"VaultNamespace": null,
	"NomadTokenID": null,
	"Status": null,
	"StatusDescription": null,
	"Stable": null,
	"Version": null,
	"SubmitTime": null,
	"CreateIndex": null,
	"ModifyIndex": null,
	"JobModifyIndex": null,
	"VersionTag": null,
}

_base := {
	"now": 1764406800,
	"sandbox": {
		"id": _sandbox_id, "profile": "strict", "network": "none",
		"created_at": 1764406800, "ceiling_at": 1764421200, "principal": "agent:ci",
	},
	"job": _base_job,
	"node": {
		"id": "5f3c2a9e-0000-4000-8000-000000000001",
		"name": "w1",
		"status": "ready",
		"eligibility": "eligible",
		"drain": false,
		"attributes": {"kernel.name": "linux", "cpu.arch": _arch, "unique.hostname": "w1"},
		"meta": {},
		"control_plane": false,
		"operator_state": "active",
		"enrollment": "sandbox",
		"usage": {"memory_percent": 41.5, "disk_percent": 22.0},
		"capacity": {
			"allocatable": {"cpu_mhz": 10000, "memory_mb": 32768},
			"others": {"cpu_mhz": 1000, "memory_mb": 2048},
			"sandboxes": {"cpu_mhz": 1000, "memory_mb": 1024},
		},
	},
	"budget": {
		"limits": {"max_sandboxes": 10, "cpu_mhz": 8000, "memory_mb": 16384},
		"used": {"sandboxes": 3, "cpu_mhz": 1500, "memory_mb": 1536},
	},
	"principal": {"sub": "agent:ci", "role": "agent", "live_sandboxes": 1, "max_live_sandboxes": null},
	"nomad_mounts": _nomad_mounts,
}

# The mounts Nomad 1.6.5's docker driver adds to every task.
_nomad_mounts := [
	{"target": "/alloc", "host_disk": true, "noexec": false},
	{"target": "/local", "host_disk": true, "noexec": false},
	{"target": "/secrets", "host_disk": false, "noexec": true, "tmpfs_mb": 1},
]

_workspace_caps := ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETFCAP"]

_workspace_ops := [
	{"op": "replace", "path": "/sandbox/profile", "value": "workspace"},
	{"op": "replace", "path": "/job/Meta/sandgate.profile", "value": "workspace"},
	{"op": "add", "path": concat("/", [_cfg_path, "cap_add"]), "value": _workspace_caps},
	{"op": "replace", "path": concat("/", [_cfg_path, "readonly_rootfs"]), "value": false},
]

_egress_ops := [
	{"op": "replace", "path": "/sandbox/network", "value": "egress"},
	{"op": "replace", "path": "/job/Meta/sandgate.network", "value": "egress"},
	{"op": "replace", "path": concat("/", [_cfg_path, "network_mode"]), "value": "sandgate-egress"},
	{"op": "add", "path": concat("/", [_cfg_path, "dns_servers"]), "value": ["1.1.1.1", "9.9.9.9"]},
	{"op": "replace", "path": "/node/enrollment", "value": "sandbox+egress"},
]

_workspace := json.patch(_base, _workspace_ops)

_egress := json.patch(_base, _egress_ops)

_workspace_egress := json.patch(_base, array.concat(_workspace_ops, _egress_ops))

# --- helpers ---------------------------------------------------------------------------

# The set of rule ids that deny inp.
_ids(inp) := ids if {
	ids := {v.rule | some v in admission.decision.violations} with input as inp
}

# Policy data without one member (a JSON pointer into data.sandgate.config): tests replace
# the whole config with it, so that every read, of a member or of its parent, agrees.
_data_without(path) := json.remove(_data, [path])

_decision(inp) := d if {
	d := admission.decision with input as inp
}

# The base input with one value added or replaced, or one value removed.
_with(path, value) := json.patch(_base, [{"op": "add", "path": path, "value": value}])

_without(path) := json.patch(_base, [{"op": "remove", "path": path}])

# The same on another valid input.
_with_on(inp, path, value) := json.patch(inp, [{"op": "add", "path": path, "value": value}])

_cfg(key) := concat("/", [_cfg_path, key])

_task(key) := concat("/", [_task_path, key])

_group(key) := concat("/", [_group_path, key])

# Drops every null member (the input a hand-built ast.Value would carry instead of Go's
# marshalled nulls). The fixtures hold no null inside an array.
_drop_nulls(x) := json.remove(x, [path | walk(x, [path, v]); v == null])

# --- allow -----------------------------------------------------------------------------

test_strict_none_is_allowed if {
	_decision(_base) == {"allow": true, "violations": set(), "warnings": set(), "dryrun": set()}
}

test_workspace_none_is_allowed if {
	_decision(_workspace) == {"allow": true, "violations": set(), "warnings": set(), "dryrun": set()}
}

test_strict_egress_on_egress_node_is_allowed if {
	_decision(_egress) == {"allow": true, "violations": set(), "warnings": set(), "dryrun": set()}
}

test_workspace_egress_on_egress_node_is_allowed if {
	_decision(_workspace_egress) == {"allow": true, "violations": set(), "warnings": set(), "dryrun": set()}
}

test_none_network_on_egress_node_is_allowed if {
	_ids(_with("/node/enrollment", "sandbox+egress")) == set()
}

test_job_without_null_fields_is_allowed if {
	_ids(_drop_nulls(_base)) == set()
	_ids(_drop_nulls(_workspace_egress)) == set()
}

test_strict_without_cap_add_or_with_empty_cap_add_is_allowed if {
	_ids(_with(_cfg("cap_add"), [])) == set()
	_ids(_with(_cfg("cap_add"), null)) == set()
}

test_decision_violation_carries_rule_and_msg if {
	d := _decision(_with(_cfg("privileged"), true))
	d.allow == false
	d.violations == {{"rule": "H1", "msg": "docker config privileged must be false"}}
}

# --- INPUT -----------------------------------------------------------------------------

test_no_input_denies if {
	d := admission.decision
	d.allow == false
	"INPUT" in {v.rule | some v in d.violations}
}

test_empty_input_denies if {
	d := _decision({})
	d.allow == false
	"INPUT" in {v.rule | some v in d.violations}
	{"rule": "INPUT", "msg": "input.job must be an object"} in d.violations
}

test_non_object_input_denies if {
	d := _decision("job")
	d.allow == false
	{"rule": "INPUT", "msg": "input must be an object"} in d.violations
}

test_missing_sections_deny_input if {
	every section in ["job", "node", "budget", "sandbox"] {
		ids := _ids(_without(concat("", ["/", section])))
		"INPUT" in ids
	}
}

test_missing_now_denies_input_only if {
	_ids(_without("/now")) == {"INPUT"}
}

test_non_numeric_now_denies_input_only if {
	_ids(_with("/now", "1764406800")) == {"INPUT"}
}

test_unknown_profile_denies_input if {
	d := _decision(_with("/sandbox/profile", "root"))
	d.violations == {{"rule": "INPUT", "msg": "input.sandbox.profile root is not a known profile"}}
}

test_missing_profile_denies_input if {
	"INPUT" in _ids(_without("/sandbox/profile"))
}

test_unknown_network_denies_input if {
	d := _decision(_with("/sandbox/network", "host"))
	{"rule": "INPUT", "msg": "input.sandbox.network host is not a known network"} in d.violations
	{v.rule | some v in d.violations} == {"INPUT", "H7", "I5"}
}

test_non_string_sandbox_id_denies_input if {
	"INPUT" in _ids(_with("/sandbox/id", 42))
}

test_missing_sandbox_times_deny_input if {
	"INPUT" in _ids(_without("/sandbox/created_at"))
	"INPUT" in _ids(_with("/sandbox/ceiling_at", "1764421200"))
}

test_missing_node_name_denies_input if {
	"INPUT" in _ids(_without("/node/name"))
	"INPUT" in _ids(_with("/node/name", ""))
}

test_missing_or_malformed_nomad_mounts_deny_input_only if {
	_ids(_without("/nomad_mounts")) == {"INPUT"}
	_ids(_with("/nomad_mounts", {"target": "/alloc", "host_disk": true})) == {"INPUT"}
	_ids(_with("/nomad_mounts/0/host_disk", "yes")) == {"INPUT"}
	_ids(_without("/nomad_mounts/1/target")) == {"INPUT"}
	_ids(_with("/nomad_mounts/-", "/alloc")) == {"INPUT"}
	_ids(_with("/nomad_mounts", [])) == set()
}

test_missing_nomad_mounts_message if {
	d := _decision(_without("/nomad_mounts"))
	d.violations == {{"rule": "INPUT", "msg": "input.nomad_mounts must list the mounts Nomad adds to the task, each with a string target and a boolean host_disk"}}
}

test_missing_budget_section_denies_input_and_b1 if {
	_ids(_without("/budget")) == {"INPUT", "B1"}
	_ids(_with("/budget", [])) == {"INPUT", "B1"}
}

test_empty_blocks_count_as_unset if {
	inp := json.patch(_base, [
		{"op": "replace", "path": _task("Services"), "value": []},
		{"op": "replace", "path": _task("Vault"), "value": {}},
		{"op": "replace", "path": _group("Volumes"), "value": {}},
		{"op": "replace", "path": "/job/ConsulNamespace", "value": ""},
	])
	_ids(inp) == set()
}

# --- the mutation table: every listed single mutation, on every valid variant --------------

_variants := {
	"strict/none": _base,
	"workspace/none": _workspace,
	"strict/egress": _egress,
	"workspace/egress": _workspace_egress,
}

_sock_mount := {"type": "bind", "source": "/var/run/docker.sock", "target": "/var/run/docker.sock"}

# name -> [patch ops, expected rule ids]
_mutations := {
	"privileged true": [[{"op": "add", "path": _cfg("privileged"), "value": true}], {"H1"}],
	"cap_add SYS_ADMIN": [[{"op": "add", "path": _cfg("cap_add"), "value": ["SYS_ADMIN"]}], {"H1"}],
	"cap_drop empty": [[{"op": "add", "path": _cfg("cap_drop"), "value": []}], {"H1"}],
	"cap_drop NET_RAW": [[{"op": "add", "path": _cfg("cap_drop"), "value": ["NET_RAW"]}], {"H1"}],
	"security_opt empty": [[{"op": "add", "path": _cfg("security_opt"), "value": []}], {"H2"}],
	"pids_limit removed": [[{"op": "remove", "path": _cfg("pids_limit")}], {"H3"}],
	"memory oversubscribed": [[{"op": "add", "path": _task("Resources/MemoryMaxMB"), "value": 513}], {"H3"}],
	"identity env": [[{"op": "add", "path": _task("Identity/Env"), "value": true}], {"H4"}],
	"vault": [[{"op": "add", "path": _task("Vault"), "value": {"Policies": ["x"]}}], {"H4"}],
	"templates": [[{"op": "add", "path": _task("Templates"), "value": [{"EmbeddedTmpl": "x", "DestPath": "local/x"}]}], {"H4"}],
	"volumes": [[{"op": "add", "path": _cfg("volumes"), "value": ["/etc:/host-etc"]}], {"H5"}],
	"docker socket": [[{"op": "add", "path": _cfg("mount/-"), "value": _sock_mount}], {"H5"}],
	"ephemeral disk above the quota": [[{"op": "add", "path": _group("EphemeralDisk/SizeMB"), "value": 100000}], {"H5"}],
	"nomad mounts missing": [[{"op": "remove", "path": "/nomad_mounts"}], {"INPUT"}],
	"workspace tmpfs_options removed": [[{"op": "remove", "path": _cfg("mount/0/tmpfs_options")}], {"H6"}],
	"group services": [[{"op": "add", "path": _group("Services"), "value": [{"Name": "x"}]}], {"H7"}],
	"task services": [[{"op": "add", "path": _task("Services"), "value": [{"Name": "x", "Tags": ["a"]}]}], {"H7"}],
	"ports": [[{"op": "add", "path": _cfg("ports"), "value": ["http"]}], {"H7"}],
	"host network": [[{"op": "add", "path": _cfg("network_mode"), "value": "host"}], {"H7"}],
	"priority at ceiling": [[{"op": "add", "path": "/job/Priority", "value": 20}], {"R1"}],
	"ulimit object": [[{"op": "add", "path": _cfg("ulimit"), "value": {"nofile": "1024:1024", "nproc": "512:512"}}], {"H3"}],
	"ulimit two maps": [[{"op": "add", "path": _cfg("ulimit/-"), "value": {"nofile": "4096:4096"}}], {"H3"}],
	"job id": [[{"op": "add", "path": "/job/ID", "value": "other-k7x2m9p4q8r5t1v6"}], {"H9"}],
	"labels object": [[{"op": "add", "path": _cfg("labels"), "value": {"sandgate.sandbox_id": _sandbox_id}}], {"H9"}],
	"labels two maps": [[{"op": "add", "path": _cfg("labels/-"), "value": {"team": "ci"}}], {"H9"}],
	"seccomp unconfined": [[{"op": "add", "path": _cfg("security_opt"), "value": ["no-new-privileges", "seccomp=unconfined"]}], {"H10"}],
	"kata runtime": [[{"op": "add", "path": _cfg("runtime"), "value": "kata-runtime"}], {"H10"}],
	"node pin removed": [[{"op": "remove", "path": "/job/Constraints/2"}], {"P1"}],
	"node pin w2": [[{"op": "add", "path": "/job/Constraints/2/RTarget", "value": "w2"}], {"P1"}],
	"arch not allowed": [[{"op": "add", "path": "/job/Constraints/1/RTarget", "value": _other_arch}], {"P1"}],
	"control plane": [[{"op": "add", "path": "/node/control_plane", "value": true}], {"P2"}],
	"node-role server": [[{"op": "add", "path": "/node/meta", "value": {"node-role": "server"}}], {"P2"}],
	"drain": [[{"op": "add", "path": "/node/drain", "value": true}], {"P3"}],
	"frozen": [[{"op": "add", "path": "/node/operator_state", "value": "frozen"}], {"P3"}],
	"draining": [[{"op": "add", "path": "/node/operator_state", "value": "draining"}], {"P3"}],
	"memory 90": [[{"op": "add", "path": "/node/usage/memory_percent", "value": 90}], {"P3"}],
	"sandboxes full": [[{"op": "add", "path": "/budget/used/sandboxes", "value": 10}], {"B1"}],
	"cpu budget +1": [[{"op": "add", "path": "/budget/used/cpu_mhz", "value": 7501}], {"B1"}],
	"cpu above max": [[{"op": "add", "path": _task("Resources/CPU"), "value": 2001}], {"B2"}],
	"image": [[{"op": "add", "path": _cfg("image"), "value": "evil:latest"}], {"H11"}],
	"sleep too long": [[{"op": "add", "path": _cfg("args"), "value": ["999999"]}], {"H8"}],
}

# Mutations that only make sense on some variants.
_strict_mutations := {
	"cap_add CHOWN": [[{"op": "add", "path": _cfg("cap_add"), "value": ["CHOWN"]}], {"H1"}],
	"readonly_rootfs false": [[{"op": "add", "path": _cfg("readonly_rootfs"), "value": false}], {"H6"}],
}

_egress_mutations := {"sandbox-enrolled node": [[{"op": "add", "path": "/node/enrollment", "value": "sandbox"}], {"I5"}]}

_all_mutations := object.union(object.union(_mutations, _strict_mutations), _egress_mutations)

# The variants a listed mutation applies to.
_mutation_variants(name) := ["strict/none", "strict/egress"] if {
	_strict_mutations[name]
} else := ["strict/egress", "workspace/egress"] if {
	_egress_mutations[name]
} else := object.keys(_variants)

# The variants on which a listed mutation does not give exactly its rule ids (empty when
# the table holds for it).
_mutation_failures(name) := {variant |
	[ops, want] := _all_mutations[name]
	some variant in _mutation_variants(name)
	not _gives(json.patch(_variants[variant], ops), want)
}

_gives(inp, want) if _ids(inp) == want

# One test per listed mutation, over every variant it applies to (opa test gives each test
# 5 s, and -v traces every evaluation).
test_mutation_privileged_true_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("privileged true") == set()
}

test_mutation_cap_add_sys_admin_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("cap_add SYS_ADMIN") == set()
}

test_mutation_cap_drop_empty_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("cap_drop empty") == set()
}

test_mutation_cap_drop_net_raw_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("cap_drop NET_RAW") == set()
}

test_mutation_security_opt_empty_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("security_opt empty") == set()
}

test_mutation_pids_limit_removed_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("pids_limit removed") == set()
}

test_mutation_memory_oversubscribed_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("memory oversubscribed") == set()
}

test_mutation_identity_env_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("identity env") == set()
}

test_mutation_vault_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("vault") == set()
}

test_mutation_templates_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("templates") == set()
}

test_mutation_volumes_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("volumes") == set()
}

test_mutation_docker_socket_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("docker socket") == set()
}

test_mutation_ephemeral_disk_above_the_quota_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("ephemeral disk above the quota") == set()
}

test_mutation_nomad_mounts_missing_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("nomad mounts missing") == set()
}

test_mutation_workspace_tmpfs_options_removed_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("workspace tmpfs_options removed") == set()
}

test_mutation_group_services_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("group services") == set()
}

test_mutation_task_services_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("task services") == set()
}

test_mutation_ports_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("ports") == set()
}

test_mutation_host_network_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("host network") == set()
}

test_mutation_priority_at_ceiling_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("priority at ceiling") == set()
}

test_mutation_ulimit_object_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("ulimit object") == set()
}

test_mutation_ulimit_two_maps_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("ulimit two maps") == set()
}

test_mutation_labels_object_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("labels object") == set()
}

test_mutation_labels_two_maps_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("labels two maps") == set()
}

test_mutation_job_id_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("job id") == set()
}

test_mutation_seccomp_unconfined_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("seccomp unconfined") == set()
}

test_mutation_kata_runtime_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("kata runtime") == set()
}

test_mutation_node_pin_removed_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("node pin removed") == set()
}

test_mutation_node_pin_w2_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("node pin w2") == set()
}

test_mutation_arch_not_allowed_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("arch not allowed") == set()
}

test_mutation_control_plane_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("control plane") == set()
}

test_mutation_node_role_server_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("node-role server") == set()
}

test_mutation_drain_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("drain") == set()
}

test_mutation_frozen_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("frozen") == set()
}

test_mutation_draining_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("draining") == set()
}

test_mutation_memory_90_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("memory 90") == set()
}

test_mutation_sandboxes_full_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("sandboxes full") == set()
}

test_mutation_cpu_budget_1_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("cpu budget +1") == set()
}

test_mutation_cpu_above_max_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("cpu above max") == set()
}

test_mutation_image_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("image") == set()
}

test_mutation_sleep_too_long_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("sleep too long") == set()
}

test_mutation_cap_add_chown_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("cap_add CHOWN") == set()
}

test_mutation_readonly_rootfs_false_gives_exactly_its_rule_on_every_variant if {
	_mutation_failures("readonly_rootfs false") == set()
}

test_mutation_table_is_complete if {
	count(_mutations) == 41
	count(_strict_mutations) == 2
	count(_egress_mutations) == 1
}

test_every_variant_is_allowed if {
	every _, inp in _variants {
		_ids(inp) == set()
	}
}
