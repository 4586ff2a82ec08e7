package sandgate.admission

import data.sandgate.config as cfg
import future.keywords.not

# Container hardening, part 1: the job's shape and the docker privileges. H1 (privileges
# and job shape), H2 (no-new-privileges), H3 (resource limits), H10 (seccomp/AppArmor
# kept, runtime allowlist), H11 (image allowlist). See admission.rego for how the rules
# are written. The task is input.job.TaskGroups[0].Tasks[0]; its docker config is the
# task's Config.

# --- H1: an unprivileged docker task in a plain single-task job ------------------------
#
# Anything else runs containers no rule inspected and no budget accounts. The other rules
# judge the first group and its first task; a job with more is refused here alone.

# METADATA
# title: A plain job without hooks
# description: >-
#   The job must not be periodic, parameterized or multiregion, and the task must not
#   have a Lifecycle hook: each would run containers no rule inspected and no budget
#   accounts.
# custom:
#   id: H1
#   severity: critical
violations contains {"rule": "H1", "msg": sprintf("%v%v must not be set", [part, field])} if {
	table := {
		"job ": {"Periodic": null, "ParameterizedJob": null, "Multiregion": null},
		"task ": {"Lifecycle": null},
	}
	not object.subset(_parts, table)
	some part, fields in table
	some field, _ in fields
	not _part_field(part, field) in {null, "", [], {}}
}

# METADATA
# title: One unprivileged container
# description: >-
#   The group must have Count 1 and the docker config must set privileged = false
#   explicitly: a privileged container is root on the node.
# custom:
#   id: H1
#   severity: critical
violations contains {"rule": "H1", "msg": sprintf("%v%v must be %v", [part, field, want])} if {
	table := {
		"task group ": {"Count": 1},
		"docker config ": {"privileged": false},
	}
	not object.subset(_parts, table)
	some part, fields in table
	some field, want in fields
	not _part_field(part, field) == want
}

# METADATA
# title: Every capability is dropped
# description: >-
#   The docker config must set cap_drop exactly ["ALL"].
# custom:
#   id: H1
#   severity: critical
violations contains {"rule": "H1", "msg": "docker config cap_drop must be [\"ALL\"]"} if {
	not input.job.TaskGroups[0].Tasks[0].Config.cap_drop == ["ALL"]
}

# METADATA
# title: Capabilities are added only as the profile allows
# description: >-
#   Every cap_add entry must be in profiles.<profile>.cap_add (none for strict):
#   SYS_ADMIN or NET_ADMIN are escapes or host network control.
# custom:
#   id: H1
#   severity: critical
violations contains {"rule": "H1", "msg": sprintf("docker config cap_add %v is not allowed for profile %v", [cap, _sandbox_value("profile")])} if {
	some cap in input.job.TaskGroups[0].Tasks[0].Config.cap_add
	not cap in cfg.profiles[input.sandbox.profile].cap_add
}

# METADATA
# title: cap_add is a list
# description: >-
#   The docker config's cap_add must be a list, or absent.
# custom:
#   id: H1
#   severity: critical
violations contains {"rule": "H1", "msg": "docker config cap_add must be a list"} if {
	caps := input.job.TaskGroups[0].Tasks[0].Config.cap_add
	caps != null
	not is_array(caps)
}

# METADATA
# title: The task runs on the docker driver
# description: >-
#   The task driver must be job.driver (docker): raw_exec runs on the host.
# custom:
#   id: H1
#   severity: critical
violations contains {"rule": "H1", "msg": sprintf("task Driver must be %v", [_data_value(["job", "driver"])])} if {
	not input.job.TaskGroups[0].Tasks[0].Driver == cfg.job.driver
}

# METADATA
# title: The task group has the sandbox group's name
# description: >-
#   The one task group must be named job.group_name.
# custom:
#   id: H1
#   severity: critical
violations contains {"rule": "H1", "msg": sprintf("task group Name must be %v", [_data_value(["job", "group_name"])])} if {
	not input.job.TaskGroups[0].Name == cfg.job.group_name
}

# METADATA
# title: The task has the sandbox task's name
# description: >-
#   The one task must be named job.task_name.
# custom:
#   id: H1
#   severity: critical
violations contains {"rule": "H1", "msg": sprintf("task Name must be %v", [_data_value(["job", "task_name"])])} if {
	not input.job.TaskGroups[0].Tasks[0].Name == cfg.job.task_name
}

# METADATA
# title: The job has exactly one task group
# description: >-
#   The job must have exactly one task group, an object: the other rules judge the first
#   group only.
# custom:
#   id: H1
#   severity: critical
violations contains {"rule": "H1", "msg": "job must have exactly one task group"} if not {
	[group] := input.job.TaskGroups
	is_object(group)
}

# METADATA
# title: The task group has exactly one task
# description: >-
#   The task group must have exactly one task, an object: the other rules judge the first
#   task only.
# custom:
#   id: H1
#   severity: critical
violations contains {"rule": "H1", "msg": "task group must have exactly one task"} if not {
	[task] := input.job.TaskGroups[0].Tasks
	is_object(task)
}

# METADATA
# title: The task has a docker config
# description: >-
#   The task's Config must be an object.
# custom:
#   id: H1
#   severity: critical
violations contains {"rule": "H1", "msg": "task Config must be an object"} if not is_object(input.job.TaskGroups[0].Tasks[0].Config)

# METADATA
# title: The job is of a sandbox job type
# description: >-
#   The job's Type must be one of job.types (batch).
# custom:
#   id: H1
#   severity: critical
violations contains {"rule": "H1", "msg": sprintf("job Type %v is not one of %v", [_job_value("Type"), _data_value(["job", "types"])])} if {
	not input.job.Type in cfg.job.types
}

# METADATA
# title: The docker config holds only reviewed keys
# description: >-
#   Every docker config key must be in docker.allowed_config_keys: the Nomad server does
#   not validate driver config, so an unreviewed key (shm_size, memory_hard_limit,
#   oom_score_adj ...) would reach the node unchecked. Keys H5 (host access), H7
#   (network) and H8 (command) own are reported there. A key list missing from policy
#   data counts as empty: every key is then refused here.
# custom:
#   id: H1
#   severity: critical
violations contains {"rule": "H1", "msg": sprintf("docker config keys %v are not allowed", [sort(keys)])} if {
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

# --- H2: no-new-privileges and nothing else in security_opt ----------------------------

# METADATA
# title: no-new-privileges is set
# description: >-
#   security_opt must be a list holding every docker.required_security_opt entry
#   (no-new-privileges): without it a setuid binary regains the privileges the container
#   dropped.
# custom:
#   id: H2
#   severity: high
violations contains {"rule": "H2", "msg": sprintf("docker config security_opt must contain %v", [opt])} if {
	some opt in cfg.docker.required_security_opt
	not {
		opts := input.job.TaskGroups[0].Tasks[0].Config.security_opt
		is_array(opts)
		opt in opts
	}
}

# METADATA
# title: security_opt holds nothing else
# description: >-
#   Every security_opt entry must be a required one (entries with a forbidden prefix are
#   H10): Docker parses spellings such as "no-new-privileges=0" as false, so unknown
#   entries are refused rather than interpreted.
# custom:
#   id: H2
#   severity: high
violations contains {"rule": "H2", "msg": sprintf("docker config security_opt entry %v is not allowed", [opt])} if {
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

# --- H3: processes, files, memory and CPU are capped -----------------------------------

# METADATA
# title: Zombies reaped, no shared memory, no CPU bursts
# description: >-
#   The docker config must set init true (zombies reaped), ipc_mode "private" (no shared
#   memory with the host or other containers) and cpu_hard_limit true (no bursting over
#   the reserved MHz).
# custom:
#   id: H3
#   severity: medium
violations contains {"rule": "H3", "msg": sprintf("%v%v must be %v", [part, field, want])} if {
	table := {"docker config ": {"init": true, "ipc_mode": "private", "cpu_hard_limit": true}}
	not object.subset(_parts, table)
	some part, fields in table
	some field, want in fields
	not _part_field(part, field) == want
}

# METADATA
# title: Processes are capped
# description: >-
#   pids_limit must be a number in [1, docker.pids_limit_max]: a fork bomb would exhaust
#   the node's process table.
# custom:
#   id: H3
#   severity: medium
violations contains {"rule": "H3", "msg": sprintf("docker config pids_limit must be a number in [1, %v]", [_data_value(["docker", "pids_limit_max"])])} if not {
	pids := input.job.TaskGroups[0].Tasks[0].Config.pids_limit
	pids >= 1
	pids <= cfg.docker.pids_limit_max
}

# METADATA
# title: No memory beyond the reservation
# description: >-
#   Resources.MemoryMaxMB must be unset (null, absent or 0) or equal to MemoryMB: no
#   memory that B1 never accounted.
# custom:
#   id: H3
#   severity: medium
violations contains {"rule": "H3", "msg": sprintf("task Resources.MemoryMaxMB %v must be unset or equal to MemoryMB %v", [_resource_value("MemoryMaxMB"), _resource_value("MemoryMB")])} if {
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

# METADATA
# title: ulimit has the shape the docker driver reads
# description: >-
#   ulimit must be a list of exactly one map of strings, the shape the docker driver
#   requires: an object registers but fails the task at start, and Nomad merges the maps
#   of a longer list.
# custom:
#   id: H3
#   severity: medium
violations contains {"rule": "H3", "msg": "docker config ulimit must be a list of exactly one map of strings"} if not _ulimit

# METADATA
# title: Open files and processes are capped
# description: >-
#   The ulimit map must set every key of docker.ulimit_max (nofile, nproc) as "soft:hard"
#   (or one number) with soft <= hard <= the maximum.
# custom:
#   id: H3
#   severity: medium
violations contains {"rule": "H3", "msg": sprintf("docker config ulimit %v must be \"soft:hard\" with soft <= hard <= %v", [name, max])} if {
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

# METADATA
# title: No other ulimit
# description: >-
#   The ulimit map must set no key but those of docker.ulimit_max: memlock or rtprio would
#   let the sandbox pin memory or starve the CPU. Without docker.ulimit_max in policy data
#   every key is refused.
# custom:
#   id: H3
#   severity: medium
violations contains {"rule": "H3", "msg": sprintf("docker config ulimit keys %v are not allowed", [sort(object.keys(extra))])} if {
	extra := object.remove(_ulimit, object.get(cfg, ["docker", "ulimit_max"], {}))
	extra != {}
}

# --- H10: default seccomp and AppArmor kept, allowlisted runtime -----------------------

# METADATA
# title: The default seccomp and AppArmor confinement is kept
# description: >-
#   No security_opt entry may start with a docker.forbidden_security_opt_prefixes entry
#   (seccomp, apparmor, systempaths, label, no-new-privileges=false ...): those replace or
#   switch off the kernel confinement Docker applies by default.
# custom:
#   id: H10
#   severity: high
violations contains {"rule": "H10", "msg": sprintf("docker config security_opt entry %v weakens the default confinement", [opt])} if {
	opts := input.job.TaskGroups[0].Tasks[0].Config.security_opt
	is_array(opts)
	some opt in opts
	_forbidden_security_opt(opt)
}

# METADATA
# title: The forbidden security_opt prefixes are in policy data
# description: >-
#   docker.forbidden_security_opt_prefixes must be a list: without it no security_opt
#   entry can be judged.
# custom:
#   id: H10
#   severity: high
violations contains {"rule": "H10", "msg": "policy data docker.forbidden_security_opt_prefixes must be a list: without it no security_opt entry can be judged"} if {
	not is_array(cfg.docker.forbidden_security_opt_prefixes)
}

# METADATA
# title: The runtime is allowlisted
# description: >-
#   runtime must be set and in runtimes.allowed, and for a network with egress also in
#   runtimes.egress_allowed (the operator may require gVisor there): an unknown runtime
#   may not isolate at all.
# custom:
#   id: H10
#   severity: high
violations contains {"rule": "H10", "msg": sprintf("docker config runtime %v is not one of %v", [_config_value("runtime"), _allowed_runtimes])} if not {
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
violations contains {"rule": "H11", "msg": sprintf("docker config image %v is not one of %v", [_config_value("image"), _data_value(["images", "allowed"])])} if {
	not input.job.TaskGroups[0].Tasks[0].Config.image in cfg.images.allowed
}
