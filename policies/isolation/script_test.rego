package sandgate.isolation_test

import data.sandgate.isolation
import future.keywords.not

# Fixtures and helpers (plan, rules, ids, msgs, allowed, ...) are in isolation_test.rego.

# --- I1 --------------------------------------------------------------------------------

test_i1_a_script_without_remove_is_denied if {
	ids(with_plan([{"op": "replace", "path": "/modes", "value": ["verify", "apply"]}])) == {"I1"}
}

test_i1_an_unguarded_apply_step_is_denied if {
	ids(with_plan([{"op": "replace", "path": "/apply/3/guard", "value": "none"}])) == {"I1"}
}

test_i1_a_remove_step_that_ensures_is_denied if {
	ids(with_plan([{"op": "replace", "path": "/remove/2/action", "value": "ensure"}])) == {"I1"}
}

test_i1_remove_that_forgets_the_jump_is_denied if {
	m := msgs({"plan": object.union(plan, {"remove": [s | some s in remove_steps; s.name != "jump-docker-user"]})})
	m == {"remove does not delete the rule jump-docker-user that apply adds"}
}

test_i1_remove_that_deletes_more_than_apply_adds_is_denied if {
	extra := step("delete", "rule", "drop-overlay-10.8.0.0/24")
	d := isolation.decision with input as {"plan": object.union(plan, {
		"apply": [s | some s in apply_steps; s.name != "drop-overlay-10.8.0.0/24"],
		"remove": array.concat([s | some s in remove_steps; s.name != "drop-overlay-10.8.0.0/24"], [extra]),
	})}
	{v.rule | some v in d.violations} == {"I1"}
	"apply never adds rule drop-overlay-10.8.0.0/24" in {v.msg | some v in d.violations}
}

test_i1_an_object_applied_twice_is_denied if {
	ids({"plan": object.union(plan, {"apply": array.concat(apply_steps, [apply_steps[1]])})}) == {"I1"}
}

test_i1_duplicate_rule_ids_are_denied if {
	ids({"plan": object.union(plan, {"rules": array.concat(rules, [rules[0]])})}) == {"I1"}
}

test_i1_the_network_created_before_the_rules_is_denied if {
	net_step := step("ensure", "network", bridge)
	ids({"plan": object.union(plan, {"apply": array.concat([net_step], [s | some s in apply_steps; s.kind != "network"])})}) == {"I1"}
}

test_i1_the_chain_removed_before_its_rules_is_denied if {
	chain_step := step("delete", "chain", chain)
	ids({"plan": object.union(plan, {"remove": array.concat([chain_step], [s | some s in remove_steps; s.kind != "chain"])})}) == {"I1"}
}

# --- I4 --------------------------------------------------------------------------------

test_i4_a_missing_indicator_is_denied if {
	inds := [i | some i in plan.control_plane.indicators; i.id != "nomad_rpc_listener"]
	m := msgs(with_plan([{"op": "replace", "path": "/control_plane/indicators", "value": inds}]))
	m == {"the script does not check the control-plane indicator nomad_rpc_listener"}
}

test_i4_refusing_only_when_all_indicators_agree_is_denied if {
	ids(with_plan([{"op": "replace", "path": "/control_plane/refuse_when", "value": "all"}])) == {"I4"}
}

test_i4_apply_that_does_not_refuse_is_denied if {
	ids(with_plan([{"op": "replace", "path": "/control_plane/refuse_modes", "value": ["verify"]}])) == {"I4"}
}

test_i4_a_node_name_from_policy_data_must_be_checked if {
	inp := {"plan": plan}
	m := msgs(inp) with data.sandgate.config.placement.control_plane.node_names as ["nomad-server-1"]
	m == {"control-plane node name nomad-server-1 (placement.control_plane.node_names) is not checked"}
	allowed({"plan": json.patch(plan, [{"op": "replace", "path": "/control_plane/node_names", "value": ["nomad-server-1"]}])}) with data.sandgate.config.placement.control_plane.node_names as ["nomad-server-1"]
}

test_i4_control_plane_meta_from_policy_data_must_be_checked if {
	m := msgs(with_plan([{"op": "replace", "path": "/control_plane/node_meta/node-role", "value": ["server"]}]))
	m == {"control-plane node meta node-role=control-plane (placement.control_plane.meta) is not checked"}
}

test_i4_server_ports_must_be_nomad_ports if {
	m := msgs(with_plan([{"op": "replace", "path": "/control_plane/server_ports", "value": [4647, 14648]}]))
	m == {"server port 14648 is not one of the Nomad ports"}
	ids(with_plan([{"op": "replace", "path": "/control_plane/server_ports", "value": []}])) == {"I4"}
}
