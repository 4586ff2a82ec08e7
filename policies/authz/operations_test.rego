package sandgate.authz_test

# C1 ----------------------------------------------------------------------------------------

test_c1_advertised_routes_allowed if {
	allowed(base("GET /v1/hosts", "operator"))
	allowed(base("GET /v1/decisions", "operator"))
	allowed(base("GET /v1/policy", "operator"))
}

test_c1_route_of_an_unadvertised_capability_denied if {
	caps := [c | some c in cfg.capabilities; c != "policy.evaluate.v1"]
	every key in ["POST /v1/policy/evaluate", "POST /v1/policy/replay"] {
		ids(base(key, "operator")) == {"C1"} with data.sandgate.config.capabilities as caps
	}
}

test_c1_removing_a_capability_switches_its_routes_off if {
	caps := [c | some c in cfg.capabilities; c != "tokens.v1"]
	every key in ["POST /v1/tokens", "GET /v1/tokens", "DELETE /v1/tokens/:jti"] {
		ids(base(key, "operator")) == {"C1"} with data.sandgate.config.capabilities as caps
	}
	allowed(base("GET /v1/hosts", "operator")) with data.sandgate.config.capabilities as caps
}

test_c1_route_without_a_capability_denied if {
	# (`with` on the whole config: OPA does not see a `with` on config.routes through
	# authz's _cfg.routes lookup.)
	without := json.remove(cfg, ["routes/GET ~1v1~1hosts/capability"])
	ids(base("GET /v1/hosts", "operator")) == {"C1"} with data.sandgate.config as without
}

# T4, B3: minting ---------------------------------------------------------------------------

mint(body) := json.patch(base("POST /v1/tokens", "operator"), [{"op": "add", "path": "/request/body", "value": body}])

test_t4_mint_operator_and_agent_allowed if {
	allowed(mint({"role": "operator", "ttl_seconds": 3600}))
	allowed(mint({"role": "agent", "ttl_seconds": 60, "label": "x"}))
	allowed(mint({"role": "agent", "ttl_seconds": 31536000, "quota": {"max_live_sandboxes": 100}}))
}

test_t4_mint_session_or_unknown_role_denied if {
	ids(mint({"role": "session", "ttl_seconds": 3600})) == {"T4"}
	ids(mint({"role": "root", "ttl_seconds": 3600})) == {"T4"}
	ids(mint({"ttl_seconds": 3600})) == {"T4"}
}

test_t4_mint_ttl_out_of_bounds_denied if {
	ids(mint({"role": "agent", "ttl_seconds": 59})) == {"T4"}
	ids(mint({"role": "agent", "ttl_seconds": 31536001})) == {"T4"}
	ids(mint({"role": "agent", "ttl_seconds": 3600.5})) == {"T4"}
	ids(mint({"role": "agent"})) == {"T4"}
}

test_t4_mint_label_too_long_or_mistyped_denied if {
	ids(mint({"role": "agent", "ttl_seconds": 3600, "label": concat("", [x | some _ in numbers.range(1, 129); x := "a"])})) == {"T4"}
	ids(mint({"role": "agent", "ttl_seconds": 3600, "label": 7})) == {"T4"}
}

# Regression (FuzzAuthorizeMint): the bound is 128 bytes, not 128 characters.
test_t4_mint_label_bound_is_in_bytes if {
	allowed(mint({"role": "agent", "ttl_seconds": 3600, "label": concat("", [x | some _ in numbers.range(1, 64); x := "é"])}))
	ids(mint({"role": "agent", "ttl_seconds": 3600, "label": concat("", [x | some _ in numbers.range(1, 65); x := "é"])})) == {"T4"}
}

test_b3_mint_quota_for_an_operator_denied if {
	ids(mint({"role": "operator", "ttl_seconds": 3600, "quota": {"max_live_sandboxes": 2}})) == {"B3"}
}

test_b3_mint_quota_out_of_bounds_denied if {
	ids(mint({"role": "agent", "ttl_seconds": 3600, "quota": {"max_live_sandboxes": 0}})) == {"B3"}
	ids(mint({"role": "agent", "ttl_seconds": 3600, "quota": {"max_live_sandboxes": 101}})) == {"B3"}
	ids(mint({"role": "agent", "ttl_seconds": 3600, "quota": {}})) == {"B3"}
}
