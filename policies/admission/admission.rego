# METADATA
# title: Sandbox job admission
# description: >-
#   Decides whether one rendered Nomad docker job, exactly as the gateway will submit it,
#   may run on one node within that node's budget. Rules are split by theme: the input
#   checks here, placement (P1, P2, P3, I5), budget (B1, B2, B3, R1) and the container
#   hardening rules (H1-H11). Every threshold and allowlist is read from
#   data.sandgate.config. Any missing or malformed fact denies (fail closed).
# scope: package
package sandgate.admission

import data.sandgate.config as cfg
import data.sandgate.lib.modes
import future.keywords.not

# METADATA
# title: Admission decision
# description: >-
#   Allows the job only when no violation fires. Each violation names the rule id that
#   refused (INPUT, P1-P3, B1-B3, R1, H1-H11, I5) and a human-readable message.
# entrypoint: true
decision := modes.decision(violations)

# --- how the rules are written ---------------------------------------------------------
#
# Every check is one `violations` body with its own METADATA, written once, in the
# section of its rule id, and its message is written in its head (docs/policies.md, "How
# a rule words its message"): a string literal, or sprintf with %v when it carries a value.
#
#     violations contains {"rule": "H3", "msg": sprintf("docker config pids_limit must be a number in [1, %v]", [...])} if not {
#         pids := input.job.TaskGroups[0].Tasks[0].Config.pids_limit
#         ...
#     }
#
# A check is a body that holds when the check FAILS; its message is built only then.
# Fields that must hold fixed values (or be unset) are one table per check, tested as a
# whole by one object.subset call and taken apart only when that fails (see _parts below).
#
# Cost: a request pays for every body it enters, every builtin call, every reference to
# data and, most of all, every reference to another rule (about three times an inline
# test), so the checks read the input directly: the task is input.job.TaskGroups[0].Tasks[0]
# (H1 alone judges that there is exactly one group and one task), values are tested where
# they are read, and only the job's own lists are iterated.
#
# Negation: this package imports future.keywords.not, so `not f(input.x)` holds when
# input.x is missing (legacy Rego evaluated the argument first and silently failed the
# whole body), and `not { ... }` negates a whole conjunction in place. Every fact a check
# reads may be missing; a missing one makes the check fail, never pass (fail closed).

# --- shared helpers --------------------------------------------------------------------

# The parts of the job the tables of fixed fields describe, keyed by how messages name
# them. A table is {part: {field: want}}. In a table of unset fields want is null: the
# field must be unset (absent, null, "", [] or {}: Go marshals nil pointers, slices and
# maps as null, and a hand-built input may omit them or leave them empty). In a table of
# fixed fields the field must equal want.
#
# The check `object.subset(<the parts>, table)` holds for every job the renderer emits: it
# needs the members present (a rendered job carries null for an unset field) and equal, so
# it is never looser than the table. Only when it fails does the check take the table
# apart and name each field that actually breaks it.
_parts := {
	"job ": input.job,
	"task group ": input.job.TaskGroups[0],
	"task ": input.job.TaskGroups[0].Tasks[0],
	"task Resources.": input.job.TaskGroups[0].Tasks[0].Resources,
	"docker config ": input.job.TaskGroups[0].Tasks[0].Config,
}

# A field of one of _parts, null when it (or the part) is absent.
_part_field(part, field) := v if {
	v := _part(part)[field]
} else := null

_part("job ") := input.job

_part("task group ") := input.job.TaskGroups[0]

_part("task ") := input.job.TaskGroups[0].Tasks[0]

_part("task Resources.") := input.job.TaskGroups[0].Tasks[0].Resources

_part("docker config ") := input.job.TaskGroups[0].Tasks[0].Config

# x is an object whose every value is a string: a Nomad map(string). The docker driver types
# ulimit and labels as list(map(string)) and refuses anything else when the task starts.
_string_map(x) if {
	is_object(x)
	every v in x {
		is_string(v)
	}
}

# Values for messages, null when absent (only evaluated once a check has failed).
_sandbox_value(k) := v if {
	v := input.sandbox[k]
} else := null

_job_value(k) := v if {
	v := input.job[k]
} else := null

_config_value(k) := v if {
	v := input.job.TaskGroups[0].Tasks[0].Config[k]
} else := null

_resource_value(k) := v if {
	v := input.job.TaskGroups[0].Tasks[0].Resources[k]
} else := null

# A value of policy data for a message, null when data lacks it (the check then fails).
_data_value(path) := object.get(cfg, path, null)

# --- INPUT -----------------------------------------------------------------------------
#
# The input must be an object carrying the job, node, budget, sandbox and principal
# objects and every fact the other rules compare. In Rego a comparison with a missing
# value is undefined rather than false, so a missing fact could silently skip a check:
# these checks make every such gap a denial (fail closed). Missing budget figures are
# refused by B1.

# METADATA
# title: Admission input is an object
# description: >-
#   The input must be an object: every other fact is read from it.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input must be an object"} if not is_object(input)

# METADATA
# title: Admission input carries its sections
# description: >-
#   input.job, input.node, input.budget, input.sandbox and input.principal must be
#   objects: the rendered job, the node it is pinned to, the node's budget, the sandbox
#   record and the principal creating it.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": sprintf("input.%v must be an object", [k])} if {
	some k in ["job", "node", "budget", "sandbox", "principal"]
	not is_object(input[k])
}

# METADATA
# title: Admission input carries the time
# description: >-
#   input.now (unix seconds) must be a number.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input.now must be a number (unix seconds)"} if not is_number(input.now)

# METADATA
# title: The sandbox id is a string
# description: >-
#   input.sandbox.id must be a string: the job's names (H9) are judged against it.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input.sandbox.id must be a string"} if not is_string(input.sandbox.id)

# METADATA
# title: The sandbox names a known profile
# description: >-
#   input.sandbox.profile must be a key of data.sandgate.config.profiles: the capabilities
#   (H1), tmpfs areas and read-only root (H6) are judged by it.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": sprintf("input.sandbox.profile %v is not a known profile", [_sandbox_value("profile")])} if {
	not cfg.profiles[input.sandbox.profile]
}

# METADATA
# title: The sandbox names a known network
# description: >-
#   input.sandbox.network must be a key of data.sandgate.config.networks: the network
#   mode and resolvers (H7), the runtime (H10) and the node's enrollment (I5) are judged
#   by it.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": sprintf("input.sandbox.network %v is not a known network", [_sandbox_value("network")])} if {
	not cfg.networks[input.sandbox.network]
}

# METADATA
# title: The sandbox carries its creation time
# description: >-
#   input.sandbox.created_at (unix seconds) must be a number: the container's sleep (H8)
#   is bounded by it.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input.sandbox.created_at must be a number (unix seconds)"} if {
	not is_number(input.sandbox.created_at)
}

# METADATA
# title: The sandbox carries its lifetime ceiling
# description: >-
#   input.sandbox.ceiling_at (unix seconds) must be a number: the container's sleep (H8)
#   is bounded by it.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input.sandbox.ceiling_at must be a number (unix seconds)"} if {
	not is_number(input.sandbox.ceiling_at)
}

# METADATA
# title: The node has a name
# description: >-
#   input.node.name must be a non-empty string: the job's pin (P1) names it.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input.node.name must be a non-empty string"} if not {
	is_string(input.node.name)
	input.node.name != ""
}

# METADATA
# title: The principal carries its role and live sandboxes
# description: >-
#   input.principal must carry role (a string) and live_sandboxes (a non-negative
#   number): an agent's quota (B3) is judged on them.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input.principal needs role (a string) and live_sandboxes (a non-negative number)"} if {
	is_object(input.principal)
	not {
		is_string(input.principal.role)
		is_number(input.principal.live_sandboxes)
		input.principal.live_sandboxes >= 0
	}
}

# METADATA
# title: The input lists Nomad's own mounts
# description: >-
#   input.nomad_mounts must list the mounts Nomad adds to every task, each with a string
#   target and a boolean host_disk: H5 needs them to judge the task-directory quota.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input.nomad_mounts must list the mounts Nomad adds to the task, each with a string target and a boolean host_disk"} if not {
	is_array(input.nomad_mounts)
	every m in input.nomad_mounts {
		is_string(m.target)
		is_boolean(m.host_disk)
	}
}
