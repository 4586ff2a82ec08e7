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
# Each rule id has exactly one annotated `violations` body, and its checks sit right below
# it, in the same file, written once. A rule with several checks collects their messages
# in a helper set named after it:
#
#     violations contains {"rule": "H3", "msg": msg} if some msg in _h3
#
#     _h3 contains "docker config pids_limit must be ..." if not {
#         pids := input.job.TaskGroups[0].Tasks[0].Config.pids_limit
#         ...
#     }
#
# A check is a body that holds when the check FAILS; its message is built only then.
# Fields that must hold fixed values (or be unset) are one table per rule, tested as a
# whole by one object.subset call and taken apart only when that fails (see _parts and
# _table_failures below).
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
# them. A table is {part: {field: want}}: want null means the field must be unset
# (absent, null, "", [] or {}: Go marshals nil pointers, slices and maps as null, and a
# hand-built input may omit them or leave them empty); an object means the field must be
# an object holding those members; anything else means the field must equal want.
#
# The check `object.subset(<the parts>, table)` holds for every job the renderer emits: it
# needs the members present (a rendered job carries null for an unset field) and equal, so
# it is never looser than the table. Only when it fails does _table_failures name the
# fields that actually break the table, which is what the rule reports.
_parts := {
	"job ": input.job,
	"task group ": input.job.TaskGroups[0],
	"task ": input.job.TaskGroups[0].Tasks[0],
	"task Resources.": input.job.TaskGroups[0].Tasks[0].Resources,
	"docker config ": input.job.TaskGroups[0].Tasks[0].Config,
}

# The messages for the fields of table that break it.
_table_failures(table) := {msg |
	some part, fields in table
	some field, want in fields
	value := _part_field(part, field)
	not _table_match(value, want)
	msg := concat("", [part, field, _table_requirement(want)])
}

_part_field(part, field) := v if {
	v := _part(part)[field]
} else := null

_part("job ") := input.job

_part("task group ") := input.job.TaskGroups[0]

_part("task ") := input.job.TaskGroups[0].Tasks[0]

_part("task Resources.") := input.job.TaskGroups[0].Tasks[0].Resources

_part("docker config ") := input.job.TaskGroups[0].Tasks[0].Config

_table_match(value, null) if value in {null, "", [], {}}

_table_match(value, want) if {
	is_object(want)
	is_object(value)
	object.subset(value, want)
}

_table_match(value, want) if {
	want != null
	not is_object(want)
	value == want
}

_table_requirement(null) := " must not be set"

_table_requirement(want) := concat("", [" must set ", concat(" and ", [sprintf("%s %v", [k, v]) | some k, v in want])]) if {
	is_object(want)
}

_table_requirement(want) := sprintf(" must be %v", [want]) if {
	want != null
	not is_object(want)
}

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

# METADATA
# title: Admission input is complete and well formed
# description: >-
#   The input must be an object carrying the job, node, budget, sandbox and principal
#   objects, the current time (now), the sandbox id (a string), a profile and a network
#   known to data.sandgate.config, numeric created_at and ceiling_at, a non-empty node
#   name, a principal with a string role and a non-negative live_sandboxes count, and
#   nomad_mounts: the list of mounts Nomad adds to every task, each with a string target
#   and a boolean host_disk (H5 needs them to judge the task-directory quota). In Rego a
#   comparison with a missing value is undefined rather than false, so a missing fact could
#   silently skip a check: this rule makes every such gap a denial (fail closed). Missing
#   budget figures are refused by B1.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": msg} if some msg in _input

_input contains "input must be an object" if not is_object(input)

_input contains sprintf("input.%s must be an object", [k]) if {
	some k in ["job", "node", "budget", "sandbox", "principal"]
	not is_object(input[k])
}

_input contains "input.now must be a number (unix seconds)" if not is_number(input.now)

_input contains "input.sandbox.id must be a string" if not is_string(input.sandbox.id)

_input contains sprintf("input.sandbox.profile %v is not a known profile", [_sandbox_value("profile")]) if {
	not cfg.profiles[input.sandbox.profile]
}

_input contains sprintf("input.sandbox.network %v is not a known network", [_sandbox_value("network")]) if {
	not cfg.networks[input.sandbox.network]
}

_input contains "input.sandbox.created_at must be a number (unix seconds)" if {
	not is_number(input.sandbox.created_at)
}

_input contains "input.sandbox.ceiling_at must be a number (unix seconds)" if {
	not is_number(input.sandbox.ceiling_at)
}

_input contains "input.node.name must be a non-empty string" if not {
	is_string(input.node.name)
	input.node.name != ""
}

_input contains "input.principal needs role (a string) and live_sandboxes (a non-negative number)" if {
	is_object(input.principal)
	not {
		is_string(input.principal.role)
		is_number(input.principal.live_sandboxes)
		input.principal.live_sandboxes >= 0
	}
}

_input contains "input.nomad_mounts must list the mounts Nomad adds to the task, each with a string target and a boolean host_disk" if not {
	is_array(input.nomad_mounts)
	every m in input.nomad_mounts {
		is_string(m.target)
		is_boolean(m.host_disk)
	}
}
