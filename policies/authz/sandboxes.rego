# Request body and target checks for the sandbox routes: E1-E3 (exec, logs),
# L2 (lifetime), H9 (sandbox naming), B2 (per-sandbox size), H11 (images).
#
# Optional body fields may be absent or null (the gateway applies the defaults
# from policy data); a present field of the wrong type or out of bounds denies.
# Bounds are checked through zero-argument positive helpers (`not _timeout_ok`),
# so a threshold missing from policy data denies instead of silently allowing.
package sandgate.authz

# Log streams a client may ask for (the REST surface: ?stream=stdout|stderr).
_log_streams := {"stdout", "stderr"}

_exec if _action == "sandbox.exec"

_logs if _action == "sandbox.logs"

_extend if _action == "sandbox.extend"

_create if _action == "sandbox.create"

# ---------------------------------------------------------------------------
# E1, E2: exec
# ---------------------------------------------------------------------------

_argv := _body.argv

# Fast path for E1 and E2, the per-request hot spot: holds only when no E1/E2
# message below can be produced (argv a non-empty array of at most max_args
# strings, argv[0] a program name, no NUL byte, short enough by the rune bound,
# timeout/stdin/env within bounds or absent, read as their defaults). It may be
# stricter than the messages (a long argv or a null field takes the slow, exact
# way and may still be allowed) but never looser: every E1/E2 deny test fails
# otherwise.
_exec_body_ok if {
	is_array(_argv)
	count(_argv) > 0
	count(_argv) <= _cfg.exec.max_args
	count([a | some a in _argv; is_string(a)]) == count(_argv)
	_argv[0] != ""
	not startswith(_argv[0], "-")
	joined := concat("", _argv)
	not contains(joined, "\u0000")
	env_bytes := object.get(_body, "env_bytes", 0)
	is_number(env_bytes)
	floor(env_bytes) == env_bytes
	env_bytes >= 0
	workdir := object.get(_body, "workdir", "")
	is_string(workdir)
	((count(joined) + count(workdir)) * 4) + env_bytes <= _cfg.exec.max_vector_bytes
	timeout := object.get(_body, "timeout_seconds", _cfg.exec.default_timeout_seconds)
	is_number(timeout)
	floor(timeout) == timeout
	timeout >= 1
	timeout <= _cfg.exec.max_timeout_seconds
	stdin := object.get(_body, "stdin_bytes", 0)
	is_number(stdin)
	floor(stdin) == stdin
	stdin >= 0
	stdin <= _cfg.exec.max_stdin_bytes
	env := object.get(_body, "env_count", 0)
	is_number(env)
	floor(env) == env
	env >= 0
	env <= _cfg.exec.max_env
}

_exec_bad if {
	_exec
	not _exec_body_ok
}

_e1_errors contains "exec: argv is missing or not an array" if not _argv_is_array

_e1_errors contains "exec: argv is empty" if {
	_argv_is_array
	count(_argv) == 0
}

_e1_errors contains sprintf("exec: argv[%d] is not a string", [i]) if {
	_argv_is_array
	some i, arg in _argv
	not is_string(arg)
}

_e1_errors contains "exec: argv[0] is empty or starts with '-'" if {
	_argv_is_array
	is_string(_argv[0])
	_bad_argv0(_argv[0])
}

_e1_errors contains "exec: argv contains a NUL byte" if contains(_argv_joined, "\u0000")

_e1_errors contains sprintf("exec: argv has more than %v elements", [_limit("exec", "max_args")]) if {
	_argv_is_array
	not _argc_ok
}

_e1_errors contains sprintf("exec: argv, env and workdir together are %v bytes, more than %v", [_vector_bytes, _limit("exec", "max_vector_bytes")]) if {
	_vector_parts_ok
	not _vector_bytes <= _cfg.exec.max_vector_bytes
}

_e1_errors contains "exec: env_bytes must be a non-negative integer" if {
	_body.env_bytes != null
	not _env_bytes_ok
}

_e1_errors contains "exec: workdir must be a string" if {
	_body.workdir != null
	not is_string(_body.workdir)
}

_e1_errors contains sprintf("exec: stdin_bytes must be an integer in [0, %v]", [_limit("exec", "max_stdin_bytes")]) if {
	_body.stdin_bytes != null
	not _stdin_ok
}

_e2_errors contains sprintf("exec: timeout_seconds must be an integer in [1, %v]", [_limit("exec", "max_timeout_seconds")]) if {
	_body.timeout_seconds != null
	not _timeout_ok
}

_e2_errors contains sprintf("exec: env_count must be an integer in [0, %v]", [_limit("exec", "max_env")]) if {
	_body.env_count != null
	not _env_ok
}

_argv_is_array if is_array(_argv)

_bad_argv0(a) if a == ""

_bad_argv0(a) if startswith(a, "-")

_argv_all_strings if {
	is_array(_argv)
	count([a | some a in _argv; is_string(a)]) == count(_argv)
}

# argv joined, only when every element is a string.
_argv_joined := concat("", _argv) if _argv_all_strings

_argc_ok if count(_argv) <= _cfg.exec.max_args

# The vector the gateway hands to Nomad carries argv, the environment entries
# (NAME=value, counted by the gateway as env_bytes) and the workdir; E1 bounds
# their UTF-8 bytes together (not characters: hex.encode works on the bytes).
# A part that is absent, null or malformed counts as empty here (a malformed
# one has its own message), so the bound never lapses.
_vector_parts_ok if _argv_all_strings

_workdir := _body.workdir if {
	is_string(_body.workdir)
} else := ""

_env_bytes := _body.env_bytes if {
	_env_bytes_ok
} else := 0

_env_bytes_ok if _int_in(_body.env_bytes, 0, 1e18)

_vector_bytes := ((count(hex.encode(_argv_joined)) + count(hex.encode(_workdir))) / 2) + _env_bytes

_stdin_ok if _int_in(_body.stdin_bytes, 0, _cfg.exec.max_stdin_bytes)

_timeout_ok if _int_in(_body.timeout_seconds, 1, _cfg.exec.max_timeout_seconds)

_env_ok if _int_in(_body.env_count, 0, _cfg.exec.max_env)

# METADATA
# title: Exec runs a bounded argument vector, never a shell string
# description: >-
#   The command is an argument vector handed to Nomad alloc exec; no shell runs
#   on the host. Refuses when body.argv is missing or not an array, is empty
#   (names no program), holds a non-string element (each layer would stringify
#   it differently), has an argv[0] that is empty or starts with "-" (an option
#   in program position smuggles flags into the exec wrapper), contains a NUL
#   byte (C consumers would truncate there, so what runs would differ from what
#   was authorized), or has more than exec.max_args elements. Refuses when
#   everything the caller puts in the vector the gateway sends to Nomad (argv,
#   the environment entries NAME=value counted by the gateway as
#   body.env_bytes, and body.workdir) is more than exec.max_vector_bytes UTF-8
#   bytes together, or when env_bytes is not a non-negative integer or workdir
#   not a string; and when body.stdin_bytes is present but not an integer in
#   [0, exec.max_stdin_bytes].
# custom:
#   id: E1
#   severity: high
violations contains {"rule": "E1", "msg": msg} if {
	_exec_bad
	some msg in _e1_errors
}

# METADATA
# title: Exec timeout and environment are bounded
# description: >-
#   body.timeout_seconds (default exec.default_timeout_seconds) must be an
#   integer in [1, exec.max_timeout_seconds] when present, so no exec holds a
#   gateway connection and a container process longer; body.env_count (the
#   number of environment variables, counted by the gateway) must be an integer
#   in [0, exec.max_env] when present.
# custom:
#   id: E2
#   severity: medium
violations contains {"rule": "E2", "msg": msg} if {
	_exec_bad
	some msg in _e2_errors
}

# ---------------------------------------------------------------------------
# E3: logs
# ---------------------------------------------------------------------------

_e3_errors contains "logs: stream must be stdout or stderr" if {
	_query.stream != null
	not _stream_ok
}

_e3_errors contains sprintf("logs: tail_bytes must be an integer in [1, %v]", [_limit("exec", "max_logs_tail_bytes")]) if {
	_query.tail_bytes != null
	not _tail_ok
}

_stream_ok if _query.stream in _log_streams

_tail_ok if _int_in(_query.tail_bytes, 1, _cfg.exec.max_logs_tail_bytes)

# METADATA
# title: Logs return a bounded tail of the task's own streams
# description: >-
#   query.stream, when present, must be stdout or stderr (the task's own output,
#   nothing else on the node); query.tail_bytes, when present, must be an
#   integer in [1, exec.max_logs_tail_bytes], so a log read is always a bounded
#   tail.
# custom:
#   id: E3
#   severity: low
violations contains {"rule": "E3", "msg": msg} if {
	_logs
	some msg in _e3_errors
}

# ---------------------------------------------------------------------------
# L2: lifetime
# ---------------------------------------------------------------------------

_extend_errors contains "extend: only operators may extend a sandbox" if not _is_operator

_extend_errors contains sprintf("extend: ttl_seconds must be an integer in [%v, %v]", [_limit("lifetime", "min_ttl_seconds"), _limit("lifetime", "ceiling_seconds")]) if {
	_body.ttl_seconds != null
	not _ttl_ok
}

_extend_errors contains "extend: sandbox is at or past its lifetime ceiling" if {
	_has_sandbox
	not _before_ceiling
}

_ttl_ok if _int_in(_body.ttl_seconds, _cfg.lifetime.min_ttl_seconds, _cfg.lifetime.ceiling_seconds)

# INPUT guarantees now and ceiling_at are numbers whenever a record is given.
_before_ceiling if input.now < _sandbox.ceiling_at

# METADATA
# title: Only operators extend, within bounds, never past the ceiling
# description: >-
#   Extending a sandbox's lifetime is an operator decision: agent and session
#   tokens are refused (T2 refuses them on the route table as well).
#   body.ttl_seconds (default lifetime.default_ttl_seconds) must be an integer
#   in [lifetime.min_ttl_seconds, lifetime.ceiling_seconds] when present. A
#   sandbox at or past its ceiling_at (absolute, from creation) cannot be
#   extended: nothing outlives the ceiling. The gateway caps the new expiry at
#   ceiling_at.
# custom:
#   id: L2
#   severity: high
violations contains {"rule": "L2", "msg": msg} if {
	_extend
	some msg in _extend_errors
}

# METADATA
# title: Create ttl is within bounds
# description: >-
#   body.ttl_seconds on create (default lifetime.default_ttl_seconds) must be
#   an integer in [lifetime.min_ttl_seconds, lifetime.ceiling_seconds] when
#   present: a sandbox never starts with a lifetime past the ceiling.
# custom:
#   id: L2
#   severity: medium
violations contains {"rule": "L2", "msg": sprintf("create: ttl_seconds must be an integer in [%v, %v]", [_limit("lifetime", "min_ttl_seconds"), _limit("lifetime", "ceiling_seconds")])} if {
	_create
	_body.ttl_seconds != null
	not _ttl_ok
}

# ---------------------------------------------------------------------------
# H9: sandbox naming
# ---------------------------------------------------------------------------

_h9_errors contains "sandbox id does not match the sandbox id pattern" if not _id_ok

# Only once the id is well-formed (so concat never sees a non-string).
_h9_errors contains "target record's job_id is not the prefixed sandbox id" if {
	_has_sandbox
	_id_ok
	not _job_id_ok
}

_h9_errors contains "target record's id is not the route's sandbox id" if {
	_has_sandbox
	_sandbox.id != _params.id
}

_id_ok if {
	is_string(_params.id)
	regex.match(_cfg.sandbox_id_pattern, _params.id)
}

# Positive, so a prefix missing from policy data refuses.
_job_id_ok if _sandbox.job_id == concat("", [_cfg.prefix, _params.id])

# METADATA
# title: The target is a well-named sandbox job
# description: >-
#   On a sandbox route, params.id must match sandbox_id_pattern (path
#   traversal, other jobs' names and anything else that is not a sandbox id
#   never reach the store or Nomad); the target record's job_id must equal
#   prefix + params.id (destroy, i.e. stop and purge, and every other action
#   refuse a record pointing at any other Nomad job, so sandgate can never stop
#   a job it does not own); and the record's id must equal params.id (the
#   checks act on the sandbox the route names).
# custom:
#   id: H9
#   severity: critical
violations contains {"rule": "H9", "msg": msg} if {
	_targets_sandbox
	some msg in _h9_errors
}

# ---------------------------------------------------------------------------
# B2, H11: create
# ---------------------------------------------------------------------------

_b2_errors contains sprintf("create: cpu_mhz must be an integer in [%v, %v]", [_limit("sandbox", "min_cpu_mhz"), _limit("sandbox", "max_cpu_mhz")]) if {
	_body.cpu_mhz != null
	not _cpu_ok
}

_b2_errors contains sprintf("create: memory_mb must be an integer in [%v, %v]", [_limit("sandbox", "min_memory_mb"), _limit("sandbox", "max_memory_mb")]) if {
	_body.memory_mb != null
	not _memory_ok
}

_cpu_ok if _int_in(_body.cpu_mhz, _cfg.sandbox.min_cpu_mhz, _cfg.sandbox.max_cpu_mhz)

_memory_ok if _int_in(_body.memory_mb, _cfg.sandbox.min_memory_mb, _cfg.sandbox.max_memory_mb)

# METADATA
# title: Create cpu and memory are within the per-sandbox bounds
# description: >-
#   body.cpu_mhz (default sandbox.default_cpu_mhz) must be an integer in
#   [sandbox.min_cpu_mhz, sandbox.max_cpu_mhz] and body.memory_mb (default
#   sandbox.default_memory_mb) an integer in [sandbox.min_memory_mb,
#   sandbox.max_memory_mb], when present. Admission re-checks the rendered job
#   (B1, B2).
# custom:
#   id: B2
#   severity: medium
violations contains {"rule": "B2", "msg": msg} if {
	_create
	some msg in _b2_errors
}

_image_ok if _body.image in _cfg.images.allowed

# METADATA
# title: Create image is allowlisted
# description: >-
#   body.image (default images.default) must be one of images.allowed, exactly
#   as written (no other tag, registry or digest), when present.
# custom:
#   id: H11
#   severity: high
violations contains {"rule": "H11", "msg": "create: image is not in the allowlist"} if {
	_create
	_body.image != null
	not _image_ok
}
