# Tests for T1-T4. Fixtures (base, patch, ids, ...) live in authz_test.rego.
package sandgate.authz_test

import data.sandgate.authz

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
# T2: route table
# ---------------------------------------------------------------------------

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

# ---------------------------------------------------------------------------
# T2: session tokens never leave their own sandbox routes
# ---------------------------------------------------------------------------

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

other_sandbox := object.union(sandbox, {"id": other_sid, "job_id": concat("", [cfg.prefix, other_sid])})

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

# ---------------------------------------------------------------------------
# T2: agents act on their own sandboxes only
# ---------------------------------------------------------------------------

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

# ---------------------------------------------------------------------------
# T2: operators
# ---------------------------------------------------------------------------

test_t2_operator_on_any_principals_sandbox_allowed if {
	allowed(patch(base("POST /v1/sandboxes/:id/exec", "operator"), {"sandbox": {"principal": "agent:other"}}))
}

test_t2_operator_on_a_missing_sandbox_denied if {
	every key, route in cfg.routes {
		_missing_target_denied(key, route)
	}
}

_missing_target_denied(_, route) if not route.target

_missing_target_denied(key, route) if {
	route.target == "sandbox"
	ids(json.remove(base(key, "operator"), ["sandbox"])) == {"T2"}
}

test_t2_operator_without_the_route_scope if {
	inp := patch(base("POST /v1/tokens", "operator"), {"token": {"scopes": ["tokens:read"]}})
	ids(inp) == {"T2"}
}

test_t2_role_on_route_without_the_role_scope if {
	# Policy data drift: a route lists a role whose scopes do not include the
	# route's scope. The token even claims it; still refused.
	routes := object.union(cfg.routes, {"GET /v1/hosts": {"roles": ["operator", "agent"]}})
	inp := patch(base("GET /v1/hosts", "agent"), {"token": {"scopes": ["hosts:read"]}})
	d := authz.decision with input as inp with data.sandgate.config.routes as routes
	d.violations == {{"rule": "T2", "msg": "role is not granted the scope of GET /v1/hosts"}}
}

# ---------------------------------------------------------------------------
# T3
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

# The session token outlives nothing: move the token's exp far out so that only
# the sandbox's own expiry is tested.
long_session(key) := patch(base(key, "session"), {"token": {"exp": sandbox.ceiling_at + 3600}})

test_t3_session_allowed_one_second_before_sandbox_expiry if {
	allowed(patch(base("GET /v1/sandboxes/:id", "session"), {"now": sandbox.expires_at - 1}))
	allowed(patch(long_session("POST /v1/sandboxes/:id/exec"), {"now": sandbox.expires_at - 1}))
}

test_t3_session_refused_at_sandbox_expiry if {
	ids(patch(long_session("GET /v1/sandboxes/:id"), {"now": sandbox.expires_at})) == {"T3"}
}

test_t3_session_refused_one_second_past_sandbox_expiry if {
	every key in ["GET /v1/sandboxes/:id", "DELETE /v1/sandboxes/:id", "POST /v1/sandboxes/:id/exec", "GET /v1/sandboxes/:id/logs"] {
		ids(patch(long_session(key), {"now": sandbox.expires_at + 1})) == {"T3"}
	}
}

test_t3_session_refused_past_expiry_with_its_own_exp_too if {
	ids(patch(base("GET /v1/sandboxes/:id", "session"), {"now": sandbox.expires_at + 1})) == {"T3"}
}

test_t3_session_refused_on_ended_sandbox if {
	ids(patch(base("GET /v1/sandboxes/:id", "session"), {"sandbox": {"state": "ended"}})) == {"T3"}
}

test_t3_session_refused_on_failed_sandbox if {
	ids(patch(base("POST /v1/sandboxes/:id/exec", "session"), {"sandbox": {"state": "failed"}})) == {"T3"}
}

test_t3_session_refused_past_ceiling_even_if_expires_at_is_later if {
	inp := patch(long_session("GET /v1/sandboxes/:id"), {
		"now": sandbox.ceiling_at,
		"sandbox": {"expires_at": sandbox.ceiling_at + 60},
	})
	ids(inp) == {"T3"}
}

expired_sandbox := {"now": sandbox.expires_at + 1, "token": {"exp": sandbox.ceiling_at + 3600}}

test_t3_operator_and_agent_may_inspect_and_destroy_an_expired_sandbox if {
	every role in ["operator", "agent"] {
		every key in ["GET /v1/sandboxes/:id", "DELETE /v1/sandboxes/:id", "GET /v1/sandboxes/:id/logs"] {
			allowed(patch(base(key, role), expired_sandbox))
		}
	}
}

test_t3_operator_and_agent_may_destroy_an_ended_sandbox if {
	every role in ["operator", "agent"] {
		allowed(patch(base("DELETE /v1/sandboxes/:id", role), {"sandbox": {"state": "ended"}}))
		allowed(patch(base("GET /v1/sandboxes/:id", role), {"sandbox": {"state": "ended"}}))
	}
}

test_t3_exec_on_an_expired_sandbox_refused_for_operator_and_agent if {
	every role in ["operator", "agent"] {
		ids(patch(base("POST /v1/sandboxes/:id/exec", role), expired_sandbox)) == {"T3"}
	}
}

test_t3_exec_on_an_ended_sandbox_refused_for_operator if {
	ids(patch(base("POST /v1/sandboxes/:id/exec", "operator"), {"sandbox": {"state": "ended"}})) == {"T3"}
}

# A failed start is terminal in the store: nothing runs on it, whoever asks.
test_t3_exec_and_extend_on_a_failed_sandbox_refused if {
	every role in ["operator", "agent"] {
		ids(patch(base("POST /v1/sandboxes/:id/exec", role), {"sandbox": {"state": "failed"}})) == {"T3"}
	}
	ids(patch(base("POST /v1/sandboxes/:id/extend", "operator"), {"sandbox": {"state": "failed"}})) == {"T3"}
}

test_t3_a_failed_sandbox_may_be_inspected_and_destroyed if {
	every role in ["operator", "agent"] {
		every key in ["GET /v1/sandboxes/:id", "DELETE /v1/sandboxes/:id", "GET /v1/sandboxes/:id/logs"] {
			allowed(patch(base(key, role), {"sandbox": {"state": "failed"}}))
		}
	}
}

# A state the policy does not list as live is not live (fail closed).
test_t3_an_unknown_state_is_not_live if {
	every state in ["expired", "zombie", "", "RUNNING"] {
		ids(patch(base("POST /v1/sandboxes/:id/exec", "operator"), {"sandbox": {"state": state}})) == {"T3"}
	}
}

test_t3_every_live_state_runs_exec if {
	every state in cfg.sandbox.states.live {
		allowed(patch(base("POST /v1/sandboxes/:id/exec", "operator"), {"sandbox": {"state": state}}))
	}
}

test_t3_extend_of_an_expired_sandbox_refused if {
	ids(patch(base("POST /v1/sandboxes/:id/extend", "operator"), expired_sandbox)) == {"T3"}
}

test_t3_operator_exec_one_second_before_expiry_allowed if {
	allowed(patch(base("POST /v1/sandboxes/:id/exec", "operator"), {"now": sandbox.expires_at - 1}))
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

test_t2_fires_even_if_no_specific_message_matches if {
	# Safety net: should the fast path and the messages ever disagree, T2 still
	# fires with a generic message.
	d := authz.decision with input as base("GET /v1/hosts", "agent")
		with authz._t2_errors as set()
	d.violations == {{"rule": "T2", "msg": "request is not authorized for this route"}}
}
