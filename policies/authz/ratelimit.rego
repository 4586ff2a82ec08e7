# Fair use (Q1): the numbers of the gateway's rate limits.
#
# The gateway keeps one token bucket per principal (role and subject) and one
# per client address for the routes that take no token, and refuses a request
# past its bucket with 429 rate_limited before it asks for this decision, so a
# flood costs no evaluation and no decision-log line per request
# (docs/api.md, docs/policies.md). Rego cannot hold a bucket's state; what the
# bundle owns is the numbers, data.sandgate.config.rate_limits, per role and
# for "anonymous". The gateway has no numbers but these: a role the data gives
# no limit is refused every request here, and the gateway refuses a bundle
# without them at load.
package sandgate.authz

import data.sandgate.config as cfg
import data.sandgate.lib.numbers
import future.keywords.not

# METADATA
# title: The caller's role has a rate limit in policy data
# description: >-
#   Refuses every request of a role (a key of data.sandgate.config.roles) for
#   which data.sandgate.config.rate_limits holds no token bucket that admits
#   anything: requests_per_second a positive number and burst a whole number
#   of at least 1. The gateway holds each principal to its role's bucket and
#   answers 429 rate_limited past it before this decision is asked.
# custom:
#   id: Q1
#   severity: high
violations contains {"rule": "Q1", "msg": sprintf("policy data gives role %v no rate limit (rate_limits.%v needs requests_per_second > 0 and a whole burst >= 1)", [input.token.role, input.token.role])} if {
	cfg.roles[input.token.role]
	not {
		limit := cfg.rate_limits[input.token.role]
		is_number(limit.requests_per_second)
		limit.requests_per_second > 0
		numbers.int_at_least(limit.burst, 1)
	}
}
