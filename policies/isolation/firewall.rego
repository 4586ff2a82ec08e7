package sandgate.isolation

import data.sandgate.config as cfg
import future.keywords.not

# The network and the firewall: I2 (one bridge network, one chain that drops, the DOCKER-USER
# jump and the INPUT rule) and I3 (tagged rules, nothing else touched). See isolation.rego
# for the decision, the helpers and INPUT. Every check judges a well-formed plan only.

# --- I2: one bridge network, one chain that drops, one rule that keeps it off the host ---

# METADATA
# title: The network is the one the egress jobs use
# description: >-
#   The plan's network must be the egress network_mode the rendered jobs use
#   (networks.egress.network_mode).
# custom:
#   id: I2
#   severity: critical
violations contains {"rule": "I2", "msg": sprintf("network %v is not the egress network_mode %v the rendered jobs use", [_net.name, cfg.networks.egress.network_mode])} if {
	_well_formed
	_net.name != cfg.networks.egress.network_mode
}

# METADATA
# title: The network is a bridge
# description: >-
#   The network's driver must be bridge.
# custom:
#   id: I2
#   severity: critical
violations contains {"rule": "I2", "msg": sprintf("network driver %v is not bridge", [_net.driver])} if {
	_well_formed
	_net.driver != "bridge"
}

# METADATA
# title: Sandboxes cannot reach each other
# description: >-
#   Inter-container traffic must be off on the network (inter_container false).
# custom:
#   id: I2
#   severity: critical
violations contains {"rule": "I2", "msg": "inter-container traffic must be off (inter_container false)"} if {
	_well_formed
	_net.inter_container != false
}

# METADATA
# title: The network has no IPv6
# description: >-
#   IPv6 must be off on the network: the rules are IPv4.
# custom:
#   id: I2
#   severity: critical
violations contains {"rule": "I2", "msg": "IPv6 must be off on the network (the rules are IPv4)"} if {
	_well_formed
	_net.ipv6 != false
}

# METADATA
# title: The network has a resolver
# description: >-
#   The network needs at least one public resolver.
# custom:
#   id: I2
#   severity: critical
violations contains {"rule": "I2", "msg": "the network needs at least one public resolver"} if {
	_well_formed
	count(_net.resolvers) == 0
}

_resolver_forbidden := {c |
	some list in [_iso.required_drop_cidrs, _iso.resolver_forbidden_cidrs, _plan.overlays, [_net.subnet]]
	some c in list
}

# METADATA
# title: The resolvers are public
# description: >-
#   No resolver may be in a dropped range (isolation.required_drop_cidrs),
#   isolation.resolver_forbidden_cidrs, an overlay or the subnet: sandboxes resolve
#   through public resolvers only.
# custom:
#   id: I2
#   severity: critical
violations contains {"rule": "I2", "msg": sprintf("resolver %v is inside %v: sandboxes resolve through public resolvers only", [r, c])} if {
	_well_formed
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

# METADATA
# title: The chain drops every private and special range
# description: >-
#   The owned chain must drop all traffic to every range of isolation.required_drop_cidrs
#   (RFC 1918, CGNAT, link-local and metadata, multicast, reserved).
# custom:
#   id: I2
#   severity: critical
violations contains {"rule": "I2", "msg": sprintf("the chain does not drop all traffic to %v", [c])} if {
	_well_formed
	some c in _iso.required_drop_cidrs
	not _drops_all_to(c)
}

# METADATA
# title: The chain drops every overlay
# description: >-
#   The owned chain must drop all traffic to every overlay of the plan.
# custom:
#   id: I2
#   severity: critical
violations contains {"rule": "I2", "msg": sprintf("the chain does not drop all traffic to the overlay %v", [c])} if {
	_well_formed
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

# METADATA
# title: The chain drops the Nomad and SSH ports
# description: >-
#   The owned chain must drop the Nomad and SSH ports on every address, with the
#   protocols of isolation.port_protocols.
# custom:
#   id: I2
#   severity: critical
violations contains {"rule": "I2", "msg": sprintf("the chain does not drop %v port %v (%v) to every address", [proto, port, service])} if {
	_well_formed
	some service, ports in {"nomad": _plan.nomad_ports, "ssh": _plan.ssh_ports}
	some port in ports
	some proto in _iso.port_protocols[service]
	not _drops_port(proto, port)
}

# METADATA
# title: The plan names Nomad and SSH ports to drop
# description: >-
#   plan.nomad_ports and plan.ssh_ports must not be empty.
# custom:
#   id: I2
#   severity: critical
violations contains {"rule": "I2", "msg": sprintf("no %v port is dropped", [k])} if {
	_well_formed
	some k in ["nomad_ports", "ssh_ports"]
	count(_plan[k]) == 0
}

# METADATA
# title: The chain only drops
# description: >-
#   Every rule of the owned chain must target DROP: the chain may never let traffic past
#   Docker's rules.
# custom:
#   id: I2
#   severity: critical
violations contains {"rule": "I2", "msg": sprintf("chain rule %v targets %v: the chain may only DROP, never let traffic past Docker's rules", [r.id, r.target])} if {
	_well_formed
	some r in _chain_rules
	r.target != "DROP"
}

_hooks(chain) := [r | some r in _plan.rules; r.chain == chain]

# METADATA
# title: One DOCKER-USER rule and one INPUT rule
# description: >-
#   The plan must have exactly one DOCKER-USER rule and exactly one INPUT rule.
# custom:
#   id: I2
#   severity: critical
violations contains {"rule": "I2", "msg": sprintf("want exactly one %v rule, the plan has %v", [chain, count(_hooks(chain))])} if {
	_well_formed
	some chain in ["DOCKER-USER", "INPUT"]
	count(_hooks(chain)) != 1
}

_hook_target := {"DOCKER-USER": _plan.chain, "INPUT": "DROP"}

# METADATA
# title: The hook rules send everything from the bridge first
# description: >-
#   The DOCKER-USER rule, first, must jump to the owned chain for everything from the
#   bridge, and the INPUT rule, first, must drop everything from the bridge to the host.
# custom:
#   id: I2
#   severity: critical
violations contains {"rule": "I2", "msg": sprintf("%v rule %v must be first and send everything from %v to %v", [r.chain, r.id, _net.bridge, _hook_target[r.chain]])} if {
	_well_formed
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

# --- I3: every rule is tagged and nothing else on the host is touched ------------------

# METADATA
# title: The plan's comment tag is the bundle's
# description: >-
#   plan.comment_tag must be isolation.comment_tag.
# custom:
#   id: I3
#   severity: high
violations contains {"rule": "I3", "msg": sprintf("comment tag %v is not the bundle's %v", [_plan.comment_tag, _iso.comment_tag])} if {
	_well_formed
	_plan.comment_tag != _iso.comment_tag
}

# METADATA
# title: Every rule is tagged
# description: >-
#   Every rule's comment must start with isolation.comment_tag followed by a space, so an
#   operator finds them all with iptables-save.
# custom:
#   id: I3
#   severity: high
violations contains {"rule": "I3", "msg": sprintf("rule %v: comment %v does not start with %v", [r.id, r.comment, _iso.comment_tag])} if {
	_well_formed
	some r in _plan.rules
	not startswith(r.comment, concat("", [_iso.comment_tag, " "]))
}

# METADATA
# title: Every rule is in the filter table
# description: >-
#   Every rule must be in the filter table.
# custom:
#   id: I3
#   severity: high
violations contains {"rule": "I3", "msg": sprintf("rule %v is in table %v, not filter", [r.id, r.table])} if {
	_well_formed
	some r in _plan.rules
	r.table != "filter"
}

# METADATA
# title: Rules live only in the owned chain and the hooks
# description: >-
#   Rules live only in the owned chain and in the hook chains of isolation.hook_chains
#   (DOCKER-USER, INPUT).
# custom:
#   id: I3
#   severity: high
violations contains {"rule": "I3", "msg": sprintf("rule %v is in chain %v, neither the owned chain nor a hook %v", [r.id, r.chain, _iso.hook_chains])} if {
	_well_formed
	some r in _plan.rules
	r.chain != _plan.chain
	not r.chain in _iso.hook_chains
}

# METADATA
# title: Hook rules match only the bridge's traffic
# description: >-
#   A rule in a hook chain must match only traffic from the bridge.
# custom:
#   id: I3
#   severity: high
violations contains {"rule": "I3", "msg": sprintf("rule %v in %v matches more than traffic from %v", [r.id, r.chain, _net.bridge])} if {
	_well_formed
	some r in _plan.rules
	r.chain in _iso.hook_chains
	r.in_interface != _net.bridge
}

# METADATA
# title: The owned chain is not a built-in or Docker's
# description: >-
#   The owned chain must never be a built-in chain (isolation.builtin_chains) or a
#   DOCKER* chain.
# custom:
#   id: I3
#   severity: high
violations contains {"rule": "I3", "msg": sprintf("chain %v is not one the bundle may own (built in, or Docker's)", [_plan.chain])} if {
	_well_formed
	_reserved_chain
}

_reserved_chain if upper(_plan.chain) in _iso.builtin_chains

_reserved_chain if startswith(upper(_plan.chain), "DOCKER")

# METADATA
# title: Apply and remove touch only what the bundle owns
# description: >-
#   Apply and remove touch only the owned chain, the plan's rules and its network.
# custom:
#   id: I3
#   severity: high
violations contains {"rule": "I3", "msg": sprintf("%v step touches %v %v, which the bundle does not own", [list, s.kind, s.name])} if {
	_well_formed
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
