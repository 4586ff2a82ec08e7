# Tests for POST /v1/sandboxes (create.rego): INPUT on the body, L2, B2, H11.
# Fixtures live in authz_test.rego.
package sandgate.authz_test

import future.keywords.not

test_input_create_unknown_profile if {
	inp := patch(base("POST /v1/sandboxes", "agent"), {"request": {"body": {"profile": "privileged"}}})
	ids(inp) == {"INPUT"}
}

test_input_create_profile_not_a_string if {
	inp := patch(base("POST /v1/sandboxes", "agent"), {"request": {"body": {"profile": ["strict"]}}})
	ids(inp) == {"INPUT"}
}

test_input_create_unknown_network if {
	inp := patch(base("POST /v1/sandboxes", "operator"), {"request": {"body": {"network": "host"}}})
	ids(inp) == {"INPUT"}
}

test_input_create_known_profile_and_network if {
	inp := patch(base("POST /v1/sandboxes", "agent"), {"request": {"body": {"profile": "workspace", "network": "egress"}}})
	allowed(inp)
}

test_input_create_node_not_a_string if {
	inp := patch(base("POST /v1/sandboxes", "agent"), {"request": {"body": {"node": 1}}})
	ids(inp) == {"INPUT"}
}

test_input_create_node_empty if {
	inp := patch(base("POST /v1/sandboxes", "agent"), {"request": {"body": {"node": ""}}})
	ids(inp) == {"INPUT"}
}

test_input_create_all_optional_fields_absent if {
	allowed(patch(base("POST /v1/sandboxes", "agent"), {"request": {"body": {}}}))
	allowed(json.remove(base("POST /v1/sandboxes", "agent"), ["request/body"]))
}

test_input_create_null_fields_are_defaults if {
	inp := patch(base("POST /v1/sandboxes", "agent"), {"request": {"body": {
		"ttl_seconds": null, "profile": null, "network": null,
		"cpu_mhz": null, "memory_mb": null, "image": null, "node": null,
	}}})
	allowed(inp)
}

test_l2_create_ttl_bounds if {
	allowed(create_with({"ttl_seconds": cfg.lifetime.min_ttl_seconds}))
	allowed(create_with({"ttl_seconds": cfg.lifetime.ceiling_seconds}))
	ids(create_with({"ttl_seconds": cfg.lifetime.ceiling_seconds + 1})) == {"L2"}
	ids(create_with({"ttl_seconds": cfg.lifetime.min_ttl_seconds - 1})) == {"L2"}
	ids(create_with({"ttl_seconds": "1h"})) == {"L2"}
}

test_b2_bounds_allowed if {
	allowed(create_with({"cpu_mhz": cfg.sandbox.min_cpu_mhz, "memory_mb": cfg.sandbox.min_memory_mb}))
	allowed(create_with({"cpu_mhz": cfg.sandbox.max_cpu_mhz, "memory_mb": cfg.sandbox.max_memory_mb}))
}

test_b2_cpu_above_max if {
	ids(create_with({"cpu_mhz": cfg.sandbox.max_cpu_mhz + 1})) == {"B2"}
}

test_b2_cpu_below_min if {
	ids(create_with({"cpu_mhz": cfg.sandbox.min_cpu_mhz - 1})) == {"B2"}
}

test_b2_cpu_not_an_integer if {
	ids(create_with({"cpu_mhz": "500"})) == {"B2"}
}

test_b2_memory_above_max if {
	ids(create_with({"memory_mb": cfg.sandbox.max_memory_mb + 1})) == {"B2"}
}

test_b2_memory_below_min if {
	ids(create_with({"memory_mb": cfg.sandbox.min_memory_mb - 1})) == {"B2"}
}

test_b2_memory_not_an_integer if {
	ids(create_with({"memory_mb": 512.5})) == {"B2"}
}

test_h11_allowlisted_images if {
	every image in cfg.images.allowed {
		allowed(create_with({"image": image}))
	}
}

test_h11_image_not_allowlisted if {
	ids(create_with({"image": "evil:latest"})) == {"H11"}
	ids(create_with({"image": concat("", ["docker.io/library/", cfg.images.default])})) == {"H11"}
	ids(create_with({"image": concat("", [cfg.images.default, "@sha256:0000"])})) == {"H11"}
}

test_h11_image_not_a_string if {
	ids(create_with({"image": [cfg.images.default]})) == {"H11"}
}

test_h11_applies_to_operators_too if {
	ids(patch(base(create_key, "operator"), {"request": {"body": {"image": "evil:1"}}})) == {"H11"}
}

test_every_create_field_wrong_at_once if {
	inp := create_with({
		"ttl_seconds": 0, "profile": "root", "network": "host",
		"cpu_mhz": 99999, "memory_mb": 0, "image": "evil:1", "node": 7,
	})
	ids(inp) == {"L2", "INPUT", "B2", "H11"}
}

keyed_create(body) := patch(create_with(body), {"request": {"idempotency_key": true}})

test_t4_reissue_token_with_an_idempotency_key_allowed if {
	allowed(keyed_create({"reissue_token": true}))
	allowed(keyed_create({"reissue_token": false}))
	allowed(create_with({"reissue_token": false}))
	allowed(create_with({"reissue_token": null}))
}

test_t4_reissue_token_without_a_key_or_setting_denied if {
	ids(create_with({"reissue_token": true})) == {"T4"}
	ids(keyed_create({"reissue_token": "yes"})) == {"T4"}
	ids(keyed_create({"reissue_token": true})) == {"T4"} with data.sandgate.config.tokens.reissue_on_repeat as false
	ids(keyed_create({"reissue_token": true})) == {"T4"} with data.sandgate.config as json.remove(cfg, ["tokens/reissue_on_repeat"])
}
