package sandgate.isolation

import data.sandgate.config as cfg
import future.keywords.not

# The script itself: I1 (modes, idempotent apply, exact remove) and I4 (refusal on a
# control plane). See isolation.rego for the decision, the helpers and INPUT. Every check
# judges a well-formed plan only.

# --- I1: the script verifies, applies idempotently and removes exactly -----------------

_applied := {[s.kind, s.name] | some s in _plan.apply}

_removed := {[s.kind, s.name] | some s in _plan.remove}

# METADATA
# title: The script offers every mode
# description: >-
#   The script must offer the modes in isolation.modes (verify, apply, remove).
# custom:
#   id: I1
#   severity: high
violations contains {"rule": "I1", "msg": sprintf("the script lacks the --%v mode", [m])} if {
	_well_formed
	some m in _iso.modes
	not m in _plan.modes
}

# METADATA
# title: Every step is guarded
# description: >-
#   Every apply step ensures one object and is guarded by the check isolation.guards names
#   for its kind (so a second apply changes nothing); every remove step deletes one,
#   guarded the same way.
# custom:
#   id: I1
#   severity: high
violations contains {"rule": "I1", "msg": sprintf("%v step %v %v must %v, guarded by %v (has %v, %v)", [list, s.kind, s.name, action, object.get(_iso.guards, s.kind, "nothing: unknown kind"), s.action, s.guard])} if {
	_well_formed
	some list, action in {"apply": "ensure", "remove": "delete"}
	some s in _plan[list]
	not _guarded(s, action)
}

_guarded(s, action) if {
	s.action == action
	s.guard == _iso.guards[s.kind]
}

# METADATA
# title: Remove deletes everything apply adds
# description: >-
#   Remove must delete every object apply adds.
# custom:
#   id: I1
#   severity: high
violations contains {"rule": "I1", "msg": sprintf("remove does not delete the %v %v that apply adds", [o[0], o[1]])} if {
	_well_formed
	some o in _applied
	not o in _removed
}

# METADATA
# title: Remove deletes nothing apply does not add
# description: >-
#   Remove must delete only objects apply adds.
# custom:
#   id: I1
#   severity: high
violations contains {"rule": "I1", "msg": sprintf("remove deletes a %v %v that apply does not add", [o[0], o[1]])} if {
	_well_formed
	some o in _removed
	not o in _applied
}

# METADATA
# title: Every object is applied and removed once
# description: >-
#   Apply and remove list each object once.
# custom:
#   id: I1
#   severity: high
violations contains {"rule": "I1", "msg": "apply or remove lists an object twice"} if {
	_well_formed
	count(_applied) + count(_removed) != count(_plan.apply) + count(_plan.remove)
}

# METADATA
# title: Every rule is applied
# description: >-
#   Apply must add every rule of the plan.
# custom:
#   id: I1
#   severity: high
violations contains {"rule": "I1", "msg": sprintf("apply never adds rule %v", [r.id])} if {
	_well_formed
	some r in _plan.rules
	not ["rule", r.id] in _applied
}

# METADATA
# title: Rule ids are unique
# description: >-
#   Every rule of the plan has its own id.
# custom:
#   id: I1
#   severity: high
violations contains {"rule": "I1", "msg": "rule ids are not unique"} if {
	_well_formed
	count(_rule_ids) != count(_plan.rules)
}

# METADATA
# title: Apply creates the chain first and the network last
# description: >-
#   Apply creates the chain first and the network last, after every rule, so no sandbox
#   is ever on the network before the rules are in place.
# custom:
#   id: I1
#   severity: high
violations contains {"rule": "I1", "msg": "apply must create the chain first and the network last, after every rule"} if {
	_well_formed
	not _apply_order_ok
}

_apply_order_ok if {
	_plan.apply[0].kind == "chain"
	_plan.apply[count(_plan.apply) - 1].kind == "network"
}

# METADATA
# title: Remove goes in reverse
# description: >-
#   Remove deletes the network first and the chain last.
# custom:
#   id: I1
#   severity: high
violations contains {"rule": "I1", "msg": "remove must delete the network first and the chain last"} if {
	_well_formed
	not _remove_order_ok
}

_remove_order_ok if {
	_plan.remove[0].kind == "network"
	_plan.remove[count(_plan.remove) - 1].kind == "chain"
}

# --- I4: the script refuses on a control plane when any indicator is present -----------
#
# Enrollment and the host agree on what a control plane is.

_indicator_ids := {i.id | some i in _cp.indicators}

# METADATA
# title: The script checks every control-plane indicator
# description: >-
#   The script checks every indicator of isolation.control_plane_indicators (a Nomad
#   server block, a server agent process, a listener on the server-only RPC or Serf port,
#   a listed node name, control-plane node meta).
# custom:
#   id: I4
#   severity: critical
violations contains {"rule": "I4", "msg": sprintf("the script does not check the control-plane indicator %v", [id])} if {
	_well_formed
	some id in _iso.control_plane_indicators
	not id in _indicator_ids
}

# METADATA
# title: Any one indicator refuses
# description: >-
#   The script refuses when any one indicator is present (refuse_when "any").
# custom:
#   id: I4
#   severity: critical
violations contains {"rule": "I4", "msg": sprintf("the script refuses when %v indicators are present, not when any one is", [_cp.refuse_when])} if {
	_well_formed
	_cp.refuse_when != "any"
}

# METADATA
# title: The script refuses in every mode that changes the host
# description: >-
#   The script refuses on a control plane in every mode of isolation.refuse_modes.
# custom:
#   id: I4
#   severity: critical
violations contains {"rule": "I4", "msg": sprintf("--%v does not refuse on a control plane", [m])} if {
	_well_formed
	some m in _iso.refuse_modes
	not m in _cp.refuse_modes
}

# METADATA
# title: The script checks every control-plane node name
# description: >-
#   The script checks every node name placement.control_plane.node_names lists.
# custom:
#   id: I4
#   severity: critical
violations contains {"rule": "I4", "msg": sprintf("control-plane node name %v (placement.control_plane.node_names) is not checked", [n])} if {
	_well_formed
	some n in cfg.placement.control_plane.node_names
	not n in _cp.node_names
}

# METADATA
# title: The script checks every control-plane node meta value
# description: >-
#   The script checks every node meta value placement.control_plane.meta lists.
# custom:
#   id: I4
#   severity: critical
violations contains {"rule": "I4", "msg": sprintf("control-plane node meta %v=%v (placement.control_plane.meta) is not checked", [k, v])} if {
	_well_formed
	some k, vs in cfg.placement.control_plane.meta
	some v in vs
	not v in object.get(_cp.node_meta, k, [])
}

# METADATA
# title: The script checks the Nomad server ports
# description: >-
#   The script checks at least one Nomad server port (RPC, Serf) for a listener.
# custom:
#   id: I4
#   severity: critical
violations contains {"rule": "I4", "msg": "no Nomad server port (RPC, Serf) is checked for a listener"} if {
	_well_formed
	count(_cp.server_ports) == 0
}

# METADATA
# title: The server ports checked are Nomad's
# description: >-
#   Every server port the script checks is one of the plan's Nomad ports.
# custom:
#   id: I4
#   severity: critical
violations contains {"rule": "I4", "msg": sprintf("server port %v is not one of the Nomad ports", [p])} if {
	_well_formed
	some p in _cp.server_ports
	not p in _plan.nomad_ports
}
