package sandgate.admission

import data.sandgate.lib.nodes

# The fast path. Every create is admitted through here, so it must stay cheap. OPA costs
# about 0.7 µs per evaluation step here; a builtin whose argument is a reference costs an
# extra step per reference, a rule reference four or more. So this is ONE rule body: the
# facts it needs are first gathered into local variables with a few array unifications
# (one step each), then checked with equalities, object.subset against literal objects,
# and a few builtins. Constants are written inline (they mirror _sleep_command, _mib,
# _docker_socket and _node_pin_target).
#
# _canonical holds only when the input is exactly what render/ emits for a valid sandbox on
# a healthy node with budget left. It is a SUFFICIENT condition for every check set (_input,
# _p1 ... _h11) being empty: each line below implies the checks named beside it. It is
# deliberately stricter than the checks where that is cheaper (exact lists, nulls instead
# of "null, absent or empty", "N:N" ulimits, the sleep exactly to the ceiling, a runtime in
# both runtime lists): an input that differs only there takes the slow path, where the
# checks decide. It must never be looser: tests compare every decision with and without it
# (admission_test.rego).
#
# It never calls a builtin that can fail on a malformed value before a type check, so with
# strict builtin errors a malformed input still yields violations, not an error. Type
# checks of several numbers at once use Rego's total order: null < booleans < numbers <
# strings < arrays < objects, so min(xs) >= 0 and max(xs) < "" hold exactly when every x
# is a number >= 0.
#
# Every violations body references _canonical. OPA consults a rule's index on EACH
# reference before using its cached value, and the index of a body full of equalities on
# input is costly to consult, so the 19 references go through this index-free alias and the
# body is looked up once.
_canonical if _canonical_input

_canonical_input if {
	cfg := _cfg
	docker := cfg.docker
	sandbox := input.sandbox
	node := input.node
	job := input.job
	[group] := job.TaskGroups
	[task] := group.Tasks
	config := task.Config
	used := input.budget.used
	limits := input.budget.limits

	# The facts, gathered (a missing one makes its unification, and so the path, fail).
	[now, id, created, ceiling, name, attributes] := [
		input.now, sandbox.id, sandbox.created_at, sandbox.ceiling_at,
		node.name, node.attributes,
	]
	profile := cfg.profiles[sandbox.profile]
	network := cfg.networks[sandbox.network]
	[job_type, priority, cpu, memory, pids_limit, image, runtime, ulimits, mounts] := [
		job.Type, job.Priority, task.Resources.CPU, task.Resources.MemoryMB,
		config.pids_limit, config.image, config.runtime, config.ulimit, config.mount,
	]
	[used_sandboxes, used_cpu, used_memory, max_sandboxes, limit_cpu, limit_memory] := [
		used.sandboxes, used.cpu_mhz, used.memory_mb,
		limits.max_sandboxes, limits.cpu_mhz, limits.memory_mb,
	]
	[memory_percent, disk_percent] := [node.usage.memory_percent, node.usage.disk_percent]

	# INPUT: the sections are objects (the references above are only defined on objects),
	# known profile and network, numeric now and times, string sandbox id, non-empty node
	# name. B1: every budget figure a non-negative number. P3: usage figures are numbers.
	min([now, created, ceiling]) >= 0
	max([now, created, ceiling]) < ""
	is_string(id)
	is_string(name)
	not name == ""
	min([used_sandboxes, used_cpu, used_memory, max_sandboxes, limit_cpu, limit_memory]) >= 0
	max([used_sandboxes, used_cpu, used_memory, max_sandboxes, limit_cpu, limit_memory]) < ""
	min([memory_percent, disk_percent]) >= 0
	max([memory_percent, disk_percent]) < ""

	# H9: ID = prefix + sandbox id, Name = ID, meta, id pattern, the renderer's one label map.
	job.ID == concat("", [cfg.prefix, id])
	job.Name == job.ID
	job.Meta["sandgate.sandbox_id"] == id
	config.labels == [{"sandgate.sandbox_id": id}]
	regex.match(cfg.sandbox_id_pattern, id)

	# The fixed facts, one object.subset per level against a constant object (every key
	# present with exactly this value, nested objects recursively; no arrays here: subset
	# treats them as subsequences), then the data-driven names and modes. Absent keys fail,
	# so inputs that omit null fields take the slow path.
	# H1: not periodic, parameterized or multiregion; Count 1; names; docker driver; no
	# lifecycle hook; privileged false. H3: init, private IPC, hard CPU limit, no
	# MemoryMaxMB. H4: identity hidden; no Consul/Vault namespace, identities, Vault, Consul,
	# templates, artifacts or secrets. H5: no Nomad volumes or devices. H6: the profile's
	# readonly_rootfs. H7: no services or Nomad networks; the network's mode. H8: sleep.
	# R1: no job Reschedule, no restart or reschedule. B2: no cores. P1: no constraints on
	# the group or the task. P2: control_plane false. P3: ready, eligible, not draining,
	# active.
	object.subset(job, {
		"Periodic": null, "ParameterizedJob": null, "Multiregion": null,
		"ConsulNamespace": null, "VaultNamespace": null, "Reschedule": null,
	})
	object.subset(group, {
		"Count": 1,
		"RestartPolicy": {"Attempts": 0}, "ReschedulePolicy": {"Attempts": 0, "Unlimited": false},
		"Consul": null, "Volumes": null, "Services": null, "Networks": null, "Constraints": null,
	})
	object.subset(task, {
		"Lifecycle": null, "RestartPolicy": null, "Identities": null, "Vault": null,
		"Consul": null, "Templates": null, "Artifacts": null, "Secrets": null,
		"VolumeMounts": null, "Services": null, "Constraints": null,
		"Identity": {"Env": false, "File": false},
		"Resources": {"Cores": null, "MemoryMaxMB": null, "Devices": null, "Networks": null},
		"Config": {
			"privileged": false, "init": true, "ipc_mode": "private", "cpu_hard_limit": true,
			"command": "sleep",
		},
	})
	group.Name == cfg.job.group_name
	task.Name == cfg.job.task_name
	task.Driver == cfg.job.driver
	config.network_mode == network.network_mode
	object.get(config, "dns_servers", null) == object.get(network, "dns_servers", null)
	config.readonly_rootfs == profile.readonly_rootfs
	object.subset(node, {
		"control_plane": false, "status": "ready", "eligibility": "eligible",
		"drain": false, "operator_state": "active",
	})

	# H1: allowed job type. R1: priority in [1, ceiling - 1]. B2: CPU and memory in range.
	# H3: pids_limit in range. H11: allowlisted image. H10: a runtime allowed for every
	# network (stricter than the checks).
	job_type in cfg.job.types
	priority >= 1
	priority <= cfg.priority.ceiling - 1
	cpu >= cfg.sandbox.min_cpu_mhz
	cpu <= cfg.sandbox.max_cpu_mhz
	memory >= cfg.sandbox.min_memory_mb
	memory <= cfg.sandbox.max_memory_mb
	pids_limit >= 1
	pids_limit <= docker.pids_limit_max
	image in cfg.images.allowed
	runtime in cfg.runtimes.allowed
	runtime in cfg.runtimes.egress_allowed

	# H1 (docker): cap_drop ALL, cap_add none or exactly the profile's; only reviewed keys,
	# and none of the host access (H5) or network (H7) keys. H2, H10: security_opt exactly
	# the required list, none of it forbidden. H8: no entrypoint; sleep exactly until the
	# ceiling (at least 1 s).
	config.cap_drop == ["ALL"]
	object.get(config, "cap_add", []) in {[], profile.cap_add}
	count(object.remove(config, docker.allowed_config_keys)) == 0
	count(object.filter(config, array.concat(docker.host_access_keys, docker.network_keys))) == 0
	config.security_opt == docker.required_security_opt
	not strings.any_prefix_match(config.security_opt, docker.forbidden_security_opt_prefixes)
	object.get(config, "entrypoint", null) == null
	sleep := min([cfg.lifetime.ceiling_seconds, ceiling - created])
	sleep >= 1
	config.args == [format_int(sleep, 10)]

	# H3: ulimit a list of exactly one map (the docker driver's list(map(string))) holding
	# exactly the capped keys, each "N:N" with N <= its maximum.
	[ulimit] := ulimits
	is_object(ulimit)
	object.keys(ulimit) == object.keys(docker.ulimit_max)
	count([ulimit_name |
		some ulimit_name, max in docker.ulimit_max
		value := ulimit[ulimit_name]
		is_string(value)
		[soft, hard] := split(value, ":")
		soft == hard
		regex.match(`^[0-9]{1,9}$`, hard)
		to_number(hard) <= max
	]) == count(docker.ulimit_max)

	# H5, H6: one plain tmpfs mount per docker.tmpfs area: as many mounts as areas, and as
	# many distinct targets among the mounts that are exactly {type, target, readonly
	# false, tmpfs_options {size}} with 1 <= size <= the area's max, never docker.sock.
	is_array(mounts)
	count(mounts) == count(docker.tmpfs)
	count({target |
		some m in mounts
		target := m.target
		size := m.tmpfs_options.size
		m == {"type": "tmpfs", "target": target, "readonly": false, "tmpfs_options": {"size": size}}
		size >= 1
		size <= docker.tmpfs[target].max_mb * 1048576
		not contains(target, "docker.sock")
	}) == count(mounts)

	# INPUT: Nomad's own mounts are listed, each {target: string, host_disk: boolean}.
	# H5: a positive task-dir quota bounds them, and the group's ephemeral disk declares
	# exactly that quota, neither sticky nor migrated.
	nomad_mounts := input.nomad_mounts
	is_array(nomad_mounts)
	count([m | some m in nomad_mounts; is_string(m.target); is_boolean(m.host_disk)]) == count(nomad_mounts)
	quota := docker.task_dirs.quota_mb
	quota >= 1
	quota < ""
	group.EphemeralDisk == {"SizeMB": quota, "Sticky": false, "Migrate": false}

	# INPUT, B3: a principal with a string role and a live count, within its quota.
	principal := input.principal
	is_string(principal.role)
	principal.live_sandboxes >= 0
	principal.live_sandboxes < ""
	_principal_room(principal.role, principal.live_sandboxes, object.get(principal, "max_live_sandboxes", null))

	# B1: this sandbox fits the node's budget.
	used_sandboxes + 1 <= max_sandboxes
	used_cpu + cpu <= limit_cpu
	used_memory + memory <= limit_memory

	# P1: exactly the renderer's three job constraints for this node; node enrolled and
	# of an allowed OS and architecture.
	job.Constraints == [
		{"LTarget": "${attr.kernel.name}", "RTarget": attributes["kernel.name"], "Operand": "="},
		{"LTarget": "${attr.cpu.arch}", "RTarget": attributes["cpu.arch"], "Operand": "="},
		{"LTarget": "${node.unique.name}", "RTarget": name, "Operand": "="},
	]
	node.enrollment in cfg.placement.enrollments
	attributes["kernel.name"] in cfg.placement.allowed_os
	attributes["cpu.arch"] in cfg.placement.allowed_architectures

	# P2: no control-plane meta indicator or listed name. P3: usage below the thresholds.
	# I5: the network is allowed by the node's enrollment.
	count(nodes.control_plane_reasons(node)) == 0
	memory_percent < cfg.thresholds.refuse_create_memory_percent
	disk_percent < cfg.thresholds.refuse_create_disk_percent
	_network_enrollment_ok
}
