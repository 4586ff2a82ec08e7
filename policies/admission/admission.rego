# METADATA
# title: Sandbox job admission
# description: >-
#   Decides whether one rendered Nomad docker job, exactly as the gateway will submit it,
#   may run on one node within that node's budget. Rules are split by theme: input checks
#   and shared helpers here, placement (P1, P2, P3, I5), budget (B1, B2, R1) and the
#   container hardening rules (H1-H11). Every threshold and allowlist is read from
#   data.sandgate.config. Any missing or malformed fact denies (fail closed).
# scope: package
package sandgate.admission

import data.sandgate.lib.modes

# METADATA
# title: Admission decision
# description: >-
#   Allows the job only when no violation fires. Each violation names the rule id that
#   refused (INPUT, P1-P3, B1, B2, R1, H1-H11, I5) and a human-readable message.
# entrypoint: true
decision := modes.decision(violations)

# --- how the rules are written ---------------------------------------------------------
#
# Each rule id has exactly one annotated `violations` body:
#
#     violations contains {"rule": "H1", "msg": msg} if {
#         not _canonical    # fast path (fastpath.rego)
#         some msg in _h1   # the checks: one message per failed check
#     }
#
# _<id> holds every check of the rule, each written to fail closed. _canonical is ONE
# rule that holds only when the input is exactly what the renderer emits for a valid
# sandbox on a healthy node; it is a SUFFICIENT condition for every _<id> being empty, so a
# valid create never evaluates the detailed checks (measured with rego.EvalParsedInput on a
# 2-vCPU EPYC VM: 0.2-0.3 ms for a valid job instead of about 0.55 ms; a denied job, which
# evaluates every check, about 0.7 ms). It may be stricter than the checks (they then
# decide) but never looser: every test compares the decision with and without it.
#
# Negation: OPA evaluates the reference arguments of a call (and of `in`) BEFORE a `not`,
# so `not f(input.x)` is false, not true, when input.x is missing. Negated checks here
# negate a rule, an equality, or a call whose arguments are always defined; lookups that
# may be missing happen inside the helper.

# --- shared helpers --------------------------------------------------------------------

_cfg := data.sandgate.config

# The sandbox's profile and network settings; undefined when unknown (INPUT fires).
_profile := _cfg.profiles[input.sandbox.profile]

_network := _cfg.networks[input.sandbox.network]

# Docker's "no network at all" mode; any other network mode reaches out (egress).
_docker_no_network := "none"

_egress if {
	mode := _network.network_mode
	mode != _docker_no_network
}

# The single task group and its single task: undefined unless there is exactly one of each
# (H1 fires), so that no check ever looks at "some" group while ignoring another.
_group := g if {
	groups := input.job.TaskGroups
	is_array(groups)
	count(groups) == 1
	g := groups[0]
	is_object(g)
}

_task := t if {
	tasks := _group.Tasks
	is_array(tasks)
	count(tasks) == 1
	t := tasks[0]
	is_object(t)
}

# The docker driver configuration when it is an object.
_config := c if {
	c := _task.Config
	is_object(c)
}

# The task resources; empty when missing (B1 and B2 then refuse the missing CPU and memory).
_resources := r if {
	r := _task.Resources
	is_object(r)
} else := {}

# _set(v): v is present with a non-empty value. Go marshals nil pointers, slices and maps
# as null, and a hand-built input may omit them: both count as "not set". Undefined when
# v is undefined, so use it only for things that must NOT be set.
_set(v) if not _blank(v)

_blank(v) if v == null

_blank(v) if v == ""

_blank(v) if v == []

_blank(v) if v == {}

# x is an object whose every value is a string: a Nomad map(string). The docker driver types
# ulimit and labels as list(map(string)) and refuses anything else when the task starts.
_string_map(x) if {
	is_object(x)
	every v in x {
		is_string(v)
	}
}

# x is a number in [low, high] (Rego orders null < booleans < numbers < strings < arrays <
# objects, so the two comparisons with numbers also exclude every other type).
_within(x, low, high) if {
	x >= low
	x <= high
}

# Values for messages, null when absent.
_sandbox_value(k) := v if {
	v := input.sandbox[k]
} else := null

_job_value(k) := v if {
	v := input.job[k]
} else := null

_config_value(k) := v if {
	v := _config[k]
} else := null

# --- INPUT -----------------------------------------------------------------------------

# METADATA
# title: Admission input is complete and well formed
# description: >-
#   The input must be an object carrying the job, node, budget and sandbox objects, the
#   current time (now), the sandbox id (a string), a profile and a network known to
#   data.sandgate.config, numeric created_at and ceiling_at, a non-empty node name, and
#   nomad_mounts: the list of mounts Nomad adds to every task, each with a string target
#   and a boolean host_disk (H5 needs them to judge the task-directory quota). In Rego a comparison with a missing value is undefined rather than false, so a
#   missing fact could silently skip a check: this rule makes every such gap a denial
#   (fail closed). Missing budget figures are refused by B1.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": msg} if {
	not _canonical
	some msg in _input
}

_input contains "input must be an object" if not _input_object

_input_object if is_object(input)

_input contains sprintf("input.%s must be an object", [k]) if {
	some k in ["job", "node", "budget", "sandbox", "principal"]
	not _input_section(k)
}

_input_section(k) if is_object(input[k])

_input contains "input.now must be a number (unix seconds)" if not _now_ok

_now_ok if is_number(input.now)

_input contains "input.sandbox.id must be a string" if not _sandbox_id_string

_sandbox_id_string if is_string(input.sandbox.id)

_input contains sprintf("input.sandbox.profile %v is not a known profile", [_sandbox_value("profile")]) if {
	not _profile
}

_input contains sprintf("input.sandbox.network %v is not a known network", [_sandbox_value("network")]) if {
	not _network
}

_input contains sprintf("input.sandbox.%s must be a number (unix seconds)", [k]) if {
	some k in ["created_at", "ceiling_at"]
	not _sandbox_time(k)
}

_sandbox_time(k) if is_number(input.sandbox[k])

_input contains "input.node.name must be a non-empty string" if not _node_name_ok

_node_name_ok if {
	is_string(input.node.name)
	input.node.name != ""
}

_input contains "input.principal needs role (a string) and live_sandboxes (a non-negative number)" if {
	_input_section("principal")
	not _principal_ok
}

_input contains "input.nomad_mounts must list the mounts Nomad adds to the task, each with a string target and a boolean host_disk" if {
	not _nomad_mounts_ok
}

_nomad_mounts_ok if {
	is_array(input.nomad_mounts)
	every m in input.nomad_mounts {
		is_string(m.target)
		is_boolean(m.host_disk)
	}
}

_principal_ok if {
	is_string(input.principal.role)
	is_number(input.principal.live_sandboxes)
	input.principal.live_sandboxes >= 0
}
