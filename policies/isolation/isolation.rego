# METADATA
# title: Host isolation bundle
# description: >-
#   Decides the plan of the host isolation script that `sandgate isolation render` prints
#   for an egress worker, before it is printed (input.plan: the network, every iptables
#   rule, the apply and remove steps, the control-plane checks). The script is rendered
#   from that plan alone, so what is allowed here is what the script does. Rules: INPUT,
#   I1 (verify, apply and remove modes; idempotent; remove undoes apply exactly), I2 (one
#   bridge network without inter-container traffic and with public resolvers; one chain
#   jumped to from DOCKER-USER that drops every private, metadata, multicast and overlay
#   range and the Nomad and SSH ports; an INPUT rule keeping the bridge off the host), I3
#   (every rule tagged; nothing outside its own chain, jump, INPUT rule and network is
#   touched), I4 (the script refuses on a control plane when any indicator is present).
# scope: package
package sandgate.isolation

import data.sandgate.config as cfg
import future.keywords.not

# METADATA
# title: Isolation decision
# description: >-
#   Allows the plan only when no violation fires. Each violation names the rule id that
#   refused (INPUT, I1, I2, I3, I4) and a message.
# entrypoint: true
decision := {"allow": count(violations) == 0, "violations": violations}

# --- shared helpers --------------------------------------------------------------------
#
# Negation: OPA evaluates the arguments of a call before a `not`, so every check that
# must fire on a missing fact is written as `not <helper>` whose arguments are always
# defined (the object and the key), never `not <helper>(<a lookup that may be undefined>)`.
# The rules I1-I4 judge only a well-formed plan: a malformed one is denied by INPUT alone.

_iso := cfg.isolation

_plan := input.plan

_net := input.plan.network

_cp := input.plan.control_plane

_well_formed if count(_input) == 0

_chain_rules := [r | some r in _plan.rules; r.chain == _plan.chain]

_rule_ids := {r.id | some r in _plan.rules}

_string(obj, k) if {
	is_string(obj[k])
	obj[k] != ""
}

_array_of(obj, k, t) if {
	is_array(obj[k])
	every x in obj[k] {
		type_name(x) == t
	}
}

_ipv4(s) if {
	is_string(s)
	regex.match(`^[0-9]{1,3}(\.[0-9]{1,3}){3}$`, s)
	net.cidr_is_valid(concat("", [s, "/32"]))
}

_cidr(s) if {
	is_string(s)
	regex.match(`^[0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}$`, s)
	net.cidr_is_valid(s)
}

# --- INPUT -----------------------------------------------------------------------------

_plan_fields := {
	"version": "string", "comment_tag": "string", "chain": "string",
	"network": "object", "control_plane": "object",
}

_plan_arrays := {
	"modes": "string", "overlays": "string", "nomad_ports": "number", "ssh_ports": "number",
	"rules": "object", "apply": "object", "remove": "object",
}

_input contains "input: plan must be an object" if not _plan_is_object

_plan_is_object if is_object(input.plan)

_input contains sprintf("input: plan.%v must be a non-empty %v", [k, t]) if {
	is_object(input.plan)
	some k, t in _plan_fields
	not _typed(input.plan, k, t)
}

_typed(obj, k, "string") if _string(obj, k)

_typed(obj, k, "object") if is_object(obj[k])

_typed(obj, k, "boolean") if is_boolean(obj[k])

_input contains sprintf("input: plan.%v must be an array of %vs", [k, t]) if {
	is_object(input.plan)
	some k, t in _plan_arrays
	not _array_of(input.plan, k, t)
}

_input contains sprintf("input: plan.%v must not be empty", [k]) if {
	some k in ["modes", "rules", "apply", "remove"]
	_plan[k] == []
}

_network_fields := {
	"name": "string", "driver": "string", "bridge": "string", "subnet": "string",
	"gateway": "string", "inter_container": "boolean", "ipv6": "boolean",
}

_input contains sprintf("input: plan.network.%v must be a %v", [k, t]) if {
	is_object(_net)
	some k, t in _network_fields
	not _typed(_net, k, t)
}

_input contains "input: plan.network.resolvers must be an array of IPv4 addresses" if {
	is_object(_net)
	not _resolvers_ok
}

_resolvers_ok if {
	is_array(_net.resolvers)
	every r in _net.resolvers {
		_ipv4(r)
	}
}

_input contains "input: plan.network.subnet and plan.overlays must be IPv4 CIDRs" if {
	is_object(_net)
	not _cidrs_ok
}

_cidrs_ok if {
	_cidr(_net.subnet)
	every o in _plan.overlays {
		_cidr(o)
	}
}

_rule_strings := {"id", "table", "chain", "position", "target", "comment"}

_input contains sprintf("input: plan.rules[%d].%v must be a non-empty string", [i, k]) if {
	some i, r in _plan.rules
	some k in _rule_strings
	not _string(r, k)
}

_input contains sprintf("input: plan.rules[%d] needs in_interface, destination, protocol (strings, empty for any) and dport (a number)", [i]) if {
	some i, r in _plan.rules
	not _rule_matches_ok(r)
}

_rule_matches_ok(r) if {
	every k in ["in_interface", "destination", "protocol"] {
		is_string(r[k])
	}
	is_number(r.dport)
	_destination_ok(r)
}

_destination_ok(r) if r.destination == ""

_destination_ok(r) if _cidr(r.destination)

_input contains sprintf("input: plan.%v[%d] needs action, kind, name and guard (non-empty strings)", [list, i]) if {
	some list in ["apply", "remove"]
	some i, s in _plan[list]
	some k in ["action", "kind", "name", "guard"]
	not _string(s, k)
}

_control_plane_arrays := {"refuse_modes": "string", "indicators": "object", "node_names": "string", "server_ports": "number"}

_input contains sprintf("input: plan.control_plane.%v must be an array of %vs", [k, t]) if {
	is_object(_cp)
	some k, t in _control_plane_arrays
	not _array_of(_cp, k, t)
}

_input contains "input: plan.control_plane needs refuse_when, nomad_config_dir (strings) and node_meta (an object of string arrays)" if {
	is_object(_cp)
	not _control_plane_ok
}

_control_plane_ok if {
	_string(_cp, "refuse_when")
	_string(_cp, "nomad_config_dir")
	is_object(_cp.node_meta)
	every _, vs in _cp.node_meta {
		is_array(vs)
	}
	every i in _cp.indicators {
		_string(i, "id")
	}
}

# METADATA
# title: Isolation plan is complete and well formed
# description: >-
#   The input must carry the plan: version, comment tag and chain (strings); the network
#   (name, driver, bridge, subnet and gateway, inter_container and ipv6 booleans, IPv4
#   resolvers); the overlays (IPv4 CIDRs), Nomad and SSH ports; every rule (id, table,
#   chain, position, target, comment, in_interface, destination, protocol, dport); the
#   apply and remove steps (action, kind, name, guard); the control-plane checks. A plan
#   the policy cannot read is never printed.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": msg} if {
	some msg in _input
}

# METADATA
# title: The policy data the isolation rules read is present
# description: >-
#   Every list and table of data.sandgate.config.isolation the rules I1-I4 compare the
#   plan with (the comment tag, modes, guards, the CIDRs to drop, the port protocols, the
#   hook and built-in chains, the control-plane indicators and refuse modes), the egress
#   network's network_mode and placement.control_plane's meta and node_names must be
#   present with their type: a rule whose list is missing would judge nothing, and a
#   plan it cannot judge is never printed.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": sprintf("policy data %v must be %v", [concat(".", path), type])} if {
	some path, type in {
		["isolation", "comment_tag"]: "a non-empty string",
		["isolation", "modes"]: "a non-empty array",
		["isolation", "guards"]: "a non-empty object",
		["isolation", "required_drop_cidrs"]: "a non-empty array",
		["isolation", "resolver_forbidden_cidrs"]: "a non-empty array",
		["isolation", "port_protocols"]: "a non-empty object",
		["isolation", "hook_chains"]: "a non-empty array",
		["isolation", "builtin_chains"]: "a non-empty array",
		["isolation", "control_plane_indicators"]: "a non-empty array",
		["isolation", "refuse_modes"]: "a non-empty array",
		["networks", "egress", "network_mode"]: "a non-empty string",
		["placement", "control_plane", "meta"]: "an object",
		["placement", "control_plane", "node_names"]: "an array",
	}
	not _data_typed(object.get(cfg, path, null), type)
}

_data_typed(v, "an object") if is_object(v)

_data_typed(v, "an array") if is_array(v)

_data_typed(v, type) if {
	type == concat(" ", ["a non-empty", type_name(v)])
	count(v) > 0
}
