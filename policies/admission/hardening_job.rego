package sandgate.admission

import data.sandgate.config as cfg
import future.keywords.not

# Container hardening, part 3: what runs and under which name. H8 (the container only
# sleeps until the lifetime ceiling), H9 (prefixed, matching names). See admission.rego
# for how the rules are written.

# --- H8: the container only sleeps until the lifetime ceiling --------------------------
#
# The container only keeps itself alive (all work enters through the gateway's audited
# exec path) and stops itself at the ceiling even if the gateway and its reaper are down.

# METADATA
# title: The container only sleeps
# description: >-
#   command must be "sleep": all work enters through the gateway's audited exec path.
# custom:
#   id: H8
#   severity: medium
violations contains {"rule": "H8", "msg": "docker config command must be sleep"} if {
	not input.job.TaskGroups[0].Tasks[0].Config.command == "sleep"
}

# METADATA
# title: The image's entrypoint is not used
# description: >-
#   entrypoint must not be set: it would run something else than the sleep.
# custom:
#   id: H8
#   severity: medium
violations contains {"rule": "H8", "msg": "docker config entrypoint must not be set"} if {
	entrypoint := input.job.TaskGroups[0].Tasks[0].Config.entrypoint
	not entrypoint in {null, "", [], {}}
}

# The sleep length in seconds, when args is exactly one positive decimal string.
_sleep_seconds := to_number(s) if {
	[s] := input.job.TaskGroups[0].Tasks[0].Config.args
	is_string(s)
	regex.match(`^[1-9][0-9]*$`, s)
}

# METADATA
# title: The sleep is a number of seconds
# description: >-
#   args must be exactly one string of decimal digits: no "4h", "infinity" or extra
#   arguments.
# custom:
#   id: H8
#   severity: medium
violations contains {"rule": "H8", "msg": "docker config args must be exactly one positive integer string (seconds)"} if {
	not _sleep_seconds
}

# METADATA
# title: The sleep ends at the lifetime ceiling
# description: >-
#   The sleep must not exceed lifetime.ceiling_seconds nor sandbox.ceiling_at -
#   sandbox.created_at: the container stops itself at the ceiling even if the gateway and
#   its reaper are down.
# custom:
#   id: H8
#   severity: medium
violations contains {"rule": "H8", "msg": sprintf("sleep of %v seconds outlives the lifetime ceiling", [n])} if {
	n := _sleep_seconds
	not {
		created := input.sandbox.created_at
		ceiling := input.sandbox.ceiling_at
		is_number(created)
		is_number(ceiling)
		n <= min([cfg.lifetime.ceiling_seconds, ceiling - created])
	}
}

# --- H9: the job is named after its sandbox, with the sandbox prefix --------------------
#
# The record, the session token and the Nomad job name the same sandbox, or destroy and
# the reaper would act on another job.

# METADATA
# title: The job's names carry the sandbox prefix
# description: >-
#   ID and Name must start with the configured prefix: the gateway only stops and purges
#   prefixed jobs, so an unprefixed job escapes reaping.
# custom:
#   id: H9
#   severity: high
violations contains {"rule": "H9", "msg": sprintf("job %v must start with %v", [field, _data_value(["prefix"])])} if {
	some field in ["ID", "Name"]
	not {
		name := input.job[field]
		is_string(name)
		startswith(name, cfg.prefix)
	}
}

_expected_job_id := concat("", [cfg.prefix, id]) if {
	id := input.sandbox.id
	is_string(id)
}

# METADATA
# title: The job's ID is the sandbox's
# description: >-
#   ID must equal the prefix followed by sandbox.id.
# custom:
#   id: H9
#   severity: high
violations contains {"rule": "H9", "msg": sprintf("job ID %v must be %v", [_job_value("ID"), _expected_job_id_value])} if {
	not input.job.ID == _expected_job_id
}

_expected_job_id_value := v if {
	v := _expected_job_id
} else := null

# METADATA
# title: The job's Name is its ID
# description: >-
#   Name must equal ID.
# custom:
#   id: H9
#   severity: high
violations contains {"rule": "H9", "msg": "job Name must equal job ID"} if not input.job.Name == input.job.ID

# METADATA
# title: The sandbox id is well formed
# description: >-
#   sandbox.id must match sandbox_id_pattern: odd characters have let jobs skip admission
#   in peer projects.
# custom:
#   id: H9
#   severity: high
violations contains {"rule": "H9", "msg": sprintf("sandbox id %v does not match %v", [_sandbox_value("id"), _data_value(["sandbox_id_pattern"])])} if not {
	id := input.sandbox.id
	is_string(id)
	regex.match(cfg.sandbox_id_pattern, id)
}

# METADATA
# title: The job's meta names its sandbox
# description: >-
#   Meta["sandgate.sandbox_id"] must equal sandbox.id: reconciliation (L4) uses it to map
#   jobs back to records.
# custom:
#   id: H9
#   severity: high
violations contains {"rule": "H9", "msg": "job Meta sandgate.sandbox_id must equal the sandbox id"} if {
	not input.job.Meta["sandgate.sandbox_id"] == input.sandbox.id
}

# METADATA
# title: labels have the shape the docker driver reads
# description: >-
#   The docker config labels, when set (not absent or null), must be a list of exactly
#   one map of strings, the shape the docker driver requires: an object registers but
#   fails the task at start, and Nomad merges the maps of a longer list.
# custom:
#   id: H9
#   severity: high
violations contains {"rule": "H9", "msg": "docker config labels must be a list of exactly one map of strings"} if {
	labels := input.job.TaskGroups[0].Tasks[0].Config.labels
	labels != null
	not {
		[map] := labels
		_string_map(map)
	}
}
