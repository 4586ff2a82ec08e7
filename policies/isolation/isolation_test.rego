package sandgate.isolation_test

import data.sandgate.isolation
import future.keywords.not

# --- fixtures --------------------------------------------------------------------------
#
# The plan `sandgate isolation render --overlay 10.8.0.0/24` builds with the defaults
# (indicator descriptions shortened), as a literal: the tests patch it.

tag := "sandgate-isolation"

chain := "SANDGATE-ISOLATION"

bridge := "sandgate-egress"

rule(id, ch, pos, iface, dst, proto, port, target) := {
	"id": id, "table": "filter", "chain": ch, "position": pos, "in_interface": iface,
	"destination": dst, "protocol": proto, "dport": port, "target": target,
	"comment": concat(" ", [tag, id]),
}

step(action, kind, name) := {"action": action, "kind": kind, "name": name, "guard": guards[kind]}

guards := {"chain": "iptables -n -L", "rule": "iptables -C", "network": "docker network inspect"}

plan := {
	"version": "v1",
	"comment_tag": "sandgate-isolation",
	"modes": ["verify", "apply", "remove"],
	"network": {
		"name": "sandgate-egress",
		"driver": "bridge",
		"bridge": "sandgate-egress",
		"subnet": "172.31.250.0/24",
		"gateway": "172.31.250.1",
		"inter_container": false,
		"ipv6": false,
		"resolvers": ["1.1.1.1", "9.9.9.9"],
		"labels": {"sandgate.isolation": "v1", "sandgate.resolvers": "1.1.1.1,9.9.9.9"},
	},
	"chain": "SANDGATE-ISOLATION",
	"overlays": ["10.8.0.0/24"],
	"nomad_ports": [4646, 4647, 4648],
	"ssh_ports": [22],
	"rules": [
		{"id": "drop-net-0.0.0.0/8", "table": "filter", "chain": "SANDGATE-ISOLATION", "position": "append", "in_interface": "", "destination": "0.0.0.0/8", "protocol": "", "dport": 0, "target": "DROP", "comment": "sandgate-isolation this-network 0.0.0.0/8"},
		{"id": "drop-net-10.0.0.0/8", "table": "filter", "chain": "SANDGATE-ISOLATION", "position": "append", "in_interface": "", "destination": "10.0.0.0/8", "protocol": "", "dport": 0, "target": "DROP", "comment": "sandgate-isolation rfc1918 10.0.0.0/8"},
		{"id": "drop-net-100.64.0.0/10", "table": "filter", "chain": "SANDGATE-ISOLATION", "position": "append", "in_interface": "", "destination": "100.64.0.0/10", "protocol": "", "dport": 0, "target": "DROP", "comment": "sandgate-isolation cgnat 100.64.0.0/10"},
		{
			"id": "drop-net-169.254.0.0/16",
			"table": "filter",
			"chain": "SANDGATE-ISOLATION",
			"position": "append",
			"in_interface": "",
			"destination": "169.254.0.0/16",
			"protocol": "",
			"dport": 0,
			"target": "DROP",
			"comment": "sandgate-isolation link-local-and-metadata 169.254.0.0/16",
		},
		{"id": "drop-net-172.16.0.0/12", "table": "filter", "chain": "SANDGATE-ISOLATION", "position": "append", "in_interface": "", "destination": "172.16.0.0/12", "protocol": "", "dport": 0, "target": "DROP", "comment": "sandgate-isolation rfc1918 172.16.0.0/12"},
		{
			"id": "drop-net-192.0.0.0/24",
			"table": "filter",
			"chain": "SANDGATE-ISOLATION",
			"position": "append",
			"in_interface": "",
			"destination": "192.0.0.0/24",
			"protocol": "",
			"dport": 0,
			"target": "DROP",
			"comment": "sandgate-isolation ietf-protocol-assignments 192.0.0.0/24",
		},
		{
			"id": "drop-net-192.168.0.0/16",
			"table": "filter",
			"chain": "SANDGATE-ISOLATION",
			"position": "append",
			"in_interface": "",
			"destination": "192.168.0.0/16",
			"protocol": "",
			"dport": 0,
			"target": "DROP",
			"comment": "sandgate-isolation rfc1918 192.168.0.0/16",
		},
		{
			"id": "drop-net-198.18.0.0/15",
			"table": "filter",
			"chain": "SANDGATE-ISOLATION",
			"position": "append",
			"in_interface": "",
			"destination": "198.18.0.0/15",
			"protocol": "",
			"dport": 0,
			"target": "DROP",
			"comment": "sandgate-isolation benchmarking 198.18.0.0/15",
		},
		{"id": "drop-net-224.0.0.0/4", "table": "filter", "chain": "SANDGATE-ISOLATION", "position": "append", "in_interface": "", "destination": "224.0.0.0/4", "protocol": "", "dport": 0, "target": "DROP", "comment": "sandgate-isolation multicast 224.0.0.0/4"},
		{
			"id": "drop-net-240.0.0.0/4",
			"table": "filter",
			"chain": "SANDGATE-ISOLATION",
			"position": "append",
			"in_interface": "",
			"destination": "240.0.0.0/4",
			"protocol": "",
			"dport": 0,
			"target": "DROP",
			"comment": "sandgate-isolation reserved-and-broadcast 240.0.0.0/4",
		},
		{"id": "drop-overlay-10.8.0.0/24", "table": "filter", "chain": "SANDGATE-ISOLATION", "position": "append", "in_interface": "", "destination": "10.8.0.0/24", "protocol": "", "dport": 0, "target": "DROP", "comment": "sandgate-isolation overlay 10.8.0.0/24"},
		{"id": "drop-nomad-tcp-4646", "table": "filter", "chain": "SANDGATE-ISOLATION", "position": "append", "in_interface": "", "destination": "", "protocol": "tcp", "dport": 4646, "target": "DROP", "comment": "sandgate-isolation nomad tcp/4646"},
		{"id": "drop-nomad-udp-4646", "table": "filter", "chain": "SANDGATE-ISOLATION", "position": "append", "in_interface": "", "destination": "", "protocol": "udp", "dport": 4646, "target": "DROP", "comment": "sandgate-isolation nomad udp/4646"},
		{"id": "drop-nomad-tcp-4647", "table": "filter", "chain": "SANDGATE-ISOLATION", "position": "append", "in_interface": "", "destination": "", "protocol": "tcp", "dport": 4647, "target": "DROP", "comment": "sandgate-isolation nomad tcp/4647"},
		{"id": "drop-nomad-udp-4647", "table": "filter", "chain": "SANDGATE-ISOLATION", "position": "append", "in_interface": "", "destination": "", "protocol": "udp", "dport": 4647, "target": "DROP", "comment": "sandgate-isolation nomad udp/4647"},
		{"id": "drop-nomad-tcp-4648", "table": "filter", "chain": "SANDGATE-ISOLATION", "position": "append", "in_interface": "", "destination": "", "protocol": "tcp", "dport": 4648, "target": "DROP", "comment": "sandgate-isolation nomad tcp/4648"},
		{"id": "drop-nomad-udp-4648", "table": "filter", "chain": "SANDGATE-ISOLATION", "position": "append", "in_interface": "", "destination": "", "protocol": "udp", "dport": 4648, "target": "DROP", "comment": "sandgate-isolation nomad udp/4648"},
		{"id": "drop-ssh-tcp-22", "table": "filter", "chain": "SANDGATE-ISOLATION", "position": "append", "in_interface": "", "destination": "", "protocol": "tcp", "dport": 22, "target": "DROP", "comment": "sandgate-isolation ssh tcp/22"},
		{
			"id": "jump-docker-user",
			"table": "filter",
			"chain": "DOCKER-USER",
			"position": "first",
			"in_interface": "sandgate-egress",
			"destination": "",
			"protocol": "",
			"dport": 0,
			"target": "SANDGATE-ISOLATION",
			"comment": "sandgate-isolation jump from sandgate-egress",
		},
		{"id": "drop-input-bridge", "table": "filter", "chain": "INPUT", "position": "first", "in_interface": "sandgate-egress", "destination": "", "protocol": "", "dport": 0, "target": "DROP", "comment": "sandgate-isolation keep sandgate-egress off the host"},
	],
	"apply": [
		{"action": "ensure", "kind": "chain", "name": "SANDGATE-ISOLATION", "guard": "iptables -n -L"},
		{"action": "ensure", "kind": "rule", "name": "drop-net-0.0.0.0/8", "guard": "iptables -C"},
		{"action": "ensure", "kind": "rule", "name": "drop-net-10.0.0.0/8", "guard": "iptables -C"},
		{"action": "ensure", "kind": "rule", "name": "drop-net-100.64.0.0/10", "guard": "iptables -C"},
		{"action": "ensure", "kind": "rule", "name": "drop-net-169.254.0.0/16", "guard": "iptables -C"},
		{"action": "ensure", "kind": "rule", "name": "drop-net-172.16.0.0/12", "guard": "iptables -C"},
		{"action": "ensure", "kind": "rule", "name": "drop-net-192.0.0.0/24", "guard": "iptables -C"},
		{"action": "ensure", "kind": "rule", "name": "drop-net-192.168.0.0/16", "guard": "iptables -C"},
		{"action": "ensure", "kind": "rule", "name": "drop-net-198.18.0.0/15", "guard": "iptables -C"},
		{"action": "ensure", "kind": "rule", "name": "drop-net-224.0.0.0/4", "guard": "iptables -C"},
		{"action": "ensure", "kind": "rule", "name": "drop-net-240.0.0.0/4", "guard": "iptables -C"},
		{"action": "ensure", "kind": "rule", "name": "drop-overlay-10.8.0.0/24", "guard": "iptables -C"},
		{"action": "ensure", "kind": "rule", "name": "drop-nomad-tcp-4646", "guard": "iptables -C"},
		{"action": "ensure", "kind": "rule", "name": "drop-nomad-udp-4646", "guard": "iptables -C"},
		{"action": "ensure", "kind": "rule", "name": "drop-nomad-tcp-4647", "guard": "iptables -C"},
		{"action": "ensure", "kind": "rule", "name": "drop-nomad-udp-4647", "guard": "iptables -C"},
		{"action": "ensure", "kind": "rule", "name": "drop-nomad-tcp-4648", "guard": "iptables -C"},
		{"action": "ensure", "kind": "rule", "name": "drop-nomad-udp-4648", "guard": "iptables -C"},
		{"action": "ensure", "kind": "rule", "name": "drop-ssh-tcp-22", "guard": "iptables -C"},
		{"action": "ensure", "kind": "rule", "name": "jump-docker-user", "guard": "iptables -C"},
		{"action": "ensure", "kind": "rule", "name": "drop-input-bridge", "guard": "iptables -C"},
		{"action": "ensure", "kind": "network", "name": "sandgate-egress", "guard": "docker network inspect"},
	],
	"remove": [
		{"action": "delete", "kind": "network", "name": "sandgate-egress", "guard": "docker network inspect"},
		{"action": "delete", "kind": "rule", "name": "drop-input-bridge", "guard": "iptables -C"},
		{"action": "delete", "kind": "rule", "name": "jump-docker-user", "guard": "iptables -C"},
		{"action": "delete", "kind": "rule", "name": "drop-ssh-tcp-22", "guard": "iptables -C"},
		{"action": "delete", "kind": "rule", "name": "drop-nomad-udp-4648", "guard": "iptables -C"},
		{"action": "delete", "kind": "rule", "name": "drop-nomad-tcp-4648", "guard": "iptables -C"},
		{"action": "delete", "kind": "rule", "name": "drop-nomad-udp-4647", "guard": "iptables -C"},
		{"action": "delete", "kind": "rule", "name": "drop-nomad-tcp-4647", "guard": "iptables -C"},
		{"action": "delete", "kind": "rule", "name": "drop-nomad-udp-4646", "guard": "iptables -C"},
		{"action": "delete", "kind": "rule", "name": "drop-nomad-tcp-4646", "guard": "iptables -C"},
		{"action": "delete", "kind": "rule", "name": "drop-overlay-10.8.0.0/24", "guard": "iptables -C"},
		{"action": "delete", "kind": "rule", "name": "drop-net-240.0.0.0/4", "guard": "iptables -C"},
		{"action": "delete", "kind": "rule", "name": "drop-net-224.0.0.0/4", "guard": "iptables -C"},
		{"action": "delete", "kind": "rule", "name": "drop-net-198.18.0.0/15", "guard": "iptables -C"},
		{"action": "delete", "kind": "rule", "name": "drop-net-192.168.0.0/16", "guard": "iptables -C"},
		{"action": "delete", "kind": "rule", "name": "drop-net-192.0.0.0/24", "guard": "iptables -C"},
		{"action": "delete", "kind": "rule", "name": "drop-net-172.16.0.0/12", "guard": "iptables -C"},
		{"action": "delete", "kind": "rule", "name": "drop-net-169.254.0.0/16", "guard": "iptables -C"},
		{"action": "delete", "kind": "rule", "name": "drop-net-100.64.0.0/10", "guard": "iptables -C"},
		{"action": "delete", "kind": "rule", "name": "drop-net-10.0.0.0/8", "guard": "iptables -C"},
		{"action": "delete", "kind": "rule", "name": "drop-net-0.0.0.0/8", "guard": "iptables -C"},
		{"action": "delete", "kind": "chain", "name": "SANDGATE-ISOLATION", "guard": "iptables -n -L"},
	],
	"control_plane": {
		"refuse_when": "any",
		"refuse_modes": ["apply", "verify"],
		"indicators": [
			{"id": "nomad_server_config", "description": "nomad_server_config"},
			{"id": "nomad_server_process", "description": "nomad_server_process"},
			{"id": "nomad_rpc_listener", "description": "nomad_rpc_listener"},
			{"id": "node_name_list", "description": "node_name_list"},
			{"id": "node_meta", "description": "node_meta"},
		],
		"nomad_config_dir": "/etc/nomad.d",
		"node_names": [],
		"node_meta": {"node-role": ["server", "control-plane"], "sandgate.control_plane": ["true"]},
		"server_ports": [4647, 4648],
	},
}

rules := plan.rules

apply_steps := plan.apply

remove_steps := plan.remove

input_drop := rules[rule_index("drop-input-bridge")]

with_plan(patch) := {"plan": json.patch(plan, patch)}

# rule_index is the position of the rule with the given id in plan.rules.
rule_index(id) := i if {
	some i, r in rules
	r.id == id
}

ids(inp) := {v.rule | some v in d.violations} if {
	d := isolation.decision with input as inp
}

msgs(inp) := {v.msg | some v in d.violations} if {
	d := isolation.decision with input as inp
}

allowed(inp) if {
	d := isolation.decision with input as inp
	d.allow == true
	count(d.violations) == 0
}

# --- the allowed plans -----------------------------------------------------------------

test_the_default_plan_with_an_overlay_is_allowed if allowed({"plan": plan})

test_a_plan_without_overlays_is_allowed if {
	allowed({"plan": object.union(plan, {
		"overlays": [],
		"rules": [r | some r in rules; r.id != "drop-overlay-10.8.0.0/24"],
		"apply": [s | some s in apply_steps; s.name != "drop-overlay-10.8.0.0/24"],
		"remove": [s | some s in remove_steps; s.name != "drop-overlay-10.8.0.0/24"],
	})})
}

# --- INPUT -----------------------------------------------------------------------------

test_input_empty_denies_everything if ids({}) == {"INPUT"}

# Policy data the rules read: missing, empty or mistyped refuses the plan, and says which.
test_input_policy_data_missing_refuses if {
	msgs({"plan": plan}) == {"policy data isolation.required_drop_cidrs must be a non-empty array"} with data.sandgate.config as json.remove(data.sandgate.config, ["isolation/required_drop_cidrs"])
	msgs({"plan": plan}) == {"policy data isolation.modes must be a non-empty array"} with data.sandgate.config.isolation.modes as []
	"policy data isolation.comment_tag must be a non-empty string" in msgs({"plan": plan}) with data.sandgate.config as json.remove(data.sandgate.config, ["isolation/comment_tag"])
	"policy data placement.control_plane.meta must be an object" in msgs({"plan": plan}) with data.sandgate.config.placement.control_plane.meta as null
}

test_input_policy_data_empty_control_plane_lists_allowed if {
	allowed({"plan": plan}) with data.sandgate.config.placement.control_plane.meta as {}
}

test_input_plan_not_an_object if ids({"plan": []}) == {"INPUT"}

test_input_missing_chain if ids({"plan": json.remove(plan, ["chain"])}) == {"INPUT"}

test_input_network_without_booleans if {
	ids(with_plan([{"op": "replace", "path": "/network/inter_container", "value": "false"}])) == {"INPUT"}
}

test_input_resolver_not_an_address if {
	ids(with_plan([{"op": "replace", "path": "/network/resolvers", "value": ["dns.example"]}])) == {"INPUT"}
}

test_input_overlay_not_a_cidr if {
	ids(with_plan([{"op": "replace", "path": "/overlays", "value": ["10.8.0.0/33"]}])) == {"INPUT"}
}

test_input_ports_not_numbers if {
	ids(with_plan([{"op": "replace", "path": "/nomad_ports", "value": ["4646"]}])) == {"INPUT"}
}

test_input_empty_rule_list if {
	ids(with_plan([{"op": "replace", "path": "/rules", "value": []}])) == {"INPUT"}
}

test_input_rule_without_comment if {
	ids(with_plan([{"op": "remove", "path": sprintf("/rules/%d/comment", [rule_index("jump-docker-user")])}])) == {"INPUT"}
}

test_input_rule_with_a_malformed_destination if {
	ids(with_plan([{"op": "replace", "path": "/rules/1/destination", "value": "ten"}])) == {"INPUT"}
}

test_input_step_without_guard if {
	ids(with_plan([{"op": "remove", "path": "/apply/0/guard"}])) == {"INPUT"}
}

test_input_control_plane_without_indicators if {
	ids(with_plan([{"op": "remove", "path": "/control_plane/indicators"}])) == {"INPUT"}
}

test_input_control_plane_meta_not_an_object if {
	ids(with_plan([{"op": "replace", "path": "/control_plane/node_meta", "value": ["node-role=server"]}])) == {"INPUT"}
}
