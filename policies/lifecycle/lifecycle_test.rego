package sandgate.lifecycle_test

import data.sandgate.lifecycle
import future.keywords.not

# --- fixtures --------------------------------------------------------------------------

now := 1764410000

record := {
	"id": "k7x2m9p4q8r5t1v6", "job_id": "sandgate-sbx-k7x2m9p4q8r5t1v6", "state": "running",
	"principal": "agent:ci", "node": "worker-1",
	"created_at": 1764406000, "expires_at": 1764409600, "ceiling_at": 1764420400,
}

all_effects := {"purge_job": true, "revoke_token": true, "release_budget": true}

ending(reason) := {
	"now": now, "action": "end", "reason": reason,
	"job": {"id": record.job_id, "present": true},
	"sandbox": record, "effects": all_effects,
}

orphan := {
	"now": now, "action": "purge", "reason": "orphan",
	"job": {"id": "sandgate-sbx-orphan0001", "present": true},
	"effects": {"purge_job": true, "revoke_token": false, "release_budget": false},
}

ids(inp) := {v.rule | some v in d.violations} if {
	d := lifecycle.decision with input as inp
}

allowed(inp) if {
	d := lifecycle.decision with input as inp
	d.allow == true
	count(d.violations) == 0
}

# --- the allowed paths -----------------------------------------------------------------

test_every_end_reason_is_allowed_with_all_effects if {
	every reason in {"destroyed", "expired", "placement_failed", "register_failed", "placement_unknown", "start_timeout", "record_failed", "reclaimed", "lost", "disk_quota"} {
		allowed(ending(reason))
	}
}

test_job_missing_end_without_a_purge_is_allowed if {
	allowed(json.patch(ending("job_missing"), [
		{"op": "replace", "path": "/job/present", "value": false},
		{"op": "replace", "path": "/effects/purge_job", "value": false},
	]))
}

test_an_orphan_purge_is_allowed if allowed(orphan)

test_an_orphan_purge_of_an_ended_record_is_allowed if {
	allowed(object.union(orphan, {
		"job": {"id": record.job_id, "present": true},
		"sandbox": object.union(record, {"state": "ended"}),
	}))
}

# --- INPUT -----------------------------------------------------------------------------

test_input_empty_denies_everything if {
	ids({}) == {"INPUT"}
}

test_input_missing_now if {
	ids(json.remove(ending("destroyed"), ["now"])) == {"INPUT"}
}

test_input_unknown_action if {
	ids(object.union(ending("destroyed"), {"action": "stop"})) == {"INPUT"}
}

test_input_reason_of_another_action if {
	ids(object.union(ending("destroyed"), {"reason": "orphan"})) == {"INPUT"}
	ids(object.union(orphan, {"reason": "expired"})) == {"INPUT"}
}

test_input_job_without_present if {
	ids(json.remove(ending("destroyed"), ["job/present"])) == {"INPUT"}
}

test_input_effects_not_boolean if {
	ids(json.patch(ending("destroyed"), [{"op": "replace", "path": "/effects/revoke_token", "value": "yes"}])) == {"INPUT", "L3"}
}

test_input_end_without_a_record if {
	ids(json.remove(ending("destroyed"), ["sandbox"])) == {"INPUT"}
}

test_input_end_with_a_record_lacking_expiry if {
	ids(json.remove(ending("expired"), ["sandbox/expires_at"])) == {"INPUT"}
}

test_input_purge_with_a_malformed_record if {
	ids(object.union(orphan, {"sandbox": {"id": 1}})) == {"INPUT"}
}

# --- H9 --------------------------------------------------------------------------------

test_h9_a_job_without_the_prefix_is_never_purged if {
	ids(object.union(orphan, {"job": {"id": "billing", "present": true}})) == {"H9"}
}

test_h9_a_prefix_without_a_sandbox_id_is_refused if {
	ids(object.union(orphan, {"job": {"id": "sandgate-sbx-UPPER.case", "present": true}})) == {"H9"}
}

test_h9_an_end_purges_only_the_records_own_job if {
	ids(object.union(ending("destroyed"), {"job": {"id": "sandgate-sbx-aaaaaaaaaaaaaaaa", "present": true}})) == {"H9"}
}

# --- L1 --------------------------------------------------------------------------------

test_l1_a_sandbox_before_expiry_is_not_reaped if {
	ids(object.union(ending("expired"), {"now": record.expires_at - 1})) == {"L1"}
}

test_l1_a_sandbox_at_expiry_is_reaped if {
	allowed(object.union(ending("expired"), {"now": record.expires_at}))
}

test_l1_a_sandbox_past_its_ceiling_is_reaped_even_if_extended if {
	rec := object.union(record, {"expires_at": record.ceiling_at + 100})
	allowed(object.union(ending("expired"), {"now": record.ceiling_at, "sandbox": rec}))
}

test_l1_does_not_limit_a_destroy_before_expiry if {
	allowed(object.union(ending("destroyed"), {"now": record.created_at}))
}

# --- L3 --------------------------------------------------------------------------------

test_l3_an_end_must_revoke_the_token if {
	ids(json.patch(ending("destroyed"), [{"op": "replace", "path": "/effects/revoke_token", "value": false}])) == {"L3"}
}

test_l3_an_end_must_release_the_budget if {
	ids(json.patch(ending("expired"), [{"op": "replace", "path": "/effects/release_budget", "value": false}])) == {"L3"}
}

test_l3_an_end_must_purge_the_job if {
	ids(json.patch(ending("placement_failed"), [{"op": "replace", "path": "/effects/purge_job", "value": false}])) == {"L3"}
}

# --- L4 --------------------------------------------------------------------------------

test_l4_a_record_whose_job_is_present_is_not_ended_as_missing if {
	ids(json.patch(ending("job_missing"), [{"op": "replace", "path": "/effects/purge_job", "value": false}])) == {"L4"}
}

test_l4_the_job_of_a_live_sandbox_is_not_an_orphan if {
	ids(object.union(orphan, {"job": {"id": record.job_id, "present": true}, "sandbox": record})) == {"L4"}
}

test_l4_the_job_of_a_starting_sandbox_is_not_an_orphan if {
	rec := object.union(record, {"state": "starting"})
	ids(object.union(orphan, {"job": {"id": record.job_id, "present": true}, "sandbox": rec})) == {"L4"}
}

# --- B4 --------------------------------------------------------------------------------

test_b4_an_ended_sandbox_is_not_ended_again if {
	ids(object.union(ending("destroyed"), {"sandbox": object.union(record, {"state": "ended"})})) == {"B4"}
}

test_b4_a_failed_sandbox_holds_no_budget if {
	ids(object.union(ending("expired"), {"sandbox": object.union(record, {"state": "failed"})})) == {"B4"}
}

test_b4_a_starting_sandbox_can_be_ended if {
	allowed(object.union(ending("start_timeout"), {"sandbox": object.union(record, {"state": "starting"})}))
}

test_h9_a_prefix_missing_from_data_purges_nothing if {
	ids(object.union(orphan, {"job": {"id": "sandgate-sbx-k7x2m9p4q8r5t1v6", "present": true}})) == {"H9"} with data.sandgate.config as json.remove(data.sandgate.config, ["prefix"])
}
