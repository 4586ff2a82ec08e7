package sandgate.admission

# Container hardening, part 1: the job's shape and the docker privileges. H1 (privileges
# and job shape), H2 (no-new-privileges), H3 (resource limits), H10 (seccomp/AppArmor
# kept, runtime allowlist), H11 (image allowlist). See admission.rego for how the rules,
# the fast path and the checks fit together.

# cap_add as rendered: absent and null both mean "no capabilities added".
_cap_add := c if {
	c := _config.cap_add
	c != null
} else := []

# security_opt when it is a list (H2 fires otherwise).
_security_opt := s if {
	s := _config.security_opt
	is_array(s)
}

_forbidden_security_opt(opt) if {
	is_string(opt)
	some prefix in _cfg.docker.forbidden_security_opt_prefixes
	startswith(opt, prefix)
}

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
#   memory_hard_limit, oom_score_adj ...) would reach the node unchecked.
# custom:
#   id: H1
#   severity: critical
violations contains {"rule": "H1", "msg": msg} if {
	not _canonical
	some msg in _h1
}

_h1 contains "docker config privileged must be false" if not _config.privileged == false

_h1 contains "docker config cap_drop must be [\"ALL\"]" if not _config.cap_drop == ["ALL"]

_h1 contains sprintf("docker config cap_add %v is not allowed for profile %v", [cap, _sandbox_value("profile")]) if {
	some cap in _cap_add
	not _profile_cap(cap)
}

_profile_cap(cap) if cap in _profile.cap_add

_h1 contains "docker config cap_add must be a list" if not is_array(_cap_add)

_h1 contains sprintf("task Driver must be %v", [_cfg.job.driver]) if not _task.Driver == _cfg.job.driver

_h1 contains "job must have exactly one task group" if not _group

_h1 contains "task group must have exactly one task" if not _task

_h1 contains "task group Count must be 1" if not _group.Count == 1

_h1 contains sprintf("task group Name must be %v", [_cfg.job.group_name]) if {
	not _group.Name == _cfg.job.group_name
}

_h1 contains sprintf("task Name must be %v", [_cfg.job.task_name]) if {
	not _task.Name == _cfg.job.task_name
}

_h1 contains "task Config must be an object" if not _config

_h1 contains sprintf("job Type %v is not one of %v", [_job_value("Type"), _cfg.job.types]) if not _job_type_ok

_job_type_ok if input.job.Type in _cfg.job.types

_h1 contains sprintf("job %s must not be set", [field]) if {
	some field in ["Periodic", "ParameterizedJob", "Multiregion"]
	_set(input.job[field])
}

_h1 contains "task Lifecycle must not be set" if _set(_task.Lifecycle)

_h1 contains sprintf("docker config keys %v are not allowed", [sort(keys)]) if {
	keys := object.keys(object.remove(
		object.remove(object.remove(_config, _cfg.docker.allowed_config_keys), _cfg.docker.host_access_keys),
		array.concat(_cfg.docker.network_keys, _cfg.docker.command_keys),
	))
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
violations contains {"rule": "H2", "msg": msg} if {
	not _canonical
	some msg in _h2
}

_h2 contains sprintf("docker config security_opt must contain %v", [opt]) if {
	some opt in _cfg.docker.required_security_opt
	not _has_security_opt(opt)
}

_has_security_opt(opt) if opt in _security_opt

_h2 contains sprintf("docker config security_opt entry %v is not allowed", [opt]) if {
	some opt in _security_opt
	not opt in _cfg.docker.required_security_opt
	not _forbidden_security_opt(opt)
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
violations contains {"rule": "H3", "msg": msg} if {
	not _canonical
	some msg in _h3
}

_pids_ok if _within(_config.pids_limit, 1, _cfg.docker.pids_limit_max)

_h3 contains sprintf("docker config pids_limit must be a number in [1, %v]", [_cfg.docker.pids_limit_max]) if not _pids_ok

_h3 contains sprintf("docker config %s must be %v", [key, want]) if {
	some key, want in {"init": true, "ipc_mode": "private", "cpu_hard_limit": true}
	not _config[key] == want
}

_h3 contains sprintf("task Resources.MemoryMaxMB %v must be unset or equal to MemoryMB %v", [_resource_value("MemoryMaxMB"), _resource_value("MemoryMB")]) if {
	not _memory_max_ok
}

_memory_max_ok if object.get(_resources, "MemoryMaxMB", null) in {null, 0}

_memory_max_ok if _resources.MemoryMaxMB == _resources.MemoryMB

# ulimit as the docker driver reads it (list(map(string))): the one map of a list of exactly
# one map of strings; undefined otherwise (one H3 message says so, the per-key checks wait).
_ulimit := u if {
	[u] := _config.ulimit
	_string_map(u)
}

_h3 contains "docker config ulimit must be a list of exactly one map of strings" if not _ulimit

_h3 contains sprintf("docker config ulimit %s must be \"soft:hard\" with soft <= hard <= %v", [name, max]) if {
	_ulimit
	some name, max in _cfg.docker.ulimit_max
	not _ulimit_ok(name, max)
}

_ulimit_ok(name, max) if {
	value := _ulimit[name]
	regex.match(`^[0-9]{1,9}(:[0-9]{1,9})?$`, value)
	parts := split(value, ":")
	hard := to_number(parts[count(parts) - 1])
	to_number(parts[0]) <= hard
	hard <= max
}

_h3 contains sprintf("docker config ulimit keys %v are not allowed", [sort(extra)]) if {
	extra := object.keys(object.remove(_ulimit, object.keys(_cfg.docker.ulimit_max)))
	count(extra) > 0
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
violations contains {"rule": "H10", "msg": msg} if {
	not _canonical
	some msg in _h10
}

_h10 contains sprintf("docker config security_opt entry %v weakens the default confinement", [opt]) if {
	some opt in _security_opt
	_forbidden_security_opt(opt)
}

_h10 contains sprintf("docker config runtime %v is not one of %v", [_config_value("runtime"), _allowed_runtimes]) if {
	not _runtime_ok
}

_runtime_ok if _config.runtime in _allowed_runtimes

# Egress sandboxes need a runtime in both lists.
_allowed_runtimes := both if {
	_egress
	both := [r | some r in _cfg.runtimes.egress_allowed; r in _cfg.runtimes.allowed]
} else := _cfg.runtimes.allowed

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
	not _canonical
	not _image_ok
	msg := sprintf("docker config image %v is not one of %v", [_config_value("image"), _cfg.images.allowed])
}

_image_ok if _config.image in _cfg.images.allowed
