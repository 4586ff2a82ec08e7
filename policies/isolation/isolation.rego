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
# Negation: this module imports future.keywords.not, like every module of the bundle,
# so `not <expr>` holds whenever <expr> does not, a missing fact included
# (docs/policies.md, "One meaning of `not`").
# The rules I1-I4 judge only a well-formed plan: a malformed one is denied by INPUT alone.

_iso := cfg.isolation

_plan := input.plan

_net := input.plan.network

_cp := input.plan.control_plane

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
#
# The input must carry the plan: version, comment tag and chain (strings); the network
# (name, driver, bridge, subnet and gateway, inter_container and ipv6 booleans, IPv4
# resolvers); the overlays (IPv4 CIDRs), Nomad and SSH ports; every rule (id, table,
# chain, position, target, comment, in_interface, destination, protocol, dport); the
# apply and remove steps (action, kind, name, guard); the control-plane checks. A plan the
# policy cannot read is never printed. Each check below is a helper naming what is missing
# (the gaps), read by its violation and by _well_formed: I1-I4 judge a well-formed plan
# only.

_well_formed if {
	_plan_is_object
	count(_plan_field_gaps) == 0
	count(_plan_array_gaps) == 0
	count(_empty_lists) == 0
	count(_network_field_gaps) == 0
	_resolvers_ok
	_cidrs_ok
	count(_rule_string_gaps) == 0
	count(_rule_match_gaps) == 0
	count(_step_gaps) == 0
	count(_control_plane_array_gaps) == 0
	_control_plane_ok
}

# METADATA
# title: The plan is an object
# description: >-
#   input.plan must be an object.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: plan must be an object"} if not _plan_is_object

_plan_is_object if is_object(input.plan)

_plan_fields := {
	"version": "string", "comment_tag": "string", "chain": "string",
	"network": "object", "control_plane": "object",
}

# METADATA
# title: The plan names its version, tag, chain, network and control-plane checks
# description: >-
#   plan.version, plan.comment_tag and plan.chain must be non-empty strings, plan.network
#   and plan.control_plane objects.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": sprintf("input: plan.%v must be a non-empty %v", [k, t])} if {
	some k, t in _plan_field_gaps
}

_plan_field_gaps[k] := t if {
	is_object(input.plan)
	some k, t in _plan_fields
	not _typed(input.plan, k, t)
}

_typed(obj, k, "string") if _string(obj, k)

_typed(obj, k, "object") if is_object(obj[k])

_typed(obj, k, "boolean") if is_boolean(obj[k])

_plan_arrays := {
	"modes": "string", "overlays": "string", "nomad_ports": "number", "ssh_ports": "number",
	"rules": "object", "apply": "object", "remove": "object",
}

# METADATA
# title: The plan's lists are typed
# description: >-
#   plan.modes and plan.overlays must be arrays of strings, plan.nomad_ports and
#   plan.ssh_ports arrays of numbers, plan.rules, plan.apply and plan.remove arrays of
#   objects.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": sprintf("input: plan.%v must be an array of %vs", [k, t])} if {
	some k, t in _plan_array_gaps
}

_plan_array_gaps[k] := t if {
	is_object(input.plan)
	some k, t in _plan_arrays
	not _array_of(input.plan, k, t)
}

# METADATA
# title: The plan has modes, rules and steps
# description: >-
#   plan.modes, plan.rules, plan.apply and plan.remove must not be empty.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": sprintf("input: plan.%v must not be empty", [k])} if {
	some k in _empty_lists
}

_empty_lists contains k if {
	some k in ["modes", "rules", "apply", "remove"]
	_plan[k] == []
}

_network_fields := {
	"name": "string", "driver": "string", "bridge": "string", "subnet": "string",
	"gateway": "string", "inter_container": "boolean", "ipv6": "boolean",
}

# METADATA
# title: The plan's network is described
# description: >-
#   plan.network must carry name, driver, bridge, subnet and gateway (non-empty strings)
#   and inter_container and ipv6 (booleans).
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": sprintf("input: plan.network.%v must be a %v", [k, t])} if {
	some k, t in _network_field_gaps
}

_network_field_gaps[k] := t if {
	is_object(_net)
	some k, t in _network_fields
	not _typed(_net, k, t)
}

# METADATA
# title: The network's resolvers are IPv4 addresses
# description: >-
#   plan.network.resolvers must be an array of IPv4 addresses.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: plan.network.resolvers must be an array of IPv4 addresses"} if {
	is_object(_net)
	not _resolvers_ok
}

_resolvers_ok if {
	is_array(_net.resolvers)
	every r in _net.resolvers {
		_ipv4(r)
	}
}

# METADATA
# title: The subnet and overlays are IPv4 CIDRs
# description: >-
#   plan.network.subnet and every entry of plan.overlays must be IPv4 CIDRs.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: plan.network.subnet and plan.overlays must be IPv4 CIDRs"} if {
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

# METADATA
# title: Every rule names itself, its table, chain, position, target and comment
# description: >-
#   Every rule of plan.rules must carry id, table, chain, position, target and comment
#   as non-empty strings.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": sprintf("input: plan.rules[%v].%v must be a non-empty string", [i, k])} if {
	some [i, k] in _rule_string_gaps
}

_rule_string_gaps contains [i, k] if {
	some i, r in _plan.rules
	some k in _rule_strings
	not _string(r, k)
}

# METADATA
# title: Every rule says what it matches
# description: >-
#   Every rule of plan.rules must carry in_interface, destination (empty or an IPv4
#   CIDR) and protocol (strings, empty for any) and dport (a number).
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": sprintf("input: plan.rules[%v] needs in_interface, destination, protocol (strings, empty for any) and dport (a number)", [i])} if {
	some i in _rule_match_gaps
}

_rule_match_gaps contains i if {
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

# METADATA
# title: Every apply and remove step is described
# description: >-
#   Every step of plan.apply and plan.remove must carry action, kind, name and guard as
#   non-empty strings.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": sprintf("input: plan.%v[%v] needs action, kind, name and guard (non-empty strings)", [list, i])} if {
	some [list, i] in _step_gaps
}

_step_gaps contains [list, i] if {
	some list in ["apply", "remove"]
	some i, s in _plan[list]
	some k in ["action", "kind", "name", "guard"]
	not _string(s, k)
}

_control_plane_arrays := {"refuse_modes": "string", "indicators": "object", "node_names": "string", "server_ports": "number"}

# METADATA
# title: The control-plane checks' lists are typed
# description: >-
#   plan.control_plane.refuse_modes and node_names must be arrays of strings, indicators
#   an array of objects and server_ports an array of numbers.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": sprintf("input: plan.control_plane.%v must be an array of %vs", [k, t])} if {
	some k, t in _control_plane_array_gaps
}

_control_plane_array_gaps[k] := t if {
	is_object(_cp)
	some k, t in _control_plane_arrays
	not _array_of(_cp, k, t)
}

# METADATA
# title: The control-plane checks are described
# description: >-
#   plan.control_plane must carry refuse_when and nomad_config_dir (non-empty strings),
#   node_meta (an object of string arrays) and indicators that each have an id.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "input: plan.control_plane needs refuse_when, nomad_config_dir (strings) and node_meta (an object of string arrays)"} if {
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
violations contains {"rule": "INPUT", "msg": sprintf("policy data %v must be %v", [name, type])} if {
	some name, type in {
		"isolation.comment_tag": "a non-empty string",
		"isolation.modes": "a non-empty array",
		"isolation.guards": "a non-empty object",
		"isolation.required_drop_cidrs": "a non-empty array",
		"isolation.resolver_forbidden_cidrs": "a non-empty array",
		"isolation.port_protocols": "a non-empty object",
		"isolation.hook_chains": "a non-empty array",
		"isolation.builtin_chains": "a non-empty array",
		"isolation.control_plane_indicators": "a non-empty array",
		"isolation.refuse_modes": "a non-empty array",
		"networks.egress.network_mode": "a non-empty string",
		"placement.control_plane.meta": "an object",
		"placement.control_plane.node_names": "an array",
	}
	not _data_typed(object.get(cfg, split(name, "."), null), type)
}

_data_typed(v, "an object") if is_object(v)

_data_typed(v, "an array") if is_array(v)

_data_typed(v, type) if {
	type == sprintf("a non-empty %v", [type_name(v)])
	count(v) > 0
}
