package sandgate.isolation

import data.sandgate.config as cfg
import future.keywords.not

# The script itself: I1 (modes, idempotent apply, exact remove) and I4 (refusal on a
# control plane). See isolation.rego for the decision, the helpers and INPUT.

# --- I1 --------------------------------------------------------------------------------

_applied := {[s.kind, s.name] | some s in _plan.apply}

_removed := {[s.kind, s.name] | some s in _plan.remove}

_i1 contains sprintf("the script lacks the --%v mode", [m]) if {
	some m in _iso.modes
	not m in _plan.modes
}

_i1 contains sprintf("%v step %v %v must %v, guarded by %v (has %v, %v)", [list, s.kind, s.name, action, object.get(_iso.guards, s.kind, "nothing: unknown kind"), s.action, s.guard]) if {
	some list, action in {"apply": "ensure", "remove": "delete"}
	some s in _plan[list]
	not _guarded(s, action)
}

_guarded(s, action) if {
	s.action == action
	s.guard == _iso.guards[s.kind]
}

_i1 contains sprintf("remove does not delete the %v %v that apply adds", [o[0], o[1]]) if {
	some o in _applied
	not o in _removed
}

_i1 contains sprintf("remove deletes a %v %v that apply does not add", [o[0], o[1]]) if {
	some o in _removed
	not o in _applied
}

_i1 contains "apply or remove lists an object twice" if {
	count(_applied) + count(_removed) != count(_plan.apply) + count(_plan.remove)
}

_i1 contains sprintf("apply never adds rule %v", [r.id]) if {
	some r in _plan.rules
	not ["rule", r.id] in _applied
}

_i1 contains "rule ids are not unique" if count(_rule_ids) != count(_plan.rules)

_i1 contains "apply must create the chain first and the network last, after every rule" if not _apply_order_ok

_apply_order_ok if {
	_plan.apply[0].kind == "chain"
	_plan.apply[count(_plan.apply) - 1].kind == "network"
}

_i1 contains "remove must delete the network first and the chain last" if not _remove_order_ok

_remove_order_ok if {
	_plan.remove[0].kind == "network"
	_plan.remove[count(_plan.remove) - 1].kind == "chain"
}

# METADATA
# title: The script verifies, applies idempotently and removes exactly
# description: >-
#   The script must offer the modes in isolation.modes (verify, apply, remove). Every
#   apply step ensures one object and is guarded by the check isolation.guards names for
#   its kind (so a second apply changes nothing); every remove step deletes one, guarded
#   the same way; remove deletes exactly the objects apply adds, nothing more or less;
#   every rule is added; rule ids are unique. Apply creates the chain first and the
#   network last, so no sandbox is ever on the network before the rules are in place,
#   and remove goes in reverse.
# custom:
#   id: I1
#   severity: high
violations contains {"rule": "I1", "msg": msg} if {
	_well_formed
	some msg in _i1
}

# --- I4 --------------------------------------------------------------------------------

_indicator_ids := {i.id | some i in _cp.indicators}

_i4 contains sprintf("the script does not check the control-plane indicator %v", [id]) if {
	some id in _iso.control_plane_indicators
	not id in _indicator_ids
}

_i4 contains sprintf("the script refuses when %v indicators are present, not when any one is", [_cp.refuse_when]) if {
	_cp.refuse_when != "any"
}

_i4 contains sprintf("--%v does not refuse on a control plane", [m]) if {
	some m in _iso.refuse_modes
	not m in _cp.refuse_modes
}

_i4 contains sprintf("control-plane node name %v (placement.control_plane.node_names) is not checked", [n]) if {
	some n in cfg.placement.control_plane.node_names
	not n in _cp.node_names
}

_i4 contains sprintf("control-plane node meta %v=%v (placement.control_plane.meta) is not checked", [k, v]) if {
	some k, vs in cfg.placement.control_plane.meta
	some v in vs
	not v in object.get(_cp.node_meta, k, [])
}

_i4 contains "no Nomad server port (RPC, Serf) is checked for a listener" if count(_cp.server_ports) == 0

_i4 contains sprintf("server port %v is not one of the Nomad ports", [p]) if {
	some p in _cp.server_ports
	not p in _plan.nomad_ports
}

# METADATA
# title: The script refuses on a control plane when any indicator is present
# description: >-
#   The script checks every indicator of isolation.control_plane_indicators (a Nomad
#   server block, a server agent process, a listener on the server-only RPC or Serf port,
#   a listed node name, control-plane node meta), refuses when any one is present, and
#   refuses in every mode of isolation.refuse_modes. It checks every node name and meta
#   value that placement.control_plane lists, so enrollment and the host agree on what a
#   control plane is.
# custom:
#   id: I4
#   severity: critical
violations contains {"rule": "I4", "msg": msg} if {
	_well_formed
	some msg in _i4
}
