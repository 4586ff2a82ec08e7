package sandgate.isolation_test

import future.keywords.not

# Fixtures and helpers (plan, rules, ids, msgs, allowed, ...) are in isolation_test.rego.

# --- I2 --------------------------------------------------------------------------------

test_i2_a_network_other_than_the_jobs_network_mode_is_denied if {
	m := msgs(with_plan([
		{"op": "replace", "path": "/network/name", "value": "other-net"},
		{"op": "replace", "path": sprintf("/apply/%d/name", [count(apply_steps) - 1]), "value": "other-net"},
		{"op": "replace", "path": "/remove/0/name", "value": "other-net"},
	]))
	m == {"network other-net is not the egress network_mode sandgate-egress the rendered jobs use"}
}

test_i2_inter_container_traffic_on_is_denied if {
	ids(with_plan([{"op": "replace", "path": "/network/inter_container", "value": true}])) == {"I2"}
}

test_i2_ipv6_and_a_non_bridge_driver_are_denied if {
	ids(with_plan([
		{"op": "replace", "path": "/network/ipv6", "value": true},
		{"op": "replace", "path": "/network/driver", "value": "macvlan"},
	])) == {"I2"}
}

test_i2_a_private_resolver_is_denied if {
	m := msgs(with_plan([{"op": "replace", "path": "/network/resolvers", "value": ["1.1.1.1", "10.0.0.2"]}]))
	m == {"resolver 10.0.0.2 is inside 10.0.0.0/8: sandboxes resolve through public resolvers only"}
}

test_i2_loopback_and_metadata_resolvers_are_denied if {
	m := msgs(with_plan([{"op": "replace", "path": "/network/resolvers", "value": ["127.0.0.53", "169.254.169.253"]}]))
	m == {
		"resolver 127.0.0.53 is inside 127.0.0.0/8: sandboxes resolve through public resolvers only",
		"resolver 169.254.169.253 is inside 169.254.0.0/16: sandboxes resolve through public resolvers only",
	}
}

test_i2_no_resolver_is_denied if {
	ids(with_plan([{"op": "replace", "path": "/network/resolvers", "value": []}])) == {"I2"}
}

test_i2_a_missing_metadata_drop_is_denied if {
	m := msgs(with_plan([{"op": "remove", "path": sprintf("/rules/%d", [rule_index("drop-net-169.254.0.0/16")])}]))
	"the chain does not drop all traffic to 169.254.0.0/16" in m
}

test_i2_a_drop_narrowed_to_one_port_does_not_count if {
	i := rule_index("drop-net-100.64.0.0/10")
	m := msgs(with_plan([
		{"op": "replace", "path": sprintf("/rules/%d/protocol", [i]), "value": "tcp"},
		{"op": "replace", "path": sprintf("/rules/%d/dport", [i]), "value": 443},
	]))
	m == {"the chain does not drop all traffic to 100.64.0.0/10"}
}

test_i2_a_wider_drop_covers_the_required_range if {
	i := rule_index("drop-net-172.16.0.0/12")
	allowed(with_plan([{"op": "replace", "path": sprintf("/rules/%d/destination", [i]), "value": "172.0.0.0/8"}]))
}

test_i2_an_overlay_without_its_drop_is_denied if {
	m := msgs(with_plan([{"op": "replace", "path": "/overlays", "value": ["10.8.0.0/24", "198.51.100.128/25"]}]))
	m == {"the chain does not drop all traffic to the overlay 198.51.100.128/25"}
}

test_i2_serf_udp_not_dropped_is_denied if {
	m := msgs(with_plan([{"op": "remove", "path": sprintf("/rules/%d", [rule_index("drop-nomad-udp-4648")])}]))
	"the chain does not drop udp port 4648 (nomad) to every address" in m
}

test_i2_ssh_dropped_only_to_one_address_is_denied if {
	m := msgs(with_plan([{"op": "replace", "path": sprintf("/rules/%d/destination", [rule_index("drop-ssh-tcp-22")]), "value": "10.0.0.0/8"}]))
	m == {"the chain does not drop tcp port 22 (ssh) to every address"}
}

test_i2_no_ssh_port_is_denied if {
	ids(with_plan([{"op": "replace", "path": "/ssh_ports", "value": []}])) == {"I2"}
}

test_i2_an_accept_in_the_chain_is_denied if {
	ids(with_plan([{"op": "replace", "path": "/rules/0/target", "value": "ACCEPT"}])) == {"I2"}
}

test_i2_a_second_input_rule_is_denied if {
	m := msgs({"plan": object.union(plan, {"rules": array.concat(rules, [object.union(input_drop, {"id": "drop-input-2"})])})})
	"want exactly one INPUT rule, the plan has 2" in m
}

test_i2_a_jump_appended_after_dockers_rules_is_denied if {
	m := msgs(with_plan([{"op": "replace", "path": sprintf("/rules/%d/position", [rule_index("jump-docker-user")]), "value": "append"}]))
	m == {"DOCKER-USER rule jump-docker-user must be first and send everything from sandgate-egress to SANDGATE-ISOLATION"}
}

test_i2_an_input_rule_that_accepts_is_denied if {
	ids(with_plan([{"op": "replace", "path": sprintf("/rules/%d/target", [rule_index("drop-input-bridge")]), "value": "ACCEPT"}])) == {"I2"}
}

# --- I3 --------------------------------------------------------------------------------

test_i3_an_untagged_rule_is_denied if {
	m := msgs(with_plan([{"op": "replace", "path": "/rules/2/comment", "value": "cgnat"}]))
	m == {"rule drop-net-100.64.0.0/10: comment cgnat does not start with sandgate-isolation"}
}

test_i3_another_comment_tag_is_denied if {
	ids(with_plan([{"op": "replace", "path": "/comment_tag", "value": "other"}])) == {"I3"}
}

test_i3_a_rule_in_the_nat_table_is_denied if {
	ids(with_plan([{"op": "replace", "path": "/rules/0/table", "value": "nat"}])) == {"I3"}
}

test_i3_a_rule_in_forward_is_denied if {
	extra := rule("forward-drop", "FORWARD", "first", bridge, "", "", 0, "DROP")
	ids({"plan": object.union(plan, {
		"rules": array.concat(rules, [extra]),
		"apply": array.concat(apply_steps, [step("ensure", "rule", "forward-drop")]),
		"remove": array.concat([step("delete", "rule", "forward-drop")], remove_steps),
	})}) == {"I1", "I3"}
}

test_i3_an_input_rule_for_all_interfaces_is_denied if {
	ids(with_plan([{"op": "replace", "path": sprintf("/rules/%d/in_interface", [rule_index("drop-input-bridge")]), "value": ""}])) == {"I2", "I3"}
}

test_i3_owning_a_docker_chain_is_denied if {
	renamed := [object.union(r, {"chain": "DOCKER-SANDGATE"}) | some r in rules; r.chain == chain]
	hooks := [object.union(r, {"target": "DOCKER-SANDGATE"}) | some r in rules; r.id == "jump-docker-user"]
	steps := [object.union(s, {"name": "DOCKER-SANDGATE"}) | some s in apply_steps; s.kind == "chain"]
	m := msgs({"plan": object.union(plan, {
		"chain": "DOCKER-SANDGATE",
		"rules": array.concat(array.concat(renamed, hooks), [input_drop]),
		"apply": array.concat(steps, [s | some s in apply_steps; s.kind != "chain"]),
		"remove": array.concat([s | some s in remove_steps; s.kind != "chain"], [object.union(s, {"action": "delete"}) | some s in steps]),
	})})
	m == {"chain DOCKER-SANDGATE is not one the bundle may own (built in, or Docker's)"}
}

test_i3_a_step_on_another_network_is_denied if {
	m := msgs(with_plan([
		{"op": "replace", "path": sprintf("/apply/%d/name", [count(apply_steps) - 1]), "value": "bridge"},
		{"op": "replace", "path": "/remove/0/name", "value": "bridge"},
	]))
	"apply step touches network bridge, which the bundle does not own" in m
	"remove step touches network bridge, which the bundle does not own" in m
}
