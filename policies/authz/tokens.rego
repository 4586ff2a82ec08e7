# Token rules: T1 (what a session token is), T3 (the token's own expiry), T4
# (revocation, and what POST /v1/tokens may mint), B3 (the quota of a minted
# agent token). T2 (what a token may call) is in routes.rego.
package sandgate.authz

import data.sandgate.config as cfg
import data.sandgate.lib.numbers
import future.keywords.not

# ---------------------------------------------------------------------------
# T1: session token shape
# ---------------------------------------------------------------------------

# METADATA
# title: A session token is bound to one sandbox
# description: >-
#   For session tokens: refuses a token without a non-empty sandbox_id claim.
#   It is the only thing that scopes the token to one sandbox (T2 compares it
#   with the route's :id).
# custom:
#   id: T1
#   severity: critical
violations contains {"rule": "T1", "msg": "session token has no sandbox_id"} if {
	input.token.role == "session"
	not {
		is_string(input.token.sandbox_id)
		input.token.sandbox_id != ""
	}
}

# METADATA
# title: A session token carries only session scopes
# description: >-
#   For session tokens: refuses a token carrying any scope outside
#   roles.session.scopes (status, exec, logs, destroy). A session token
#   claiming list, create, extend, tokens, hosts or policy scopes was not
#   minted by the gateway for a sandbox and is refused as a whole. (Scopes
#   that are not an array are refused by INPUT.)
# custom:
#   id: T1
#   severity: critical
violations contains {"rule": "T1", "msg": "session token carries a scope outside the session role"} if {
	input.token.role == "session"
	some scope in input.token.scopes
	not scope in cfg.roles.session.scopes
}

# ---------------------------------------------------------------------------
# T3: the token's expiry
# ---------------------------------------------------------------------------

# METADATA
# title: The token has not expired
# description: >-
#   Refuses when now >= token.exp, and when exp is missing or not a number.
#   Expiry is enforced here at authorization time, independently of the JWT
#   library's own check.
# custom:
#   id: T3
#   severity: high
violations contains {"rule": "T3", "msg": "token has expired or has no exp"} if {
	not {
		is_number(input.token.exp)
		input.now < input.token.exp
	}
}

# ---------------------------------------------------------------------------
# T4: revocation
# ---------------------------------------------------------------------------

# METADATA
# title: The token is active
# description: >-
#   token.active is the gateway's verdict that the token's record exists, is
#   not revoked and (for session tokens) that its SHA-256 digest matches the
#   live sandbox record. Anything but exactly true (false, missing, a string)
#   is refused, so destroy and revoke take effect immediately.
# custom:
#   id: T4
#   severity: critical
violations contains {"rule": "T4", "msg": "token is revoked, unknown or not active"} if {
	not input.token.active == true
}

# ---------------------------------------------------------------------------
# T4, B3: POST /v1/tokens
# ---------------------------------------------------------------------------

# METADATA
# title: A minted token has a mintable role
# description: >-
#   POST /v1/tokens mints only the roles in tokens.mintable_roles (operator,
#   agent: session tokens come only from create, bound to their sandbox). Every
#   minted token is recorded, listable and revocable.
# custom:
#   id: T4
#   severity: high
violations contains {"rule": "T4", "msg": sprintf("mint: role %v is not one of %v", [object.get(input, ["request", "body", "role"], null), object.get(cfg, ["tokens", "mintable_roles"], "unset")])} if {
	input.request.method == "POST"
	input.request.route == "/v1/tokens"
	not input.request.body.role in cfg.tokens.mintable_roles
}

# METADATA
# title: A minted token has a bounded lifetime
# description: >-
#   POST /v1/tokens: body.ttl_seconds must be an integer in
#   [tokens.min_ttl_seconds, tokens.max_ttl_seconds].
# custom:
#   id: T4
#   severity: high
violations contains {"rule": "T4", "msg": sprintf("mint: ttl_seconds must be an integer in [%v, %v]", [object.get(cfg, ["tokens", "min_ttl_seconds"], "unset"), object.get(cfg, ["tokens", "max_ttl_seconds"], "unset")])} if {
	input.request.method == "POST"
	input.request.route == "/v1/tokens"
	not numbers.int_in(input.request.body.ttl_seconds, cfg.tokens.min_ttl_seconds, cfg.tokens.max_ttl_seconds)
}

# METADATA
# title: A minted token's label is bounded
# description: >-
#   POST /v1/tokens (and the offline mint, which is decided on the same
#   input): body.label, when present and not null, is a string of at most
#   tokens.max_label_bytes bytes (UTF-8 bytes, not characters).
# custom:
#   id: T4
#   severity: high
violations contains {"rule": "T4", "msg": sprintf("mint: label must be a string of at most %v bytes", [object.get(cfg, ["tokens", "max_label_bytes"], "unset")])} if {
	input.request.method == "POST"
	input.request.route == "/v1/tokens"
	label := input.request.body.label
	label != null

	# count() of a string counts characters; hex.encode writes two digits a
	# byte of the UTF-8.
	not {
		is_string(label)
		count(hex.encode(label)) <= 2 * cfg.tokens.max_label_bytes
	}
}

# METADATA
# title: A minted token's subject names one principal
# description: >-
#   POST /v1/tokens (and the offline mint): body.subject, when present and
#   not null, must be a string matching tokens.subject_pattern (by default
#   a letter or digit, then at most 127 of letters, digits and . _ @ -). A
#   principal is written role:subject in records, logs and filters, so a
#   colon would make two principals read alike; white space and control
#   characters would forge log lines and table cells. An absent subject is
#   chosen by the gateway (role-xxxxxxxx).
# custom:
#   id: T4
#   severity: high
violations contains {"rule": "T4", "msg": sprintf("mint: subject must be a string matching %v", [object.get(cfg, ["tokens", "subject_pattern"], "unset")])} if {
	input.request.method == "POST"
	input.request.route == "/v1/tokens"
	subject := input.request.body.subject
	subject != null
	not {
		is_string(subject)
		regex.match(cfg.tokens.subject_pattern, subject)
	}
}

# METADATA
# title: Only an agent token gets a quota
# description: >-
#   POST /v1/tokens: a quota (body.quota, present and not null) may be given
#   only to an agent token; operators are not bounded by one.
# custom:
#   id: B3
#   severity: medium
violations contains {"rule": "B3", "msg": "mint: a quota applies to agent tokens only"} if {
	input.request.method == "POST"
	input.request.route == "/v1/tokens"
	input.request.body.quota != null
	not input.request.body.role == "agent"
}

# METADATA
# title: An agent's quota is bounded when its token is minted
# description: >-
#   POST /v1/tokens: a quota, when present and not null, must carry
#   max_live_sandboxes, an integer in [1, agent_quota.max_live_sandboxes];
#   without a quota the agent gets agent_quota.default_max_live_sandboxes.
#   Admission enforces the quota at every create (B3 in sandgate.admission).
# custom:
#   id: B3
#   severity: medium
violations contains {"rule": "B3", "msg": sprintf("mint: quota.max_live_sandboxes must be an integer in [1, %v]", [object.get(cfg, ["agent_quota", "max_live_sandboxes"], "unset")])} if {
	input.request.method == "POST"
	input.request.route == "/v1/tokens"
	input.request.body.quota != null
	not numbers.int_in(input.request.body.quota.max_live_sandboxes, 1, cfg.agent_quota.max_live_sandboxes)
}
