# Tests for T2 and C1 (routes.rego). Fixtures live in authz_test.rego.
package sandgate.authz_test

import data.sandgate.authz
import future.keywords.not

# ---------------------------------------------------------------------------
# T2
# ---------------------------------------------------------------------------

other_sandbox := object.union(sandbox, {"id": other_sid, "job_id": concat("", [cfg.prefix, other_sid])})

test_t2_unknown_route if {
	inp := patch(base("GET /v1/sandboxes", "operator"), {"request": {"route": "/v1/secrets"}})
	ids(inp) == {"T2"}
}

test_t2_unknown_method_on_known_route if {
	inp := patch(base("GET /v1/sandboxes", "operator"), {"request": {"method": "PATCH"}})
	ids(inp) == {"T2"}
}

test_t2_method_is_case_sensitive if {
	inp := patch(base("GET /v1/sandboxes", "operator"), {"request": {"method": "get"}})
	ids(inp) == {"T2"}
}

test_t2_concrete_path_is_not_a_route_template if {
	inp := patch(base("GET /v1/sandboxes/:id", "operator"), {"request": {"route": "/v1/sandboxes/k7x2m9p4q8r5t1v6"}})
	ids(inp) == {"T2"}
}

test_t2_session_token_cannot_list if {
	ids(base("GET /v1/sandboxes", "session")) == {"T2"}
}

test_t2_session_token_cannot_create if {
	ids(base("POST /v1/sandboxes", "session")) == {"T2"}
}

test_t2_session_token_cannot_extend if {
	ids(base("POST /v1/sandboxes/:id/extend", "session")) == {"T2", "L2"}
}

test_t2_session_token_cannot_read_hosts if {
	ids(base("GET /v1/hosts", "session")) == {"T2"}
}

test_t2_session_token_cannot_enroll if {
	ids(base("PUT /v1/hosts/:node/enrollment", "session")) == {"T2"}
	ids(base("DELETE /v1/hosts/:node/enrollment", "session")) == {"T2"}
	ids(base("POST /v1/hosts/:node/state", "session")) == {"T2"}
}

test_t2_session_token_cannot_mint_list_or_revoke_tokens if {
	ids(base("POST /v1/tokens", "session")) == {"T2"}
	ids(base("GET /v1/tokens", "session")) == {"T2"}
	ids(base("DELETE /v1/tokens/:jti", "session")) == {"T2"}
}

test_t2_session_token_cannot_read_or_evaluate_policy if {
	every key in ["GET /v1/policy", "POST /v1/policy/evaluate", "GET /v1/decisions"] {
		ids(base(key, "session")) == {"T2"} with data.sandgate.config.capabilities as all_capabilities
	}
}

test_t2_session_token_on_its_own_sandbox_allowed if {
	allowed(base("GET /v1/sandboxes/:id", "session"))
	allowed(base("DELETE /v1/sandboxes/:id", "session"))
	allowed(base("POST /v1/sandboxes/:id/exec", "session"))
	allowed(base("GET /v1/sandboxes/:id/logs", "session"))
}

test_t2_session_token_on_another_sandbox if {
	every key in ["GET /v1/sandboxes/:id", "DELETE /v1/sandboxes/:id", "POST /v1/sandboxes/:id/exec", "GET /v1/sandboxes/:id/logs"] {
		ids(patch(base(key, "session"), {"request": {"params": {"id": other_sid}}, "sandbox": other_sandbox})) == {"T2"}
	}
}

test_t2_session_token_on_a_missing_sandbox if {
	inp := json.remove(patch(base("GET /v1/sandboxes/:id", "session"), {"request": {"params": {"id": other_sid}}}), ["sandbox"])
	ids(inp) == {"T2"}
}

test_t2_session_token_on_its_own_missing_sandbox if {
	ids(json.remove(base("POST /v1/sandboxes/:id/exec", "session"), ["sandbox"])) == {"T2"}
}

test_t2_session_token_without_the_route_scope if {
	inp := patch(base("POST /v1/sandboxes/:id/exec", "session"), {"token": {"scopes": ["status", "logs"]}})
	ids(inp) == {"T2"}
}

test_t2_agent_on_own_sandbox_allowed if {
	every key in ["GET /v1/sandboxes/:id", "DELETE /v1/sandboxes/:id", "POST /v1/sandboxes/:id/exec", "GET /v1/sandboxes/:id/logs"] {
		allowed(base(key, "agent"))
	}
}

test_t2_agent_on_someone_elses_sandbox if {
	every key in ["GET /v1/sandboxes/:id", "DELETE /v1/sandboxes/:id", "POST /v1/sandboxes/:id/exec", "GET /v1/sandboxes/:id/logs"] {
		ids(patch(base(key, "agent"), {"sandbox": {"principal": "agent:other"}})) == {"T2"}
	}
}

# Ownership is role and subject together: an agent token minted with the
# operator's subject owns none of the operator's sandboxes.
test_t2_agent_with_an_operators_subject_owns_none_of_its_sandboxes if {
	every key in ["GET /v1/sandboxes/:id", "DELETE /v1/sandboxes/:id", "POST /v1/sandboxes/:id/exec", "GET /v1/sandboxes/:id/logs"] {
		inp := patch(base(key, "agent"), {
			"token": object.union(tokens.agent, {"sub": "alice"}),
			"sandbox": {"principal": "operator:alice"},
		})
		ids(inp) == {"T2"}
	}
}

test_t2_agent_owns_by_role_and_subject if {
	allowed(patch(base("GET /v1/sandboxes/:id", "agent"), {
		"token": object.union(tokens.agent, {"sub": "alice"}),
		"sandbox": {"principal": "agent:alice"},
	}))

	# the bare subject is not a principal
	ids(patch(base("GET /v1/sandboxes/:id", "agent"), {"sandbox": {"principal": "ci"}})) == {"T2"}
}

test_t2_agent_on_a_missing_sandbox if {
	ids(json.remove(base("GET /v1/sandboxes/:id", "agent"), ["sandbox"])) == {"T2"}
}

test_t2_agent_record_without_principal if {
	inp := json.remove(base("GET /v1/sandboxes/:id", "agent"), ["sandbox/principal"])
	ids(inp) == {"INPUT", "T2"}
}

test_t2_agent_cannot_extend if {
	ids(base("POST /v1/sandboxes/:id/extend", "agent")) == {"T2", "L2"}
}

test_t2_agent_cannot_use_operator_routes if {
	every key in ["GET /v1/hosts", "PUT /v1/hosts/:node/enrollment", "POST /v1/hosts/:node/state", "DELETE /v1/hosts/:node/enrollment", "POST /v1/tokens", "GET /v1/tokens", "DELETE /v1/tokens/:jti", "GET /v1/decisions", "GET /v1/policy", "POST /v1/policy/evaluate"] {
		ids(base(key, "agent")) == {"T2"} with data.sandgate.config.capabilities as all_capabilities
	}
}

test_t2_agent_without_the_route_scope if {
	inp := patch(base("POST /v1/sandboxes", "agent"), {"token": {"scopes": ["sandboxes:list"]}})
	ids(inp) == {"T2"}
}

test_t2_agent_claiming_an_operator_scope_still_denied if {
	scopes := array.concat(cfg.roles.agent.scopes, ["hosts:read"])
	inp := patch(base("GET /v1/hosts", "agent"), {"token": {"scopes": scopes}})
	ids(inp) == {"T2"}
}

test_t2_operator_on_any_principals_sandbox_allowed if {
	allowed(patch(base("POST /v1/sandboxes/:id/exec", "operator"), {"sandbox": {"principal": "agent:other"}}))
}

test_t2_operator_on_a_missing_sandbox_denied if {
	every key, route in routes {
		_missing_target_denied(key, route)
	}
}

test_t2_operator_without_the_route_scope if {
	inp := patch(base("POST /v1/tokens", "operator"), {"token": {"scopes": ["tokens:read"]}})
	ids(inp) == {"T2"}
}

_missing_target_denied(_, route) if not route.target

_missing_target_denied(key, route) if {
	route.target == "sandbox"
	ids(json.remove(base(key, "operator"), ["sandbox"])) == {"T2"}
}

# ---------------------------------------------------------------------------
# C1
# ---------------------------------------------------------------------------

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
	without := json.remove(cfg, ["routes/GET/~1v1~1hosts/capability"])
	ids(base("GET /v1/hosts", "operator")) == {"C1"} with data.sandgate.config as without
}

# ---------------------------------------------------------------------------
# T2: one cause, one message
# ---------------------------------------------------------------------------

msgs(inp) := {v.msg | some v in d.violations} if {
	d := authz.decision with input as inp
}

test_t2_a_session_token_listing_sandboxes_gets_one_message if {
	msgs(base("GET /v1/sandboxes", "session")) == {"role may not call GET /v1/sandboxes"}
}

test_t2_a_request_without_a_method_has_no_route_key if {
	msgs(json.remove(base("GET /v1/sandboxes", "operator"), ["request/method"])) == {
		"request.method is missing or not a string",
		"request has no route key",
	}
}

test_t2_an_unknown_route_is_named if {
	msgs(patch(base("GET /v1/sandboxes", "operator"), {"request": {"route": "/v1/secrets"}})) == {"route GET /v1/secrets is not in the route table"}
}

test_t2_a_role_the_route_lists_without_the_scope_gets_the_scope_message if {
	msgs(patch(base("POST /v1/sandboxes/:id/exec", "session"), {"token": {"scopes": ["status"]}})) == {"token lacks the scope of POST /v1/sandboxes/:id/exec"}
}

# Regression: an agent token whose sub is not a string, on a sandbox route,
# was an evaluation error (concat of a non-string); it is a violation.
test_t2_an_agent_sub_that_is_not_a_string_is_refused_not_an_error if {
	every sub in [7, null, ["ci"], {"a": 1}, true] {
		ids(patch(base("GET /v1/sandboxes/:id", "agent"), {"token": {"sub": sub}})) == {"INPUT", "T2"}
	}
}

# A method the table does not list on a sandbox route is refused by T2; the
# record's own checks still run.
test_t2_an_unlisted_method_on_a_sandbox_route if {
	ids(patch(base("GET /v1/sandboxes/:id", "operator"), {"request": {"method": "PATCH"}})) == {"T2"}
	ids(patch(base("GET /v1/sandboxes/:id", "operator"), {"request": {"method": "PATCH"}, "sandbox": {"job_id": "payments-api"}})) == {"T2", "H9"}
}

# ---------------------------------------------------------------------------
# The route table as the rules read it
# ---------------------------------------------------------------------------

# The routes under /v1/sandboxes/:id, where the policy checks the target record
# (T2's ownership, T3, H9), are exactly the routes the table marks target:
# sandbox.
test_the_sandbox_routes_are_the_routes_marked_target_sandbox if {
	marked := {key | some key, route in routes; route.target == "sandbox"}
	prefixed := {key | some key, _ in routes; startswith(split(key, " ")[1], "/v1/sandboxes/:id")}
	marked == prefixed
	count(marked) == 8
}

# Ownership is written for these roles (operator: none; agent: its principal;
# session: its sandbox id): no route may let another role (a reviewer, say)
# reach a sandbox.
test_every_sandbox_route_lists_only_roles_the_ownership_rules_know if {
	every route in {r | some r in routes; r.target == "sandbox"} {
		every role in route.roles {
			role in {"operator", "agent", "session"}
		}
	}
}

# The load-time check of settings.go (validateRoutes), in Rego: every role a
# route lists is granted the route's scope.
test_every_role_a_route_lists_is_granted_the_route_scope if {
	every _, route in routes {
		every role in route.roles {
			route.scope in cfg.roles[role].scopes
		}
	}
}
