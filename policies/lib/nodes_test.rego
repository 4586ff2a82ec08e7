package sandgate.lib.nodes_test

import data.sandgate.lib.nodes
import future.keywords.not

_worker := {"name": "w1", "control_plane": false, "meta": {}, "attributes": {"unique.hostname": "w1.local"}}

test_a_plain_worker_shows_no_indicator if {
	nodes.control_plane_reasons(_worker) == set()
}

test_colocation_missing_or_true_is_an_indicator if {
	count(nodes.control_plane_reasons(object.remove(_worker, ["control_plane"]))) == 1
	count(nodes.control_plane_reasons(object.union(_worker, {"control_plane": true}))) == 1
	count(nodes.control_plane_reasons(object.union(_worker, {"control_plane": "false"}))) == 1
}

test_colocation_can_be_switched_off_in_data if {
	reasons := nodes.control_plane_reasons(object.union(_worker, {"control_plane": true})) with data.sandgate.config.placement.control_plane.server_colocation as false
	reasons == set()
}

test_meta_indicator_any_case if {
	nodes.control_plane_reasons(object.union(_worker, {"meta": {"node-role": " Server"}})) == {"node meta node-role= Server marks a control-plane node"}
}

test_listed_by_name_or_hostname if {
	count(nodes.control_plane_reasons(_worker)) == 0 with data.sandgate.config.placement.control_plane.node_names as ["other"]
	count(nodes.control_plane_reasons(_worker)) == 1 with data.sandgate.config.placement.control_plane.node_names as ["w1"]
	count(nodes.control_plane_reasons(_worker)) == 1 with data.sandgate.config.placement.control_plane.node_names as ["w1.local"]
}

test_every_indicator_is_reported if {
	node := {"name": "w1", "control_plane": true, "meta": {"sandgate.control_plane": "true"}}
	count(nodes.control_plane_reasons(node)) == 3 with data.sandgate.config.placement.control_plane.node_names as ["w1"]
}

test_isolation_declared_only_with_an_accepted_version if {
	nodes.isolation_declared({"meta": {"sandgate.isolation": "v1"}})
	not nodes.isolation_declared({"meta": {"sandgate.isolation": "v0"}})
	not nodes.isolation_declared({"meta": {"sandgate.isolation": true}})
	not nodes.isolation_declared({"meta": {}})
	not nodes.isolation_declared({})
}
