package sandgate.admission

import data.sandgate.config as cfg
import future.keywords.not

# Container hardening, part 1: the job's shape and the docker privileges. H1 (privileges
# and job shape), H2 (no-new-privileges), H3 (resource limits), H10 (seccomp/AppArmor
# kept, runtime allowlist), H11 (image allowlist). See admission.rego for how the rules
# are written. The task is input.job.TaskGroups[0].Tasks[0]; its docker config is the
# task's Config.

# --- H1 --------------------------------------------------------------------------------

# METADATA
# title: Unprivileged docker task in a plain single-task job
# description: >-
#   The docker config must set privileged = false explicitly (a privileged container is root
#   on the node), cap_drop exactly ["ALL"], and cap_add (a list, or absent) only from
#   profiles.<profile>.cap_add (none for strict): SYS_ADMIN or NET_ADMIN are escapes or host
#   network control. The task driver must be job.driver (docker; raw_exec runs on the host),
#   the job a job.types type (batch) with exactly one group named job.group_name with Count 1
#   and one task named job.task_name with an object Config, not periodic, parameterized or
#   multiregion, the task without a Lifecycle hook: anything else runs containers no rule
#   inspected and no budget accounts. Every docker config key must be in
#   docker.allowed_config_keys (host access, network and command keys are H5, H7 and H8):
#   the Nomad server does not validate driver config, so an unreviewed key (shm_size,
#   memory_hard_limit, oom_score_adj ...) would reach the node unchecked. The other rules
#   judge the first group and its first task; a job with more is refused here alone.
# custom:
#   id: H1
#   severity: critical
violations contains {"rule": "H1", "msg": msg} if some msg in _h1

_h1 contains msg if {
	table := {
		"job ": {"Periodic": null, "ParameterizedJob": null, "Multiregion": null},
		"task group ": {"Count": 1},
		"task ": {"Lifecycle": null},
		"docker config ": {"privileged": false},
	}
	not object.subset(_parts, table)
	some msg in _table_failures(table)
}

_h1 contains "docker config cap_drop must be [\"ALL\"]" if {
	not input.job.TaskGroups[0].Tasks[0].Config.cap_drop == ["ALL"]
}

_h1 contains sprintf("docker config cap_add %v is not allowed for profile %v", [cap, _sandbox_value("profile")]) if {
	some cap in input.job.TaskGroups[0].Tasks[0].Config.cap_add
	not cap in cfg.profiles[input.sandbox.profile].cap_add
}

_h1 contains "docker config cap_add must be a list" if {
	caps := input.job.TaskGroups[0].Tasks[0].Config.cap_add
	caps != null
	not is_array(caps)
}

_h1 contains sprintf("task Driver must be %v", [_data_value(["job", "driver"])]) if {
	not input.job.TaskGroups[0].Tasks[0].Driver == cfg.job.driver
}

_h1 contains sprintf("task group Name must be %v", [_data_value(["job", "group_name"])]) if {
	not input.job.TaskGroups[0].Name == cfg.job.group_name
}

_h1 contains sprintf("task Name must be %v", [_data_value(["job", "task_name"])]) if {
	not input.job.TaskGroups[0].Tasks[0].Name == cfg.job.task_name
}

_h1 contains "job must have exactly one task group" if not {
	[group] := input.job.TaskGroups
	is_object(group)
}

_h1 contains "task group must have exactly one task" if not {
	[task] := input.job.TaskGroups[0].Tasks
	is_object(task)
}

_h1 contains "task Config must be an object" if not is_object(input.job.TaskGroups[0].Tasks[0].Config)

_h1 contains sprintf("job Type %v is not one of %v", [_job_value("Type"), _data_value(["job", "types"])]) if {
	not input.job.Type in cfg.job.types
}

# Keys H5 (host access), H7 (network) and H8 (command) own are reported there. A key list
# missing from policy data counts as empty: every key is then refused here.
_h1 contains sprintf("docker config keys %v are not allowed", [sort(keys)]) if {
	config := input.job.TaskGroups[0].Tasks[0].Config
	is_object(config)
	unreviewed := object.remove(config, object.get(cfg, ["docker", "allowed_config_keys"], []))
	unreviewed != {}
	keys := object.keys(object.remove(unreviewed, array.concat(
		array.concat(object.get(cfg, ["docker", "host_access_keys"], []), object.get(cfg, ["docker", "network_keys"], [])),
		object.get(cfg, ["docker", "command_keys"], []),
	)))
	count(keys) > 0
}

# --- H2 --------------------------------------------------------------------------------

# METADATA
# title: no-new-privileges and nothing else in security_opt
# description: >-
#   security_opt must be a list holding every docker.required_security_opt entry
#   (no-new-privileges), and every entry must be a required one (entries with a forbidden
#   prefix are H10): without no-new-privileges a setuid binary regains the privileges the
#   container dropped, and Docker parses spellings such as "no-new-privileges=0" as false,
#   so unknown entries are refused rather than interpreted.
# custom:
#   id: H2
#   severity: high
violations contains {"rule": "H2", "msg": msg} if some msg in _h2

_h2 contains sprintf("docker config security_opt must contain %v", [opt]) if {
	some opt in cfg.docker.required_security_opt
	not {
		opts := input.job.TaskGroups[0].Tasks[0].Config.security_opt
		is_array(opts)
		opt in opts
	}
}

_h2 contains sprintf("docker config security_opt entry %v is not allowed", [opt]) if {
	opts := input.job.TaskGroups[0].Tasks[0].Config.security_opt
	is_array(opts)
	some opt in opts
	not opt in cfg.docker.required_security_opt
	not _forbidden_security_opt(opt)
}

_forbidden_security_opt(opt) if {
	is_string(opt)
	strings.any_prefix_match(opt, cfg.docker.forbidden_security_opt_prefixes)
}

# --- H3 --------------------------------------------------------------------------------

# METADATA
# title: Processes, files, memory and CPU are capped
# description: >-
#   pids_limit must be a number in [1, docker.pids_limit_max] (a fork bomb would exhaust the
#   node's process table); ulimit must be a list of exactly one map of strings, the shape the
#   docker driver requires (an object registers but fails the task at start, and Nomad merges
#   the maps of a longer list), and that map must set every key of docker.ulimit_max (nofile,
#   nproc) as "soft:hard" (or one number) with soft <= hard <= the maximum, and no other key
#   (memlock or rtprio would let the sandbox pin memory or starve the CPU); init must be true (zombies
#   reaped), ipc_mode "private" (no shared memory with the host or other containers),
#   cpu_hard_limit true (no bursting over the reserved MHz); and Resources.MemoryMaxMB unset
#   (null, absent or 0) or equal to MemoryMB: no memory that B1 never accounted.
# custom:
#   id: H3
#   severity: medium
violations contains {"rule": "H3", "msg": msg} if some msg in _h3

_h3 contains msg if {
	table := {"docker config ": {"init": true, "ipc_mode": "private", "cpu_hard_limit": true}}
	not object.subset(_parts, table)
	some msg in _table_failures(table)
}

_h3 contains sprintf("docker config pids_limit must be a number in [1, %v]", [_data_value(["docker", "pids_limit_max"])]) if not {
	pids := input.job.TaskGroups[0].Tasks[0].Config.pids_limit
	pids >= 1
	pids <= cfg.docker.pids_limit_max
}

_h3 contains sprintf("task Resources.MemoryMaxMB %v must be unset or equal to MemoryMB %v", [_resource_value("MemoryMaxMB"), _resource_value("MemoryMB")]) if {
	resources := input.job.TaskGroups[0].Tasks[0].Resources
	memory_max := resources.MemoryMaxMB
	not memory_max in {null, 0}
	not memory_max == resources.MemoryMB
}

# ulimit as the docker driver reads it (list(map(string))): the one map of a list of exactly
# one map of strings; undefined otherwise (one H3 message says so, the per-key checks wait).
_ulimit := u if {
	[u] := input.job.TaskGroups[0].Tasks[0].Config.ulimit
	_string_map(u)
}

_h3 contains "docker config ulimit must be a list of exactly one map of strings" if not _ulimit

_h3 contains sprintf("docker config ulimit %s must be \"soft:hard\" with soft <= hard <= %v", [name, max]) if {
	ulimit := _ulimit
	some name, max in cfg.docker.ulimit_max
	not {
		value := ulimit[name]
		regex.match(`^[0-9]{1,9}(:[0-9]{1,9})?$`, value)
		parts := split(value, ":")
		hard := to_number(parts[count(parts) - 1])
		to_number(parts[0]) <= hard
		hard <= max
	}
}

# Without docker.ulimit_max in policy data every key is refused.
_h3 contains sprintf("docker config ulimit keys %v are not allowed", [sort(object.keys(extra))]) if {
	extra := object.remove(_ulimit, object.get(cfg, ["docker", "ulimit_max"], {}))
	extra != {}
}

# --- H10 -------------------------------------------------------------------------------

# METADATA
# title: Default seccomp and AppArmor kept, allowlisted runtime
# description: >-
#   No security_opt entry may start with a docker.forbidden_security_opt_prefixes entry
#   (seccomp, apparmor, systempaths, label, no-new-privileges=false ...): those replace or
#   switch off the kernel confinement Docker applies by default. runtime must be set and in
#   runtimes.allowed, and for a network with egress also in runtimes.egress_allowed (the
#   operator may require gVisor there): an unknown runtime may not isolate at all.
# custom:
#   id: H10
#   severity: high
violations contains {"rule": "H10", "msg": msg} if some msg in _h10

_h10 contains sprintf("docker config security_opt entry %v weakens the default confinement", [opt]) if {
	opts := input.job.TaskGroups[0].Tasks[0].Config.security_opt
	is_array(opts)
	some opt in opts
	_forbidden_security_opt(opt)
}

_h10 contains "policy data docker.forbidden_security_opt_prefixes must be a list: without it no security_opt entry can be judged" if {
	not is_array(cfg.docker.forbidden_security_opt_prefixes)
}

_h10 contains sprintf("docker config runtime %v is not one of %v", [_config_value("runtime"), _allowed_runtimes]) if not {
	runtime := input.job.TaskGroups[0].Tasks[0].Config.runtime
	runtime in cfg.runtimes.allowed
	_runtime_for_network(runtime)
}

# A sandbox with egress (any docker network mode but "none") needs a runtime that
# runtimes.egress_allowed lists too.
_runtime_for_network(_) if not cfg.networks[input.sandbox.network].network_mode != "none"

_runtime_for_network(runtime) if runtime in cfg.runtimes.egress_allowed

# The runtimes this sandbox may use, for the message.
_allowed_runtimes := [r | some r in cfg.runtimes.egress_allowed; r in cfg.runtimes.allowed] if {
	cfg.networks[input.sandbox.network].network_mode != "none"
} else := _data_value(["runtimes", "allowed"])

# --- H11 -------------------------------------------------------------------------------

# METADATA
# title: Image is allowlisted
# description: >-
#   image must be exactly one of images.allowed: only reviewed images run, never an
#   arbitrary reference chosen by a caller.
# custom:
#   id: H11
#   severity: high
violations contains {"rule": "H11", "msg": msg} if {
	not input.job.TaskGroups[0].Tasks[0].Config.image in cfg.images.allowed
	msg := sprintf("docker config image %v is not one of %v", [_config_value("image"), _data_value(["images", "allowed"])])
}
