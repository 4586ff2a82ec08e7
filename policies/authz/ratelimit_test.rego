# Tests of Q1 (ratelimit.rego): the rate limits of policy data.
package sandgate.authz_test

import data.sandgate.authz
import future.keywords.not

test_q1_every_role_with_its_rate_limit_is_allowed if {
	allowed(base("GET /v1/sandboxes/:id", "session"))
	allowed(base("GET /v1/sandboxes", "agent"))
	allowed(base("GET /v1/hosts", "operator"))
	allowed(base("GET /v1/policy", "reviewer"))
}

test_q1_a_role_without_a_rate_limit_is_denied if {
	ids(base("GET /v1/sandboxes/:id", "session")) == {"Q1"} with data.sandgate.config.rate_limits as object.remove(cfg.rate_limits, ["session"])
}

test_q1_no_rate_limits_at_all_deny_every_role if {
	every role in ["operator", "agent", "session", "reviewer"] {
		"Q1" in ids(base("GET /v1/policy", role)) with data.sandgate.config.rate_limits as null
	}
}

test_q1_a_rate_limit_that_admits_nothing_is_denied if {
	every limit in [
		{"requests_per_second": 0, "burst": 50},
		{"requests_per_second": -1, "burst": 50},
		{"requests_per_second": 10, "burst": 0},
		{"requests_per_second": 10, "burst": 1.5},
		{"requests_per_second": "10", "burst": 50},
		{"requests_per_second": 10},
		{"burst": 50},
		{},
		"fast",
	] {
		ids(base("GET /v1/sandboxes/:id", "session")) == {"Q1"} with data.sandgate.config.rate_limits.session as limit
	}
}

test_q1_the_message_names_the_role_and_the_key if {
	d := authz.decision with input as base("GET /v1/sandboxes", "agent")
		with data.sandgate.config.rate_limits.agent as {"requests_per_second": 0, "burst": 1}
	some v in d.violations
	v.rule == "Q1"
	contains(v.msg, "rate_limits.agent")
}

test_q1_an_unknown_role_is_input_not_q1 if {
	inp := patch(base("GET /v1/sandboxes", "agent"), {"token": {"role": "intruder"}})
	not "Q1" in ids(inp)
	"INPUT" in ids(inp)
}

# The data itself: every role, and the anonymous routes, have a bucket that
# admits something (the gateway refuses a bundle without them at load).
test_q1_policy_data_limits_every_role_and_the_anonymous_routes if {
	every key in object.keys(cfg.roles) | {"anonymous"} {
		limit := cfg.rate_limits[key]
		limit.requests_per_second > 0
		limit.burst >= 1
		floor(limit.burst) == limit.burst
	}
}

# An operator's bucket is the largest: the dashboard polls several views.
test_q1_operators_are_limited_no_tighter_than_agents_and_sessions if {
	every role in ["agent", "session", "reviewer"] {
		cfg.rate_limits.operator.requests_per_second >= cfg.rate_limits[role].requests_per_second
	}
}
