# METADATA
# title: Sandbox lifecycle actions
# description: >-
#   Decides every change the gateway makes to a sandbox outside a client's request
#   path or on its behalf: ending a sandbox (destroy, expiry, a failed start, a job that
#   vanished) and purging a Nomad job (the sandbox's own, or an orphan found by
#   reconciliation). The gateway asks before it purges or ends anything; a deny leaves
#   the job and the record untouched and is logged. Rules: INPUT, H9 (only sandbox
#   jobs are purged), L1 (only due sandboxes are reaped), L3 (an end purges the job,
#   revokes the token and releases the budget), L4 (reconciliation purges only jobs with
#   no live record and ends only records whose job is gone), B4 (an end releases exactly
#   the budget a live sandbox holds).
# scope: package
package sandgate.lifecycle

import data.sandgate.config as cfg
import future.keywords.not

# METADATA
# title: Lifecycle decision
# description: >-
#   Allows the action only when no violation fires. Each violation names the rule id that
#   refused (INPUT, H9, L1, L3, L4, B4) and a message.
# entrypoint: true
decision := {"allow": count(violations) == 0, "violations": violations}

# --- shared helpers --------------------------------------------------------------------
#
# Negation: this module imports future.keywords.not, like every module of the bundle,
# so `not <expr>` holds whenever <expr> does not, a missing fact included
# (docs/policies.md, "One meaning of `not`").

_live_states := {"starting", "running"}

# The reasons each action may give, and what each reason means:
#   destroyed          a client's DELETE (authz decided who may)
#   expired            the reaper: past expires_at or ceiling_at (L1)
#   job_missing        reconcile: the record is live but Nomad has no job (L4)
#   placement_failed, register_failed, placement_unknown, start_timeout
#                      a create that did not start
#   record_failed      a create whose sandbox ran but whose record could not be
#                      updated (the store failed): it is undone, never left running
#                      behind a create answered 503
#   reclaimed          the node drained, left, or crossed a usage threshold: the
#                      reclaim decision (R2, R3) or the hosts decision (R2) ordered it
#   lost               Nomad replaced or ended the sandbox's allocation (its node was
#                      lost and came back with a new, empty container): its state is gone
#   disk_quota         the sandbox wrote more to Nomad's task directories (/alloc,
#                      /local) than the reclaim decision's disk quota allows (H5)
#   orphan             reconcile: a job with the prefix and no live record (L4)
_reasons := {
	"end": {"destroyed", "expired", "job_missing", "placement_failed", "register_failed", "placement_unknown", "start_timeout", "record_failed", "reclaimed", "lost", "disk_quota"},
	"purge": {"orphan"},
}

_effects := {"purge_job", "revoke_token", "release_budget"}

_ending if input.action == "end"

_purging if input.action == "purge"

_sandbox := input.sandbox

_has_sandbox if is_object(input.sandbox)

_live if _sandbox.state in _live_states

# --- INPUT -----------------------------------------------------------------------------
#
# Any gap denies: a lifecycle action on facts the policy cannot see never happens.

# METADATA
# title: Lifecycle input carries the time
# description: >-
#   input.now must be a number.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: now must be a number"} if not _now_ok

# METADATA
# title: Lifecycle input names its action
# description: >-
#   input.action must be end or purge.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: action must be end or purge"} if not _action_ok

# METADATA
# title: Lifecycle input gives a reason the action may give
# description: >-
#   input.reason must be one of the reasons of its action (see _reasons).
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: reason is not one the action may give"} if not _reason_ok

# METADATA
# title: Lifecycle input carries the job
# description: >-
#   input.job must be an object with a string id and a boolean present: whether Nomad
#   reported the job.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: job must be an object with a string id and a boolean present"} if not _job_ok

# METADATA
# title: Lifecycle input says what the gateway will do
# description: >-
#   input.effects must hold purge_job, revoke_token and release_budget as booleans: the
#   effects the gateway will carry out.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: effects must hold purge_job, revoke_token and release_budget as booleans"} if not _effects_ok

# METADATA
# title: An end carries the sandbox record
# description: >-
#   To end a sandbox, input.sandbox must be its record: id, job_id and state (strings),
#   expires_at and ceiling_at (numbers).
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: ending needs the sandbox record (id, job_id, state, expires_at, ceiling_at)"} if {
	_ending
	not _sandbox_ok
}

# METADATA
# title: A purge's sandbox record is well formed
# description: >-
#   To purge, a sandbox record, when given, must be well formed (as for an end).
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: a sandbox, when given, must be a well-formed record"} if {
	_purging
	_has_sandbox
	not _sandbox_ok
}

_now_ok if is_number(input.now)

_action_ok if input.action in object.keys(_reasons)

_reason_ok if input.reason in _reasons[input.action]

_job_ok if {
	is_string(input.job.id)
	is_boolean(input.job.present)
}

_effects_ok if {
	is_object(input.effects)
	count({k | some k in _effects; is_boolean(input.effects[k])}) == count(_effects)
}

_sandbox_ok if {
	is_string(_sandbox.id)
	is_string(_sandbox.job_id)
	is_string(_sandbox.state)
	is_number(_sandbox.expires_at)
	is_number(_sandbox.ceiling_at)
}

# --- H9: only sandbox jobs are stopped and purged ---------------------------------------
#
# No other job of the cluster can be touched through sandgate, whatever the gateway or an
# operator asks.

# METADATA
# title: Only prefixed jobs are purged
# description: >-
#   The job the gateway stops or purges must carry the sandbox prefix
#   (data.sandgate.config.prefix).
# custom:
#   id: H9
#   severity: critical
violations contains {"rule": "H9", "msg": sprintf("purge: job %v does not carry the sandbox prefix %v", [input.job.id, object.get(cfg, "prefix", "unset")])} if {
	is_string(input.job.id)
	not _prefixed
}

# METADATA
# title: A sandbox's purge acts on its own job
# description: >-
#   When a sandbox record is given, the job must be exactly that record's job_id.
# custom:
#   id: H9
#   severity: critical
violations contains {"rule": "H9", "msg": sprintf("purge: job %v is not the job of sandbox %v", [input.job.id, _sandbox.id])} if {
	_has_sandbox
	is_string(input.job.id)
	input.job.id != _sandbox.job_id
}

# METADATA
# title: Only jobs named after a sandbox are purged
# description: >-
#   The prefix must be followed by a sandbox id matching sandbox_id_pattern.
# custom:
#   id: H9
#   severity: critical
violations contains {"rule": "H9", "msg": sprintf("purge: job %v does not name a sandbox id", [input.job.id])} if {
	_prefixed
	not _names_sandbox
}

_prefixed if startswith(input.job.id, cfg.prefix)

_names_sandbox if regex.match(cfg.sandbox_id_pattern, substring(input.job.id, count(cfg.prefix), -1))

# --- L1 --------------------------------------------------------------------------------

_due if input.now >= _sandbox.expires_at

_due if input.now >= _sandbox.ceiling_at

# METADATA
# title: The reaper ends only sandboxes that are due
# description: >-
#   An end with reason expired is allowed only when now has reached the sandbox's
#   expires_at or its lifetime ceiling_at. A clock or store error can never make the
#   reaper destroy a sandbox early.
# custom:
#   id: L1
#   severity: high
violations contains {"rule": "L1", "msg": "expired: the sandbox is not past expires_at or ceiling_at"} if {
	_ending
	input.reason == "expired"
	_sandbox_ok
	not _due
}

# --- L3: ending a sandbox purges its job, revokes its token and releases its budget ----
#
# No path leaves a usable token, a held budget or a running job behind a sandbox that has
# ended.

# METADATA
# title: An end revokes the token and releases the budget
# description: >-
#   Every end (destroy, expiry, a failed start, a vanished job) must revoke the session
#   token and release the budget.
# custom:
#   id: L3
#   severity: high
violations contains {"rule": "L3", "msg": sprintf("end: the effect %v is missing", [e])} if {
	_ending
	some e in {"revoke_token", "release_budget"}
	input.effects[e] != true
}

# METADATA
# title: An end purges the job
# description: >-
#   Every end must purge the Nomad job, except when reconciliation found the job already
#   gone (reason job_missing).
# custom:
#   id: L3
#   severity: high
violations contains {"rule": "L3", "msg": "end: the job must be purged"} if {
	_ending
	input.reason != "job_missing"
	input.effects.purge_job != true
}

# --- L4: reconciliation acts only on real mismatches -----------------------------------
#
# A healthy sandbox is never ended or purged by reconciliation.

# METADATA
# title: Reconciliation ends only records whose job is gone
# description: >-
#   Reconciliation with Nomad may end a record only when Nomad does not report its job
#   (reason job_missing, job.present false).
# custom:
#   id: L4
#   severity: high
violations contains {"rule": "L4", "msg": "job_missing: Nomad still reports the job"} if {
	_ending
	input.reason == "job_missing"
	input.job.present != false
}

# METADATA
# title: Reconciliation purges only orphans
# description: >-
#   Reconciliation may purge a job as an orphan only when no live sandbox record claims
#   it.
# custom:
#   id: L4
#   severity: high
violations contains {"rule": "L4", "msg": sprintf("orphan: sandbox %v is live; its job is not an orphan", [_sandbox.id])} if {
	_purging
	input.reason == "orphan"
	_live
}

# --- B4 --------------------------------------------------------------------------------

# METADATA
# title: An end releases exactly the budget a live sandbox holds
# description: >-
#   Only a live sandbox (starting or running) can be ended: it is the one that holds
#   budget, and ending it releases that budget once. Ending a record that has already
#   ended or failed would release its budget twice and let a node overrun its limits.
# custom:
#   id: B4
#   severity: high
violations contains {"rule": "B4", "msg": sprintf("end: sandbox %v is %v and holds no budget", [_sandbox.id, _sandbox.state])} if {
	_ending
	_sandbox_ok
	not _live
}
