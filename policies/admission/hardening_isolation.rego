package sandgate.admission

import data.sandgate.config as cfg
import future.keywords.not

# Container hardening, part 2: what the sandbox can reach. H4 (no identity or secrets),
# H5 (no host access), H6 (tmpfs work areas, read-only root), H7 (no services, ports or
# host networking). See admission.rego for how the rules are written.

# --- H4: no workload identity, secrets, Vault, Consul or templates ---------------------

# METADATA
# title: No secrets, Vault, Consul or templates
# description: >-
#   The task must not set Identities, Vault, Consul, Templates, Artifacts or Secrets, the
#   group must not set Consul, and the job must not set ConsulNamespace or
#   VaultNamespace: each of those brings credentials, secrets or remote content into the
#   sandbox.
# custom:
#   id: H4
#   severity: critical
violations contains {"rule": "H4", "msg": sprintf("%v%v must not be set", [part, field])} if {
	table := {
		"job ": {"ConsulNamespace": null, "VaultNamespace": null},
		"task group ": {"Consul": null},
		"task ": {"Identities": null, "Vault": null, "Consul": null, "Templates": null, "Artifacts": null, "Secrets": null},
	}
	not object.subset(_parts, table)
	some part, fields in table
	some field, _ in fields
	not _part_field(part, field) in {null, "", [], {}}
}

# METADATA
# title: No workload identity in the sandbox
# description: >-
#   The task Identity must be present with Env false and File false: the workload
#   identity JWT would let the sandbox authenticate to Nomad, Vault or Consul as this job.
# custom:
#   id: H4
#   severity: critical
violations contains {"rule": "H4", "msg": "task Identity must set Env false and File false"} if not {
	identity := input.job.TaskGroups[0].Tasks[0].Identity
	is_object(identity)
	object.subset(identity, {"Env": false, "File": false})
}

# --- H5: no host paths, volumes, devices or Docker socket; Nomad's own mounts under a quota
#
# Each of those shares a host path, device, namespace or volume with the container, and
# the Docker socket is root on the host.

# METADATA
# title: No docker config key gives host access
# description: >-
#   No docker.host_access_keys key (volumes, mounts, devices, pid_mode, userns_mode,
#   sysctl, ...) may appear, whatever its value.
# custom:
#   id: H5
#   severity: critical
violations contains {"rule": "H5", "msg": sprintf("docker config keys %v give host access", [sort(object.keys(keys))])} if {
	config := input.job.TaskGroups[0].Tasks[0].Config
	is_object(config)
	keys := object.filter(config, cfg.docker.host_access_keys)
	keys != {}
}

# METADATA
# title: The host access keys are in policy data
# description: >-
#   docker.host_access_keys must be a list: without it no docker config key can be judged
#   for host access.
# custom:
#   id: H5
#   severity: critical
violations contains {"rule": "H5", "msg": "policy data docker.host_access_keys must be a list: without it no docker config key can be judged for host access"} if {
	not is_array(cfg.docker.host_access_keys)
}

# METADATA
# title: mount is a list
# description: >-
#   The docker config's mount must be a list, or absent.
# custom:
#   id: H5
#   severity: critical
violations contains {"rule": "H5", "msg": "docker config mount must be a list"} if {
	mount := input.job.TaskGroups[0].Tasks[0].Config.mount
	mount != null
	not is_array(mount)
}

# mount as rendered, when it is a list (H5 and H6 fire otherwise).
_mounts := m if {
	m := input.job.TaskGroups[0].Tasks[0].Config.mount
	is_array(m)
}

# METADATA
# title: Every mount is an object
# description: >-
#   Every entry of mount must be an object.
# custom:
#   id: H5
#   severity: critical
violations contains {"rule": "H5", "msg": sprintf("mount %v must be an object", [i])} if {
	some i, m in _mounts
	not is_object(m)
}

# METADATA
# title: Every mount is a tmpfs
# description: >-
#   Every mount must be of type "tmpfs": a bind or volume mount shares the host's disk.
# custom:
#   id: H5
#   severity: critical
violations contains {"rule": "H5", "msg": sprintf("mount %v must be of type tmpfs, got %v", [i, object.get(m, "type", null)])} if {
	some i, m in _mounts
	is_object(m)
	not m.type == "tmpfs"
}

# METADATA
# title: Every mount targets a tmpfs work area
# description: >-
#   Every mount must target a docker.tmpfs area (/workspace, /tmp).
# custom:
#   id: H5
#   severity: critical
violations contains {"rule": "H5", "msg": sprintf("mount %v target %v is not a tmpfs work area", [i, object.get(m, "target", null)])} if {
	some i, m in _mounts
	is_object(m)
	not cfg.docker.tmpfs[m.target]
}

# METADATA
# title: No mount has a source
# description: >-
#   No mount may have a source: a tmpfs has none, anything else is a host path or volume.
# custom:
#   id: H5
#   severity: critical
violations contains {"rule": "H5", "msg": sprintf("mount %v must not have a source", [i])} if {
	some i, m in _mounts
	source := m.source
	not source in {null, "", [], {}}
}

# METADATA
# title: No mount reaches the Docker socket
# description: >-
#   No value of a mount may contain docker.sock: the Docker socket is root on the host.
# custom:
#   id: H5
#   severity: critical
violations contains {"rule": "H5", "msg": sprintf("mount %v refers to the Docker socket", [i])} if {
	some i, m in _mounts
	some value in m
	is_string(value)
	contains(value, "docker.sock")
}

# METADATA
# title: No volumes or devices
# description: >-
#   The task must not set VolumeMounts or Resources.Devices, nor the group Volumes.
# custom:
#   id: H5
#   severity: critical
violations contains {"rule": "H5", "msg": sprintf("%v%v must not be set", [part, field])} if {
	table := {"task group ": {"Volumes": null}, "task ": {"VolumeMounts": null}, "task Resources.": {"Devices": null}}
	not object.subset(_parts, table)
	some part, fields in table
	some field, _ in fields
	not _part_field(part, field) in {null, "", [], {}}
}

# Nomad's own mounts that live on the node's disk, when input.nomad_mounts is a list
# (INPUT fires otherwise).
_host_disk_mounts := sort([m.target | some m in input.nomad_mounts; m.host_disk == true])

_task_dir_quota := q if {
	q := cfg.docker.task_dirs.quota_mb
	is_number(q)
	q > 0
}

# METADATA
# title: Nomad's mounts on the node's disk are under a quota
# description: >-
#   Nomad itself bind-mounts task directories into every task (input.nomad_mounts: /alloc
#   and /local from the node's disk, read-write and executable, /secrets a 1 MiB tmpfs);
#   no job setting can remove or cap them. When one of them is on the host's disk,
#   docker.task_dirs.quota_mb must be a positive number: the usage monitor ends a sandbox
#   past it (see the reclaim decision).
# custom:
#   id: H5
#   severity: critical
violations contains {"rule": "H5", "msg": sprintf("Nomad mounts %v from the node's disk into the task and docker.task_dirs.quota_mb is not a positive number: nothing would bound them", [_host_disk_mounts])} if {
	not _task_dir_quota
	count(_host_disk_mounts) > 0
}

# METADATA
# title: The group declares the task-directory quota as its disk
# description: >-
#   The group's EphemeralDisk must declare exactly docker.task_dirs.quota_mb, not sticky
#   and not migrated: Nomad schedules by it, and a larger figure would reserve node disk
#   that managed jobs then cannot get.
# custom:
#   id: H5
#   severity: critical
violations contains {"rule": "H5", "msg": sprintf("task group EphemeralDisk must be {SizeMB: %v, Sticky: false, Migrate: false} (docker.task_dirs.quota_mb), got %v", [quota, object.get(group, "EphemeralDisk", null)])} if {
	quota := _task_dir_quota
	group := input.job.TaskGroups[0]
	is_object(group)
	not group.EphemeralDisk == {"SizeMB": quota, "Sticky": false, "Migrate": false}
}

# --- H6: size-capped tmpfs work areas, read-only root in strict ------------------------

# METADATA
# title: Each tmpfs work area is mounted once
# description: >-
#   Every docker.tmpfs area (/workspace, /tmp) must be mounted exactly once: the sandbox
#   writes to capped memory, never to the node's disk, which Nomad does not cap.
# custom:
#   id: H6
#   severity: medium
violations contains {"rule": "H6", "msg": sprintf("tmpfs %v must be mounted exactly once, found %v", [target, n])} if {
	some target, _ in cfg.docker.tmpfs
	n := count([m | some m in _mounts; m.target == target])
	n != 1
}

# METADATA
# title: Each tmpfs work area is size-capped
# description: >-
#   Every mount at a docker.tmpfs target must set tmpfs_options.size in bytes, above 0
#   and at most the area's max_mb.
# custom:
#   id: H6
#   severity: medium
violations contains {"rule": "H6", "msg": sprintf("tmpfs %v must set tmpfs_options.size in [1, %v] bytes", [m.target, _tmpfs_max_bytes(area)])} if {
	some m in _mounts
	area := cfg.docker.tmpfs[m.target]
	not {
		size := m.tmpfs_options.size
		size >= 1
		is_number(area.max_mb)
		size <= area.max_mb * 1048576 # MiB to bytes: sizes are rendered in bytes
	}
}

# An area's cap in bytes for a message; null when policy data lacks a numeric max_mb (every
# size is then refused).
_tmpfs_max_bytes(area) := bytes if {
	is_number(area.max_mb)
	bytes := area.max_mb * 1048576
} else := null

# METADATA
# title: Read-only root in strict
# description: >-
#   readonly_rootfs must be true when profiles.<profile>.readonly_rootfs is true (strict),
#   and otherwise true, false or absent: a writable root lets a strict sandbox alter its
#   own binaries.
# custom:
#   id: H6
#   severity: medium
violations contains {"rule": "H6", "msg": sprintf("docker config readonly_rootfs %v is not allowed for profile %v", [_config_value("readonly_rootfs"), _sandbox_value("profile")])} if {
	not input.job.TaskGroups[0].Tasks[0].Config.readonly_rootfs == true
	not {
		cfg.profiles[input.sandbox.profile].readonly_rootfs == false
		config := input.job.TaskGroups[0].Tasks[0].Config
		is_object(config)
		object.get(config, "readonly_rootfs", false) == false
	}
}

# --- H7: no services, ports or host networking -----------------------------------------

# METADATA
# title: No services or Nomad networks
# description: >-
#   Neither the group nor the task may declare Services (with their tags and checks: a
#   registered service advertises the sandbox and can hook it into Consul service mesh);
#   the group must not set Networks nor the task Resources.Networks (Nomad networks
#   allocate ports and select host or bridge mode).
# custom:
#   id: H7
#   severity: critical
violations contains {"rule": "H7", "msg": sprintf("%v%v must not be set", [part, field])} if {
	table := {
		"task group ": {"Services": null, "Networks": null},
		"task ": {"Services": null},
		"task Resources.": {"Networks": null},
	}
	not object.subset(_parts, table)
	some part, fields in table
	some field, _ in fields
	not _part_field(part, field) in {null, "", [], {}}
}

# METADATA
# title: No docker config key opens ports or names hosts
# description: >-
#   No docker.network_keys key (ports, port_map, extra_hosts, dns_search_domains,
#   hostname ...) may appear.
# custom:
#   id: H7
#   severity: critical
violations contains {"rule": "H7", "msg": sprintf("docker config keys %v are not allowed", [sort(object.keys(keys))])} if {
	config := input.job.TaskGroups[0].Tasks[0].Config
	is_object(config)
	keys := object.filter(config, cfg.docker.network_keys)
	keys != {}
}

# METADATA
# title: The network keys are in policy data
# description: >-
#   docker.network_keys must be a list: without it no docker config key can be judged
#   for networking.
# custom:
#   id: H7
#   severity: critical
violations contains {"rule": "H7", "msg": "policy data docker.network_keys must be a list: without it no docker config key can be judged for networking"} if {
	not is_array(cfg.docker.network_keys)
}

# METADATA
# title: The network mode is the sandbox network's
# description: >-
#   network_mode must equal networks.<network>.network_mode ("none", or the egress
#   bridge): never host, bridge, container:<id> or another network.
# custom:
#   id: H7
#   severity: critical
violations contains {"rule": "H7", "msg": sprintf("docker config network_mode %v is not the mode of network %v", [_config_value("network_mode"), _sandbox_value("network")])} if {
	not input.job.TaskGroups[0].Tasks[0].Config.network_mode == cfg.networks[input.sandbox.network].network_mode
}

# METADATA
# title: The resolvers are the sandbox network's
# description: >-
#   dns_servers must be exactly networks.<network>.dns_servers (the public resolvers the
#   isolation bundle lets through), or absent for a network that has none: a sandbox
#   never resolves names through a resolver inside the cluster.
# custom:
#   id: H7
#   severity: critical
violations contains {"rule": "H7", "msg": sprintf("docker config dns_servers %v are not the resolvers of network %v (%v)", [_config_value("dns_servers"), _sandbox_value("network"), _network_dns])} if not {
	config := input.job.TaskGroups[0].Tasks[0].Config
	is_object(config)
	object.get(config, "dns_servers", null) == _network_dns
}

# The network's resolvers, or null when it has none.
_network_dns := object.get(cfg.networks[input.sandbox.network], "dns_servers", null)
