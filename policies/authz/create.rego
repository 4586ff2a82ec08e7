# POST /v1/sandboxes: the body of a create. Every field is optional (absent
# or null takes the default from policy data); a present field of the wrong
# type, an unknown name or a value out of bounds denies. Admission judges the
# rendered job again (sandgate.admission).
package sandgate.authz

import data.sandgate.config as cfg
import data.sandgate.lib.numbers
import future.keywords.not

# METADATA
# title: Create names a known profile
# description: >-
#   body.profile (default strict), when present and not null, must be a key of
#   data.sandgate.config.profiles: an unknown profile would reach the renderer
#   without a vetted capability list.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "create: profile is not a known profile"} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes"
	profile := input.request.body.profile
	profile != null
	not cfg.profiles[profile]
}

# METADATA
# title: Create names a known network
# description: >-
#   body.network (default none), when present and not null, must be a key of
#   data.sandgate.config.networks: an unknown network would reach the renderer
#   without a vetted network mode.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "create: network is not a known network"} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes"
	network := input.request.body.network
	network != null
	not cfg.networks[network]
}

# METADATA
# title: Create names its node by name
# description: >-
#   body.node (default: the gateway picks), when present and not null, must be
#   a non-empty string; admission (P1-P3) decides whether the node may host
#   the sandbox.
# custom:
#   id: INPUT
#   severity: high
violations contains {"rule": "INPUT", "msg": "create: node is not a non-empty string"} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes"
	node := input.request.body.node
	node != null
	not {
		is_string(node)
		node != ""
	}
}

# METADATA
# title: Create ttl is within bounds
# description: >-
#   body.ttl_seconds (default lifetime.default_ttl_seconds), when present and
#   not null, must be an integer in [lifetime.min_ttl_seconds,
#   lifetime.ceiling_seconds]: a sandbox never starts with a lifetime past the
#   ceiling.
# custom:
#   id: L2
#   severity: medium
violations contains {"rule": "L2", "msg": sprintf("create: ttl_seconds must be an integer in [%v, %v]", [object.get(cfg, ["lifetime", "min_ttl_seconds"], "unset"), object.get(cfg, ["lifetime", "ceiling_seconds"], "unset")])} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes"
	n := input.request.body.ttl_seconds
	n != null
	not numbers.int_in(n, cfg.lifetime.min_ttl_seconds, cfg.lifetime.ceiling_seconds)
}

# METADATA
# title: Create cpu is within the per-sandbox bounds
# description: >-
#   body.cpu_mhz (default sandbox.default_cpu_mhz), when present and not null,
#   must be an integer in [sandbox.min_cpu_mhz, sandbox.max_cpu_mhz].
#   Admission re-checks the rendered job (B1, B2).
# custom:
#   id: B2
#   severity: medium
violations contains {"rule": "B2", "msg": sprintf("create: cpu_mhz must be an integer in [%v, %v]", [object.get(cfg, ["sandbox", "min_cpu_mhz"], "unset"), object.get(cfg, ["sandbox", "max_cpu_mhz"], "unset")])} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes"
	n := input.request.body.cpu_mhz
	n != null
	not numbers.int_in(n, cfg.sandbox.min_cpu_mhz, cfg.sandbox.max_cpu_mhz)
}

# METADATA
# title: Create memory is within the per-sandbox bounds
# description: >-
#   body.memory_mb (default sandbox.default_memory_mb), when present and not
#   null, must be an integer in [sandbox.min_memory_mb, sandbox.max_memory_mb].
#   Admission re-checks the rendered job (B1, B2).
# custom:
#   id: B2
#   severity: medium
violations contains {"rule": "B2", "msg": sprintf("create: memory_mb must be an integer in [%v, %v]", [object.get(cfg, ["sandbox", "min_memory_mb"], "unset"), object.get(cfg, ["sandbox", "max_memory_mb"], "unset")])} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes"
	n := input.request.body.memory_mb
	n != null
	not numbers.int_in(n, cfg.sandbox.min_memory_mb, cfg.sandbox.max_memory_mb)
}

# METADATA
# title: Create image is allowlisted
# description: >-
#   body.image (default images.default), when present and not null, must be
#   one of images.allowed, exactly as written (no other tag, registry or
#   digest).
# custom:
#   id: H11
#   severity: high
violations contains {"rule": "H11", "msg": "create: image is not in the allowlist"} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes"
	image := input.request.body.image
	image != null
	not image in cfg.images.allowed
}

# METADATA
# title: A repeated create reissues its session token only when allowed
# description: >-
#   body.reissue_token, when present and not null, must be a boolean; true
#   asks a create repeated with the same Idempotency-Key for a fresh session
#   token (the old one is revoked). It needs the Idempotency-Key header
#   (request.idempotency_key) and tokens.reissue_on_repeat set to true in
#   policy data; a missing setting refuses.
# custom:
#   id: T4
#   severity: high
violations contains {"rule": "T4", "msg": "create: reissue_token must be a boolean, and true only with an Idempotency-Key header while tokens.reissue_on_repeat is true"} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes"
	r := input.request.body.reissue_token
	r != null
	not r == false
	not {
		r == true
		input.request.idempotency_key == true
		cfg.tokens.reissue_on_repeat == true
	}
}
