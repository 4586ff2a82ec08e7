package sandgate.isolation

import data.sandgate.config as cfg
import future.keywords.not

# The network and the firewall: I2 (one bridge network, one chain that drops, the DOCKER-USER
# jump and the INPUT rule) and I3 (tagged rules, nothing else touched). See isolation.rego
# for the decision, the helpers and INPUT.

# --- I2 --------------------------------------------------------------------------------

_resolver_forbidden := {c |
	some list in [_iso.required_drop_cidrs, _iso.resolver_forbidden_cidrs, _plan.overlays, [_net.subnet]]
	some c in list
}

_i2 contains sprintf("network %v is not the egress network_mode %v the rendered jobs use", [_net.name, cfg.networks.egress.network_mode]) if {
	_net.name != cfg.networks.egress.network_mode
}

_i2 contains sprintf("network driver %v is not bridge", [_net.driver]) if _net.driver != "bridge"

_i2 contains "inter-container traffic must be off (inter_container false)" if _net.inter_container != false

_i2 contains "IPv6 must be off on the network (the rules are IPv4)" if _net.ipv6 != false

_i2 contains "the network needs at least one public resolver" if count(_net.resolvers) == 0

_i2 contains sprintf("resolver %v is inside %v: sandboxes resolve through public resolvers only", [r, c]) if {
	some r in _net.resolvers
	some c in _resolver_forbidden
	net.cidr_contains(c, r)
}

_drops_all_to(cidr) if {
	some r in _chain_rules
	r.target == "DROP"
	r.protocol == ""
	r.dport == 0
	r.in_interface == ""
	r.destination != ""
	net.cidr_contains(r.destination, cidr)
}

_i2 contains sprintf("the chain does not drop all traffic to %v", [c]) if {
	some c in _iso.required_drop_cidrs
	not _drops_all_to(c)
}

_i2 contains sprintf("the chain does not drop all traffic to the overlay %v", [c]) if {
	some c in _plan.overlays
	not _drops_all_to(c)
}

_drops_port(proto, port) if {
	some r in _chain_rules
	r.target == "DROP"
	r.protocol == proto
	r.dport == port
	r.destination == ""
	r.in_interface == ""
}

_i2 contains sprintf("the chain does not drop %v port %v (%v) to every address", [proto, port, service]) if {
	some service, ports in {"nomad": _plan.nomad_ports, "ssh": _plan.ssh_ports}
	some port in ports
	some proto in _iso.port_protocols[service]
	not _drops_port(proto, port)
}

_i2 contains sprintf("no %v port is dropped", [k]) if {
	some k in ["nomad_ports", "ssh_ports"]
	count(_plan[k]) == 0
}

_i2 contains sprintf("chain rule %v targets %v: the chain may only DROP, never let traffic past Docker's rules", [r.id, r.target]) if {
	some r in _chain_rules
	r.target != "DROP"
}

_hooks(chain) := [r | some r in _plan.rules; r.chain == chain]

_i2 contains sprintf("want exactly one %v rule, the plan has %d", [chain, count(_hooks(chain))]) if {
	some chain in ["DOCKER-USER", "INPUT"]
	count(_hooks(chain)) != 1
}

_hook_target := {"DOCKER-USER": _plan.chain, "INPUT": "DROP"}

_i2 contains sprintf("%v rule %v must be first and send everything from %v to %v", [r.chain, r.id, _net.bridge, _hook_target[r.chain]]) if {
	some chain in ["DOCKER-USER", "INPUT"]
	some r in _hooks(chain)
	not _hook_ok(r)
}

_hook_ok(r) if {
	r.position == "first"
	r.in_interface == _net.bridge
	r.target == _hook_target[r.chain]
	r.destination == ""
	r.protocol == ""
	r.dport == 0
}

# METADATA
# title: One bridge network, one chain that drops, one rule that keeps it off the host
# description: >-
#   The network is the egress network_mode the rendered jobs use (networks.egress), a
#   bridge with inter-container traffic and IPv6 off, whose resolvers are public (none in
#   a dropped range, isolation.resolver_forbidden_cidrs, an overlay or the subnet). The
#   owned chain only drops, and drops all traffic to every range of
#   isolation.required_drop_cidrs (RFC 1918, CGNAT, link-local and metadata, multicast,
#   reserved) and to every overlay, and the Nomad and SSH ports on every address with the
#   protocols of isolation.port_protocols. Exactly one DOCKER-USER rule, first, jumps to
#   it for everything from the bridge, and exactly one INPUT rule, first, drops
#   everything from the bridge to the host.
# custom:
#   id: I2
#   severity: critical
violations contains {"rule": "I2", "msg": msg} if {
	_well_formed
	some msg in _i2
}

# --- I3 --------------------------------------------------------------------------------

_i3 contains sprintf("comment tag %v is not the bundle's %v", [_plan.comment_tag, _iso.comment_tag]) if {
	_plan.comment_tag != _iso.comment_tag
}

_i3 contains sprintf("rule %v: comment %v does not start with %v", [r.id, r.comment, _iso.comment_tag]) if {
	some r in _plan.rules
	not startswith(r.comment, concat("", [_iso.comment_tag, " "]))
}

_i3 contains sprintf("rule %v is in table %v, not filter", [r.id, r.table]) if {
	some r in _plan.rules
	r.table != "filter"
}

_i3 contains sprintf("rule %v is in chain %v, neither the owned chain nor a hook (%v)", [r.id, r.chain, concat(", ", _iso.hook_chains)]) if {
	some r in _plan.rules
	r.chain != _plan.chain
	not r.chain in _iso.hook_chains
}

_i3 contains sprintf("rule %v in %v matches more than traffic from %v", [r.id, r.chain, _net.bridge]) if {
	some r in _plan.rules
	r.chain in _iso.hook_chains
	r.in_interface != _net.bridge
}

_i3 contains sprintf("chain %v is not one the bundle may own (built in, or Docker's)", [_plan.chain]) if {
	_reserved_chain
}

_reserved_chain if upper(_plan.chain) in _iso.builtin_chains

_reserved_chain if startswith(upper(_plan.chain), "DOCKER")

_i3 contains sprintf("%v step touches %v %v, which the bundle does not own", [list, s.kind, s.name]) if {
	some list in ["apply", "remove"]
	some s in _plan[list]
	not _own(s)
}

_own(s) if {
	s.kind == "chain"
	s.name == _plan.chain
}

_own(s) if {
	s.kind == "network"
	s.name == _net.name
}

_own(s) if {
	s.kind == "rule"
	s.name in _rule_ids
}

# METADATA
# title: Every rule is tagged and nothing else on the host is touched
# description: >-
#   Every rule is in the filter table and its comment starts with isolation.comment_tag
#   followed by a space, so an operator finds them all with iptables-save. Rules live only
#   in the owned chain (never a built-in or DOCKER* chain) and in the hook chains of
#   isolation.hook_chains (DOCKER-USER, INPUT), where they match only traffic from the
#   bridge. Apply and remove touch only the owned chain, the plan's rules and its network.
# custom:
#   id: I3
#   severity: high
violations contains {"rule": "I3", "msg": msg} if {
	_well_formed
	some msg in _i3
}
