# METADATA
# title: Shared facts about Nomad client nodes
# description: >-
#   Functions the entrypoints share to judge a node the same way everywhere:
#   whether it is (or may be) a control-plane node (P2, used by admission at
#   create and by hosts at enrollment) and whether it declares the egress
#   isolation bundle (I5, used by hosts). No rule here denies by itself; the
#   entrypoints turn these facts into violations.
# scope: package
package sandgate.lib.nodes

import data.sandgate.config as cfg
import future.keywords.not

# control_plane_reasons(node) is one message per control-plane indicator the node
# shows; empty only when none does. The indicators are judged and worded here, once, as a
# violation's message is (a literal, or sprintf with %v: docs/policies.md, "How a rule
# words its message"): admission's P2 names them all in one line, hosts' P2 one line each
# after the node's name. The indicators, each configurable in policy data
# (placement.control_plane):
#   - server_colocation (default true): node.control_plane, the gateway's verdict that a
#     Nomad server runs on the node (its name or address matches a server member), must
#     be exactly false. Missing or mistyped counts as co-located: fail closed.
#   - meta: node meta key -> values that mark a control plane (case-insensitive, trimmed).
#   - node_names: node names (or unique.hostname attributes) that are control planes.
#   meta and node_names must be present (an empty table or list is fine): without them
#   the node cannot be judged and counts as a control plane.
# Admission asks this of every create, so it is one function body: policy data is read
# once, and each indicator is one comprehension.
control_plane_reasons(node) := (colocation | unjudged) | (meta | listed) if {
	cp := object.get(cfg, ["placement", "control_plane"], {})
	unjudged := {"policy data placement.control_plane.meta must be an object and node_names a list: every node counts as a control-plane node" |
		not _judgeable(cp)
	}
	colocation := {"node is (or may be) a control-plane node: control_plane must be false" |
		not cp.server_colocation == false
		not node.control_plane == false
	}
	meta := {sprintf("node meta %v=%v marks a control-plane node", [key, value]) |
		some key, values in cp.meta
		value := node.meta[key]
		is_string(value)
		lower(trim_space(value)) in values
	}
	listed := {sprintf("node %v is listed as a control-plane node", [name]) |
		some name in cp.node_names
		_names_node(name, node)
	}
}

_judgeable(cp) if {
	is_object(cp.meta)
	is_array(cp.node_names)
}

_names_node(name, node) if name == node.name

_names_node(name, node) if name == node.attributes["unique.hostname"]

_iso := cfg.placement.egress_isolation

# isolation_declared(node) holds when the node's meta declares an accepted version of
# the isolation bundle (placement.egress_isolation.meta_key, accepted_versions): the
# operator ran `sandgate isolation render ... --verify` on it and recorded the version.
isolation_declared(node) if {
	value := node.meta[_iso.meta_key]
	is_string(value)
	trim_space(value) in _iso.accepted_versions
}
