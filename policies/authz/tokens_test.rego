# Tests for T1, T3 (the token's expiry), T4 and minting (tokens.rego).
# Fixtures live in authz_test.rego.
package sandgate.authz_test

import future.keywords.not

# ---------------------------------------------------------------------------
# T1
# ---------------------------------------------------------------------------

test_t1_session_token_allowed if {
	allowed(base("POST /v1/sandboxes/:id/exec", "session"))
}

test_t1_session_token_without_sandbox_id if {
	# No sandbox_id: T1, and it cannot own the route's sandbox either (T2).
	inp := json.remove(base("GET /v1/sandboxes/:id", "session"), ["token/sandbox_id"])
	ids(inp) == {"T1", "T2"}
}

test_t1_session_token_with_empty_sandbox_id if {
	inp := patch(base("GET /v1/sandboxes/:id", "session"), {"token": {"sandbox_id": ""}})
	ids(inp) == {"T1", "T2"}
}

test_t1_session_token_with_extra_scope if {
	scopes := array.concat(cfg.roles.session.scopes, ["extend"])
	inp := patch(base("GET /v1/sandboxes/:id", "session"), {"token": {"scopes": scopes}})
	ids(inp) == {"T1"}
}

test_t1_session_token_with_non_string_scope if {
	inp := patch(base("GET /v1/sandboxes/:id", "session"), {"token": {"scopes": ["status", 1]}})
	ids(inp) == {"T1"}
}

test_t1_session_token_with_fewer_scopes_allowed_for_them if {
	inp := patch(base("GET /v1/sandboxes/:id", "session"), {"token": {"scopes": ["status"]}})
	allowed(inp)
}

test_t1_does_not_apply_to_agents_without_sandbox_id if {
	allowed(base("POST /v1/sandboxes", "agent"))
}

# ---------------------------------------------------------------------------
# T3: the token
# ---------------------------------------------------------------------------

test_t3_token_valid_one_second_before_exp if {
	allowed(patch(base("GET /v1/sandboxes", "agent"), {"now": tokens.agent.exp - 1}))
}

test_t3_token_expired_at_exp if {
	ids(patch(base("GET /v1/sandboxes", "agent"), {"now": tokens.agent.exp})) == {"T3"}
}

test_t3_token_expired if {
	ids(patch(base("GET /v1/hosts", "operator"), {"now": tokens.operator.exp + 60})) == {"T3"}
}

test_t3_token_without_exp if {
	ids(json.remove(base("GET /v1/sandboxes", "agent"), ["token/exp"])) == {"T3"}
}

test_t3_token_exp_not_a_number if {
	ids(patch(base("GET /v1/sandboxes", "agent"), {"token": {"exp": "tomorrow"}})) == {"T3"}
}

# ---------------------------------------------------------------------------
# T4
# ---------------------------------------------------------------------------

test_t4_active_token_allowed if {
	allowed(base("GET /v1/tokens", "operator"))
}

test_t4_revoked_token if {
	every role in ["operator", "agent", "session"] {
		ids(patch(base("GET /v1/sandboxes/:id", role), {"token": {"active": false}})) == {"T4"}
	}
}

test_t4_active_missing if {
	ids(json.remove(base("GET /v1/sandboxes", "agent"), ["token/active"])) == {"T4"}
}

test_t4_active_not_exactly_true if {
	ids(patch(base("GET /v1/sandboxes", "agent"), {"token": {"active": "true"}})) == {"T4"}
	ids(patch(base("GET /v1/sandboxes", "agent"), {"token": {"active": 1}})) == {"T4"}
}

# ---------------------------------------------------------------------------
# T4, B3: POST /v1/tokens
# ---------------------------------------------------------------------------

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

test_t4_mint_label_bound_comes_from_data if {
	label := concat("", [x | some _ in numbers.range(1, 20); x := "a"])
	allowed(mint({"role": "agent", "ttl_seconds": 3600, "label": label}))
	ids(mint({"role": "agent", "ttl_seconds": 3600, "label": label})) == {"T4"} with data.sandgate.config.tokens.max_label_bytes as 19
}

test_t4_mint_subject_matching_the_pattern_allowed if {
	allowed(mint({"role": "agent", "ttl_seconds": 3600, "subject": "ci-agent"}))
	allowed(mint({"role": "operator", "ttl_seconds": 3600, "subject": "alice@example.org"}))
	allowed(mint({"role": "agent", "ttl_seconds": 3600, "subject": null}))
	allowed(mint({"role": "agent", "ttl_seconds": 3600, "subject": concat("", [x | some _ in numbers.range(1, 128); x := "a"])}))
}

test_t4_mint_subject_with_a_colon_space_or_bad_type_denied if {
	ids(mint({"role": "operator", "ttl_seconds": 3600, "subject": "atk2:sub with space"})) == {"T4"}
	ids(mint({"role": "agent", "ttl_seconds": 3600, "subject": "agent:ci"})) == {"T4"}
	ids(mint({"role": "agent", "ttl_seconds": 3600, "subject": "ci agent"})) == {"T4"}
	ids(mint({"role": "agent", "ttl_seconds": 3600, "subject": "ci\tagent"})) == {"T4"}
	ids(mint({"role": "agent", "ttl_seconds": 3600, "subject": "ci\nagent"})) == {"T4"}
	ids(mint({"role": "agent", "ttl_seconds": 3600, "subject": ""})) == {"T4"}
	ids(mint({"role": "agent", "ttl_seconds": 3600, "subject": "-ci"})) == {"T4"}
	ids(mint({"role": "agent", "ttl_seconds": 3600, "subject": concat("", [x | some _ in numbers.range(1, 129); x := "a"])})) == {"T4"}
	ids(mint({"role": "agent", "ttl_seconds": 3600, "subject": 7})) == {"T4"}
}

test_b3_mint_quota_for_an_operator_denied if {
	ids(mint({"role": "operator", "ttl_seconds": 3600, "quota": {"max_live_sandboxes": 2}})) == {"B3"}
}

test_b3_mint_quota_out_of_bounds_denied if {
	ids(mint({"role": "agent", "ttl_seconds": 3600, "quota": {"max_live_sandboxes": 0}})) == {"B3"}
	ids(mint({"role": "agent", "ttl_seconds": 3600, "quota": {"max_live_sandboxes": 101}})) == {"B3"}
	ids(mint({"role": "agent", "ttl_seconds": 3600, "quota": {}})) == {"B3"}
}
