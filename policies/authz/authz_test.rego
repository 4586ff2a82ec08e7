# Tests for the authz entrypoint, the shared fixtures and INPUT.
#
# Every test patches one valid base input per route (base(route_key, role)) and
# asserts the exact set of violated rule ids. The tests of each rule are in the
# test file beside the policy file that holds it.
package sandgate.authz_test

import data.sandgate.authz
import future.keywords.not

# ---------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------

cfg := data.sandgate.config

# The route table by route key ("POST /v1/sandboxes/:id/exec"); policy data
# keys it by method, then by route template.
routes := {concat(" ", [method, route]): entry |
	some method, by_route in cfg.routes
	some route, entry in by_route
}

now := 1764406800

sid := "k7x2m9p4q8r5t1v6"

other_sid := "a1b2c3d4e5f6g7h8"

sandbox := {
	"id": sid,
	"job_id": concat("", [cfg.prefix, sid]),
	"principal": "agent:ci",
	"state": "running",
	"profile": "strict",
	"network": "none",
	"node": "w1",
	"created_at": now,
	"expires_at": now + 3600,
	"ceiling_at": now + 14400,
}

tokens := {
	"operator": {
		"role": "operator", "sub": "alice",
		"scopes": cfg.roles.operator.scopes,
		"exp": now + 3600, "jti": "01JOPERATOR", "active": true,
	},
	"reviewer": {
		"role": "reviewer", "sub": "sec-team",
		"scopes": cfg.roles.reviewer.scopes,
		"exp": now + 3600, "jti": "01JREVIEWER", "active": true,
	},
	"agent": {
		"role": "agent", "sub": "ci",
		"scopes": cfg.roles.agent.scopes,
		"exp": now + 3600, "jti": "01JAGENT", "active": true,
	},
	"session": {
		"role": "session", "sub": sid,
		"scopes": cfg.roles.session.scopes, "sandbox_id": sid,
		"exp": now + 3600, "jti": "01JSESSION", "active": true,
	},
}

requests := {
	"POST /v1/sandboxes": {"params": {}, "body": {
		"ttl_seconds": 3600, "profile": "strict", "network": "none",
		"cpu_mhz": 500, "memory_mb": 512, "image": cfg.images.default, "node": "w1",
	}},
	"GET /v1/sandboxes": {"params": {}},
	"GET /v1/sandboxes/:id": {"params": {"id": sid}},
	"DELETE /v1/sandboxes/:id": {"params": {"id": sid}},
	"POST /v1/sandboxes/:id/exec": {"params": {"id": sid}, "body": {
		"argv": ["echo", "hi"], "timeout_seconds": 30,
		"stdin_bytes": 0, "env_count": 0, "env_names": [],
	}},
	"GET /v1/sandboxes/:id/logs": {"params": {"id": sid}, "query": {"stream": "stdout", "tail_bytes": 4096}},
	"POST /v1/sandboxes/:id/extend": {"params": {"id": sid}, "body": {"ttl_seconds": 3600}},
	"GET /v1/sandboxes/:id/files": {"params": {"id": sid}, "query": {"path": "/workspace/out.txt"}, "file": {"path": "/workspace/out.txt"}},
	"PUT /v1/sandboxes/:id/files": {"params": {"id": sid}, "query": {"path": "/workspace/in.bin", "mode": "0644"}, "file": {"path": "/workspace/in.bin", "bytes": 1024, "mode": 420}},
	"DELETE /v1/sandboxes/:id/files": {"params": {"id": sid}, "query": {"path": "/tmp/scratch"}, "file": {"path": "/tmp/scratch"}},
	"GET /v1/hosts": {"params": {}},
	"PUT /v1/hosts/:node/enrollment": {"params": {"node": "w1"}, "body": {"egress": false}},
	"DELETE /v1/hosts/:node/enrollment": {"params": {"node": "w1"}},
	"POST /v1/hosts/:node/state": {"params": {"node": "w1"}, "body": {"state": "freeze"}},
	"POST /v1/tokens": {"params": {}, "body": {"role": "agent", "ttl_seconds": 86400, "label": "ci", "quota": {"max_live_sandboxes": 3}}},
	"GET /v1/decisions": {"params": {}},
	"GET /v1/tokens": {"params": {}},
	"DELETE /v1/tokens/:jti": {"params": {"jti": "01JAGENT"}},
	"GET /v1/policy": {"params": {}},
	"POST /v1/policy/evaluate": {"params": {}, "body": {"package": "authz", "input": {}}},
	"POST /v1/policy/replay": {"params": {}},
}

# The request document for a route key: method and route split from the key.
request(key) := object.union(requests[key], {"method": parts[0], "route": parts[1]}) if {
	parts := split(key, " ")
}

# A valid input for one route and one role; sandbox routes carry the record.
base(key, role) := object.union(
	{"now": now, "request": request(key), "token": tokens[role]},
	target(key),
)

target(key) := {"sandbox": sandbox} if {
	routes[key].target == "sandbox"
} else := {}

# patch(inp, {...}) merges a partial document into an input (objects merge,
# everything else is replaced).
patch(inp, p) := object.union(inp, p)

# The exact set of rule ids an input violates.
ids(inp) := {v.rule | some v in d.violations} if {
	d := authz.decision with input as inp
}

allowed(inp) if {
	d := authz.decision with input as inp
	d.allow == true
	count(d.violations) == 0
}

denied(inp) if {
	d := authz.decision with input as inp
	d.allow == false
	count(d.violations) > 0
}

exec_key := "POST /v1/sandboxes/:id/exec"

logs_key := "GET /v1/sandboxes/:id/logs"

extend_key := "POST /v1/sandboxes/:id/extend"

create_key := "POST /v1/sandboxes"

# repeat(s, n) is s written n times (n >= 1).
repeat(s, n) := concat("", [s | some _ in numbers.range(1, n)])

exec_with(body) := patch(base(exec_key, "session"), {"request": {"body": body}})

# n distinct env names (n >= 1), as the gateway lists them.
env_names(n) := [sprintf("V%d", [i]) | some i in numbers.range(1, n)]

logs_with(query) := patch(base(logs_key, "session"), {"request": {"query": query}})

extend_with(body) := patch(base(extend_key, "operator"), {"request": {"body": body}})

create_with(body) := patch(base(create_key, "agent"), {"request": {"body": body}})

# ---------------------------------------------------------------------------
# Decision shape and the route table
# ---------------------------------------------------------------------------

test_every_route_has_a_fixture if {
	every key, _ in routes {
		requests[key]
	}
}

# Every capability a route names, advertised: the route tests below judge T2 alone,
# C1 has its own tests (operations_test.rego).
all_capabilities := {route.capability | some route in routes}

test_every_route_allowed_for_each_of_its_roles if {
	every key, route in routes {
		every role in route.roles {
			allowed(base(key, role)) with data.sandgate.config.capabilities as all_capabilities
		}
	}
}

test_every_route_denied_for_roles_it_does_not_list if {
	every key, route in routes {
		every role, _ in cfg.roles {
			_route_role_denied(key, route, role) with data.sandgate.config.capabilities as all_capabilities
		}
	}
}

_route_role_denied(_, route, role) if role in route.roles

_route_role_denied(key, route, role) if {
	not role in route.roles
	"T2" in ids(base(key, role))
}

test_decision_shape_on_allow if {
	d := authz.decision with input as base("GET /v1/sandboxes/:id", "session")
	d == {"allow": true, "violations": set(), "warnings": set(), "dryrun": set()}
}

test_decision_violation_carries_rule_and_msg if {
	d := authz.decision with input as patch(base("GET /v1/sandboxes", "agent"), {"token": {"active": false}})
	d.allow == false
	some v in d.violations
	v.rule == "T4"
	is_string(v.msg)
}

test_empty_input_denies if {
	ids({}) == {"INPUT", "T2", "T3", "T4"}
	denied({})
}

test_no_input_at_all_denies if {
	d := authz.decision
	d.allow == false
	{v.rule | some v in d.violations} == {"INPUT", "T2", "T3", "T4"}
}

# ---------------------------------------------------------------------------
# INPUT
# ---------------------------------------------------------------------------

test_input_now_missing if {
	ids(json.remove(base("GET /v1/sandboxes", "operator"), ["now"])) == {"INPUT", "T3"}
}

test_input_now_not_a_number if {
	ids(patch(base("GET /v1/sandboxes", "operator"), {"now": "1764406800"})) == {"INPUT", "T3"}
}

test_input_request_missing if {
	ids(json.remove(base("GET /v1/sandboxes", "operator"), ["request"])) == {"INPUT", "T2"}
}

test_input_request_not_an_object if {
	ids(patch(base("GET /v1/sandboxes", "operator"), {"request": "GET /v1/sandboxes"})) == {"INPUT", "T2"}
}

test_input_method_missing if {
	ids(json.remove(base("GET /v1/sandboxes", "operator"), ["request/method"])) == {"INPUT", "T2"}
}

test_input_route_not_a_string if {
	ids(patch(base("GET /v1/sandboxes", "operator"), {"request": {"route": 7}})) == {"INPUT", "T2"}
}

test_input_params_not_an_object if {
	ids(patch(base("GET /v1/sandboxes", "operator"), {"request": {"params": ["x"]}})) == {"INPUT"}
}

test_input_body_not_an_object if {
	inp := patch(base("POST /v1/sandboxes", "agent"), {"request": {"body": "{}"}})
	ids(inp) == {"INPUT"}
}

test_input_query_not_an_object if {
	inp := patch(base("GET /v1/sandboxes/:id/logs", "session"), {"request": {"query": "stream=stdout"}})
	ids(inp) == {"INPUT"}
}

test_input_null_containers_are_absent if {
	inp := patch(base("GET /v1/sandboxes", "agent"), {"request": {"params": null, "query": null, "body": null}})
	allowed(inp)
}

test_input_params_absent_on_sandbox_route_is_h9 if {
	# Without params there is no :id: malformed, and not the session's own.
	inp := json.remove(base("GET /v1/sandboxes/:id", "session"), ["request/params"])
	ids(inp) == {"H9", "T2"}
}

test_input_token_missing if {
	ids(json.remove(base("GET /v1/sandboxes", "agent"), ["token"])) == {"INPUT", "T2", "T3", "T4"}
}

test_input_token_not_an_object if {
	ids(patch(base("GET /v1/sandboxes", "agent"), {"token": "Bearer x"})) == {"INPUT", "T2", "T3", "T4"}
}

test_input_role_missing if {
	ids(json.remove(base("GET /v1/sandboxes", "agent"), ["token/role"])) == {"INPUT", "T2"}
}

test_input_role_not_a_string if {
	ids(patch(base("GET /v1/sandboxes", "agent"), {"token": {"role": ["agent"]}})) == {"INPUT", "T2"}
}

test_input_role_unknown if {
	ids(patch(base("GET /v1/sandboxes", "agent"), {"token": {"role": "admin"}})) == {"INPUT", "T2"}
}

test_input_unknown_role_gets_no_route if {
	inp := patch(base("GET /v1/tokens", "operator"), {"token": {"role": "root"}})
	ids(inp) == {"INPUT", "T2"}
}

test_input_sub_missing if {
	ids(json.remove(base("GET /v1/sandboxes", "agent"), ["token/sub"])) == {"INPUT"}
}

test_input_sub_empty if {
	ids(patch(base("GET /v1/sandboxes", "operator"), {"token": {"sub": ""}})) == {"INPUT"}
}

test_input_scopes_missing if {
	ids(json.remove(base("GET /v1/sandboxes", "agent"), ["token/scopes"])) == {"INPUT", "T2"}
}

test_input_scopes_not_an_array if {
	ids(patch(base("GET /v1/sandboxes", "agent"), {"token": {"scopes": "sandboxes:list"}})) == {"INPUT", "T2"}
}

test_input_sandbox_not_an_object if {
	inp := patch(base("GET /v1/sandboxes/:id", "operator"), {"sandbox": "k7x2m9p4q8r5t1v6"})
	ids(inp) == {"INPUT", "T2"}
}

test_input_sandbox_null_is_absent if {
	inp := patch(base("GET /v1/sandboxes/:id", "operator"), {"sandbox": null})
	ids(inp) == {"T2"}
}

test_input_sandbox_record_missing_string_fields if {
	every field in ["id", "job_id", "principal", "state"] {
		"INPUT" in ids(json.remove(base("GET /v1/sandboxes/:id", "operator"), [concat("/", ["sandbox", field])]))
	}
}

test_input_sandbox_state_missing_only_input_and_t3 if {
	inp := json.remove(base("GET /v1/sandboxes/:id", "session"), ["sandbox/state"])
	ids(inp) == {"INPUT", "T3"}
}

test_input_sandbox_principal_not_a_string if {
	inp := patch(base("GET /v1/sandboxes/:id", "operator"), {"sandbox": {"principal": 42}})
	ids(inp) == {"INPUT"}
}

test_input_sandbox_record_missing_deadlines if {
	inp := json.remove(base("GET /v1/sandboxes/:id", "operator"), ["sandbox/expires_at"])
	ids(inp) == {"INPUT"}
	inp2 := patch(base("GET /v1/sandboxes/:id", "operator"), {"sandbox": {"ceiling_at": "soon"}})
	ids(inp2) == {"INPUT"}
}

test_input_sandbox_false_is_not_a_record if {
	ids(patch(base("GET /v1/sandboxes/:id", "operator"), {"sandbox": false})) == {"INPUT", "T2"}
}

test_input_malformed_sandbox_on_a_route_without_target if {
	ids(patch(base("GET /v1/sandboxes", "agent"), {"sandbox": {"id": 7}})) == {"INPUT"}
}

test_input_sandbox_absent_on_a_route_without_target if {
	allowed(base("GET /v1/sandboxes", "agent"))
	not base("GET /v1/sandboxes", "agent").sandbox
}

# A missing container is one cause: one message, not one per field it lacks.
test_input_messages_name_each_missing_fact if {
	d := authz.decision with input as {}
	msgs := {v.msg | some v in d.violations; v.rule == "INPUT"}
	msgs == {
		"now is missing or not a number",
		"request is missing or not an object",
		"token is missing or not an object",
	}
}

test_input_messages_name_each_missing_field if {
	d := authz.decision with input as {"request": {}, "token": {}, "sandbox": {}}
	msgs := {v.msg | some v in d.violations; v.rule == "INPUT"}
	msgs == {
		"now is missing or not a number",
		"request.method is missing or not a string",
		"request.route is missing or not a string",
		"token.role is missing or not a string",
		"token.sub is missing or not a non-empty string",
		"token.scopes is missing or not an array",
		"sandbox.id is missing or not a string",
		"sandbox.job_id is missing or not a string",
		"sandbox.principal is missing or not a string",
		"sandbox.state is missing or not a string",
		"sandbox.expires_at is missing or not a number",
		"sandbox.ceiling_at is missing or not a number",
	}
}

test_input_a_sandbox_that_is_not_an_object_gets_one_message if {
	d := authz.decision with input as patch(base("GET /v1/sandboxes/:id", "operator"), {"sandbox": "k7x2m9p4q8r5t1v6"})
	{v.msg | some v in d.violations; v.rule == "INPUT"} == {"sandbox is not an object"}
}

test_input_an_unknown_role_is_named_as_such if {
	d := authz.decision with input as patch(base("GET /v1/sandboxes", "agent"), {"token": {"role": "admin"}})
	{v.msg | some v in d.violations; v.rule == "INPUT"} == {"token.role is not a known role"}
	d2 := authz.decision with input as patch(base("GET /v1/sandboxes", "agent"), {"token": {"role": 7}})
	{v.msg | some v in d2.violations; v.rule == "INPUT"} == {"token.role is missing or not a string"}
}
