# The routes under /v1/sandboxes/:id, which act on one sandbox record
# (input.sandbox): T3 (nothing runs on an expired sandbox), H9 (naming), and
# the bodies of exec (E1, E2), logs (E3) and extend (L2). Whether the token
# may reach the record at all is T2 (routes.rego).
#
# Optional body and query fields may be absent or null (the gateway applies
# the defaults from policy data); a present field of the wrong type or out of
# bounds denies. A bound missing from policy data denies too: every bound is
# read inside the negated check.
package sandgate.authz

import data.sandgate.config as cfg
import data.sandgate.lib.numbers
import data.sandgate.lib.paths
import future.keywords.not
import future.keywords.or

# ---------------------------------------------------------------------------
# T3: the target's expiry
# ---------------------------------------------------------------------------

# METADATA
# title: A session token dies with its sandbox
# description: >-
#   On a route under /v1/sandboxes/:id whose record has expired (now >=
#   expires_at or now >= ceiling_at) or is not live (its state is not in
#   sandbox.states.live, the store's starting and running: a failed or ended
#   record is refused, and so is any state the policy does not know), even if
#   the reaper has not run yet, a session token is refused for every action,
#   including destroy: it is refused one second past the sandbox's expiry and
#   the reaper cleans up.
# custom:
#   id: T3
#   severity: high
violations contains {"rule": "T3", "msg": "sandbox has expired or ended"} if {
	input.token.role == "session"
	startswith(input.request.route, "/v1/sandboxes/:id")
	not {
		input.now < input.sandbox.expires_at
		input.now < input.sandbox.ceiling_at
		input.sandbox.state in cfg.sandbox.states.live
	}
	is_object(input.sandbox)
}

# METADATA
# title: Nothing runs on an expired sandbox
# description: >-
#   On an expired or not live sandbox (as above), operator and agent tokens
#   may still GET the status, read the logs and DELETE the sandbox, so its
#   owner can see what happened and clean up; exec, files (which run in the
#   sandbox) and extend are refused (an expired sandbox runs nothing more and
#   is not resurrected: create a new one).
# custom:
#   id: T3
#   severity: high
violations contains {"rule": "T3", "msg": sprintf("%v %v is refused on an expired or ended sandbox", [object.get(input, ["request", "method"], null), input.request.route])} if {
	input.request.route in {"/v1/sandboxes/:id/exec", "/v1/sandboxes/:id/files", "/v1/sandboxes/:id/extend"}
	not input.token.role == "session"
	not {
		input.now < input.sandbox.expires_at
		input.now < input.sandbox.ceiling_at
		input.sandbox.state in cfg.sandbox.states.live
	}
	is_object(input.sandbox)
}

# ---------------------------------------------------------------------------
# H9: sandbox naming
# ---------------------------------------------------------------------------

# METADATA
# title: The route names a well-formed sandbox id
# description: >-
#   On a route under /v1/sandboxes/:id, params.id must match
#   sandbox_id_pattern: path traversal, other jobs' names and anything else
#   that is not a sandbox id never reach the store or Nomad.
# custom:
#   id: H9
#   severity: critical
violations contains {"rule": "H9", "msg": "sandbox id does not match the sandbox id pattern"} if {
	startswith(input.request.route, "/v1/sandboxes/:id")
	not {
		is_string(input.request.params.id)
		regex.match(cfg.sandbox_id_pattern, input.request.params.id)
	}
}

# METADATA
# title: The target record is the prefixed sandbox job
# description: >-
#   On a route under /v1/sandboxes/:id with a well-formed id, the target
#   record's job_id must equal prefix + params.id: destroy (stop and purge)
#   and every other action refuse a record pointing at any other Nomad job, so
#   sandgate can never stop a job it does not own. A prefix missing from
#   policy data refuses.
# custom:
#   id: H9
#   severity: critical
violations contains {"rule": "H9", "msg": "target record's job_id is not the prefixed sandbox id"} if {
	startswith(input.request.route, "/v1/sandboxes/:id")
	not {
		is_string(input.request.params.id)
		input.sandbox.job_id == concat("", [cfg.prefix, input.request.params.id])
	}
	is_object(input.sandbox)
	is_string(input.request.params.id)
	regex.match(cfg.sandbox_id_pattern, input.request.params.id)
}

# METADATA
# title: The target record is the sandbox the route names
# description: >-
#   On a route under /v1/sandboxes/:id, the target record's id must equal
#   params.id: the checks act on the sandbox the route names.
# custom:
#   id: H9
#   severity: critical
violations contains {"rule": "H9", "msg": "target record's id is not the route's sandbox id"} if {
	startswith(input.request.route, "/v1/sandboxes/:id")
	input.sandbox.id != input.request.params.id
	is_object(input.sandbox)
}

# ---------------------------------------------------------------------------
# E1, E2: POST /v1/sandboxes/:id/exec
# ---------------------------------------------------------------------------

# METADATA
# title: Exec runs an argument vector, never a shell string
# description: >-
#   The command is an argument vector handed to Nomad alloc exec; no shell runs
#   on the host. Refuses when body.argv is missing or not an array.
# custom:
#   id: E1
#   severity: high
violations contains {"rule": "E1", "msg": "exec: argv is missing or not an array"} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes/:id/exec"
	not is_array(input.request.body.argv)
}

# METADATA
# title: Exec's argument vector is bounded
# description: >-
#   Refuses an argv with more than exec.max_args elements (a bound missing
#   from policy data refuses every argv).
# custom:
#   id: E1
#   severity: high
violations contains {"rule": "E1", "msg": sprintf("exec: argv has more than %v elements", [object.get(cfg, ["exec", "max_args"], "unset")])} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes/:id/exec"
	is_array(input.request.body.argv)
	not count(input.request.body.argv) <= cfg.exec.max_args
}

# METADATA
# title: Exec names a program
# description: >-
#   Refuses an empty argv: it names no program.
# custom:
#   id: E1
#   severity: high
violations contains {"rule": "E1", "msg": "exec: argv is empty"} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes/:id/exec"
	input.request.body.argv == []
}

# METADATA
# title: Exec's argv holds only strings
# description: >-
#   Refuses an argv element that is not a string: each layer would stringify
#   it differently.
# custom:
#   id: E1
#   severity: high
violations contains {"rule": "E1", "msg": sprintf("exec: argv[%v] is not a string", [i])} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes/:id/exec"
	is_array(input.request.body.argv)
	some i, arg in input.request.body.argv
	not is_string(arg)
}

# METADATA
# title: Exec's argv holds no NUL byte
# description: >-
#   Refuses an argv that contains a NUL byte: C consumers would truncate
#   there, so what runs would differ from what was authorized.
# custom:
#   id: E1
#   severity: high
violations contains {"rule": "E1", "msg": "exec: argv contains a NUL byte"} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes/:id/exec"
	is_array(input.request.body.argv)
	some arg in input.request.body.argv
	is_string(arg)
	contains(arg, "\u0000")
}

# METADATA
# title: Exec's program is not an option
# description: >-
#   Refuses an argv[0] that is empty or starts with "-": an option in program
#   position smuggles flags into the exec wrapper.
# custom:
#   id: E1
#   severity: high
violations contains {"rule": "E1", "msg": "exec: argv[0] is empty or starts with '-'"} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes/:id/exec"
	arg0 := input.request.body.argv[0]
	arg0 == "" or {
		is_string(arg0)
		startswith(arg0, "-")
	}
	is_array(input.request.body.argv)
}

# METADATA
# title: What exec hands to Nomad is bounded
# description: >-
#   Refuses when everything the caller puts in the vector the gateway sends to
#   Nomad (argv, the environment entries NAME=value counted by the gateway as
#   body.env_bytes, and body.workdir) is more than exec.max_vector_bytes UTF-8
#   bytes together. An env_bytes or workdir that is absent, null or malformed
#   counts as empty here (a malformed one has its own message), so the bound
#   never lapses; an argv holding a non-string is refused above and not
#   measured.
# custom:
#   id: E1
#   severity: high
violations contains {"rule": "E1", "msg": sprintf("exec: argv, env and workdir together are %v bytes, more than %v", [bytes, object.get(cfg, ["exec", "max_vector_bytes"], "unset")])} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes/:id/exec"
	argv := input.request.body.argv
	is_array(argv)
	not {
		some arg in argv
		not is_string(arg)
	}

	# The optional parts, each a list of at most one well-formed value.
	workdir := [w | w := input.request.body.workdir; is_string(w)]
	env := [n | n := input.request.body.env_bytes; is_number(n); n >= 0]

	# hex.encode writes two digits a byte of the UTF-8: count() of a string
	# counts characters.
	bytes := (count(hex.encode(concat("", array.concat(argv, workdir)))) / 2) + sum(env)
	not bytes <= cfg.exec.max_vector_bytes
}

# METADATA
# title: Exec's env_bytes is a byte count
# description: >-
#   body.env_bytes (the size of the environment entries, counted by the
#   gateway), when present and not null, must be a non-negative integer.
# custom:
#   id: E1
#   severity: high
violations contains {"rule": "E1", "msg": "exec: env_bytes must be a non-negative integer"} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes/:id/exec"
	n := input.request.body.env_bytes
	n != null
	not numbers.int_in(n, 0, 1e18)
}

# METADATA
# title: Exec's workdir is a string
# description: >-
#   body.workdir, when present and not null, must be a string.
# custom:
#   id: E1
#   severity: high
violations contains {"rule": "E1", "msg": "exec: workdir must be a string"} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes/:id/exec"
	w := input.request.body.workdir
	w != null
	not is_string(w)
}

# METADATA
# title: Exec's workdir is a normalised absolute path
# description: >-
#   body.workdir, when a string, must be "/" or "/" followed by segments
#   joined by single slashes, none of them empty, "." or "..": no "//", no
#   "/./", no "/../" and no trailing "/" (only "/" itself ends in one). The
#   path the policy judges is then the directory the command starts in, so
#   the root check below cannot be walked out of ("/workspace/../etc"). An
#   empty or relative workdir is refused here too.
# custom:
#   id: E1
#   severity: high
violations contains {"rule": "E1", "msg": "exec: workdir must be a normalised absolute path (it starts with '/'; no empty, '.' or '..' segment; no trailing '/')"} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes/:id/exec"
	w := input.request.body.workdir
	is_string(w)
	not paths.normalised_absolute(w)
}

# METADATA
# title: Exec's workdir holds no NUL byte
# description: >-
#   Refuses a body.workdir that contains a NUL byte: the shell and chdir(2)
#   would stop there, so the directory the command starts in would differ
#   from the one authorized.
# custom:
#   id: E1
#   severity: high
violations contains {"rule": "E1", "msg": "exec: workdir contains a NUL byte"} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes/:id/exec"
	w := input.request.body.workdir
	is_string(w)
	contains(w, "\u0000")
}

# METADATA
# title: Exec's workdir is bounded
# description: >-
#   body.workdir, when a string, is at most exec.max_workdir_bytes UTF-8
#   bytes (4095 by default: PATH_MAX less its terminating NUL, the longest
#   path chdir(2) takes). It also counts toward exec.max_vector_bytes with
#   argv and env.
# custom:
#   id: E1
#   severity: high
violations contains {"rule": "E1", "msg": sprintf("exec: workdir is more than exec.max_workdir_bytes (%v) bytes", [object.get(cfg, ["exec", "max_workdir_bytes"], "unset")])} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes/:id/exec"
	w := input.request.body.workdir
	is_string(w)

	# hex.encode writes two digits a byte of the UTF-8.
	not count(hex.encode(w)) / 2 <= cfg.exec.max_workdir_bytes
}

# METADATA
# title: Exec's workdir is at or under a workdir root
# description: >-
#   body.workdir, when a string, must equal one of exec.workdir_roots or
#   start with one of them followed by "/": the match is on a segment
#   boundary, so "/workspacefoo" is not under "/workspace". The root "/"
#   admits every absolute path. A root that is not itself a normalised
#   absolute path (a typo such as "workspace" or "/workspace/") matches
#   nothing, and a missing or malformed root list refuses every workdir.
#   The prefix is matched on the path as sent; the normalisation rule above
#   refuses the paths ("..") that would climb back out.
# custom:
#   id: E1
#   severity: high
violations contains {"rule": "E1", "msg": sprintf("exec: workdir must be one of exec.workdir_roots %v or under one of them", [object.get(cfg, ["exec", "workdir_roots"], "unset")])} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes/:id/exec"
	w := input.request.body.workdir
	is_string(w)
	not _under_a_workdir_root(w)
}

_under_a_workdir_root(w) if {
	roots := cfg.exec.workdir_roots
	is_array(roots)
	some root in roots
	paths.at_or_under(w, root)
}

# METADATA
# title: Exec's stdin is bounded
# description: >-
#   body.stdin_bytes (the length of stdin, counted by the gateway), when
#   present and not null, must be an integer in [0, exec.max_stdin_bytes].
# custom:
#   id: E1
#   severity: high
violations contains {"rule": "E1", "msg": sprintf("exec: stdin_bytes must be an integer in [0, %v]", [object.get(cfg, ["exec", "max_stdin_bytes"], "unset")])} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes/:id/exec"
	n := input.request.body.stdin_bytes
	n != null
	not numbers.int_in(n, 0, cfg.exec.max_stdin_bytes)
}

# METADATA
# title: Exec's timeout is bounded
# description: >-
#   body.timeout_seconds (default exec.default_timeout_seconds), when present
#   and not null, must be an integer in [1, exec.max_timeout_seconds], so no
#   exec holds a gateway connection and a container process longer.
# custom:
#   id: E2
#   severity: medium
violations contains {"rule": "E2", "msg": sprintf("exec: timeout_seconds must be an integer in [1, %v]", [object.get(cfg, ["exec", "max_timeout_seconds"], "unset")])} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes/:id/exec"
	n := input.request.body.timeout_seconds
	n != null
	not numbers.int_in(n, 1, cfg.exec.max_timeout_seconds)
}

# METADATA
# title: Exec's environment is bounded
# description: >-
#   body.env_count (the number of environment variables, counted by the
#   gateway), when present and not null, must be an integer in [0,
#   exec.max_env].
# custom:
#   id: E2
#   severity: medium
violations contains {"rule": "E2", "msg": sprintf("exec: env_count must be an integer in [0, %v]", [object.get(cfg, ["exec", "max_env"], "unset")])} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes/:id/exec"
	n := input.request.body.env_count
	n != null
	not numbers.int_in(n, 0, cfg.exec.max_env)
}

# METADATA
# title: Exec's output cap is bounded
# description: >-
#   body.max_output_bytes (the cap on each of stdout and stderr the caller
#   asks for; default exec.max_output_bytes), when present and not null,
#   must be an integer in [1, exec.max_output_bytes]: what an exec answer
#   holds is bounded by the bundle, never by the caller.
# custom:
#   id: E2
#   severity: medium
violations contains {"rule": "E2", "msg": sprintf("exec: max_output_bytes must be an integer in [1, %v]", [object.get(cfg, ["exec", "max_output_bytes"], "unset")])} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes/:id/exec"
	n := input.request.body.max_output_bytes
	n != null
	not numbers.int_in(n, 1, cfg.exec.max_output_bytes)
}

# METADATA
# title: Exec's env names are well formed and not reserved
# description: >-
#   Every name of body.env_names (the sorted names of the env entries,
#   listed by the gateway) must be a string matching exec.env_name_pattern
#   (a shell identifier of at most 128 bytes by default) and must not start
#   with an exec.reserved_env_prefixes entry (NOMAD_, SANDGATE_: the names
#   Nomad and the gateway give the task, so a command always sees the real
#   ones). With env entries (env_count above 0) the list must be there, one
#   name per entry. A pattern or prefix list missing from policy data
#   refuses every name.
# custom:
#   id: E1
#   severity: high
violations contains {"rule": "E1", "msg": sprintf("exec: env name %v must match exec.env_name_pattern %v and not start with one of %v", [name, object.get(cfg, ["exec", "env_name_pattern"], "unset"), object.get(cfg, ["exec", "reserved_env_prefixes"], "unset")])} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes/:id/exec"
	names := input.request.body.env_names
	is_array(names)
	some name in names
	not {
		is_string(name)
		regex.match(cfg.exec.env_name_pattern, name)
		prefixes := cfg.exec.reserved_env_prefixes
		is_array(prefixes)
		not strings.any_prefix_match(name, prefixes)
	}
}

# METADATA
# title: Exec lists the env names it counts
# description: >-
#   With body.env_count present and not null, body.env_names must be an
#   array of exactly env_count names: the names E1 judges are the ones the
#   command gets.
# custom:
#   id: E1
#   severity: high
violations contains {"rule": "E1", "msg": "exec: env_names must be an array of env_count names"} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes/:id/exec"
	n := input.request.body.env_count
	n != null
	not {
		names := input.request.body.env_names
		is_array(names)
		count(names) == n
	}
}

# ---------------------------------------------------------------------------
# E3: GET /v1/sandboxes/:id/logs
# ---------------------------------------------------------------------------

# METADATA
# title: Logs read the task's own streams
# description: >-
#   query.stream, when present and not null, must be stdout or stderr: the
#   task's own output, nothing else on the node.
# custom:
#   id: E3
#   severity: low
violations contains {"rule": "E3", "msg": "logs: stream must be stdout or stderr"} if {
	input.request.method == "GET"
	input.request.route == "/v1/sandboxes/:id/logs"
	stream := input.request.query.stream
	stream != null
	not stream in {"stdout", "stderr"}
}

# METADATA
# title: Logs return a bounded tail
# description: >-
#   query.tail_bytes, when present and not null, must be an integer in [1,
#   exec.max_logs_tail_bytes], so a log read is always a bounded tail.
# custom:
#   id: E3
#   severity: low
violations contains {"rule": "E3", "msg": sprintf("logs: tail_bytes must be an integer in [1, %v]", [object.get(cfg, ["exec", "max_logs_tail_bytes"], "unset")])} if {
	input.request.method == "GET"
	input.request.route == "/v1/sandboxes/:id/logs"
	n := input.request.query.tail_bytes
	n != null
	not numbers.int_in(n, 1, cfg.exec.max_logs_tail_bytes)
}

# ---------------------------------------------------------------------------
# L2: POST /v1/sandboxes/:id/extend
# ---------------------------------------------------------------------------

# METADATA
# title: Only operators extend a sandbox
# description: >-
#   Extending a sandbox's lifetime is an operator decision: agent and session
#   tokens are refused (T2 refuses them on the route table as well).
# custom:
#   id: L2
#   severity: high
violations contains {"rule": "L2", "msg": "extend: only operators may extend a sandbox"} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes/:id/extend"
	not input.token.role == "operator"
}

# METADATA
# title: Extend's ttl is within bounds
# description: >-
#   body.ttl_seconds (default lifetime.default_ttl_seconds), when present and
#   not null, must be an integer in [lifetime.min_ttl_seconds,
#   lifetime.ceiling_seconds]. The gateway caps the new expiry at ceiling_at.
# custom:
#   id: L2
#   severity: high
violations contains {"rule": "L2", "msg": sprintf("extend: ttl_seconds must be an integer in [%v, %v]", [object.get(cfg, ["lifetime", "min_ttl_seconds"], "unset"), object.get(cfg, ["lifetime", "ceiling_seconds"], "unset")])} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes/:id/extend"
	n := input.request.body.ttl_seconds
	n != null
	not numbers.int_in(n, cfg.lifetime.min_ttl_seconds, cfg.lifetime.ceiling_seconds)
}

# METADATA
# title: Nothing is extended past its ceiling
# description: >-
#   A sandbox at or past its ceiling_at (absolute, from creation) cannot be
#   extended: nothing outlives the ceiling.
# custom:
#   id: L2
#   severity: high
violations contains {"rule": "L2", "msg": "extend: sandbox is at or past its lifetime ceiling"} if {
	input.request.method == "POST"
	input.request.route == "/v1/sandboxes/:id/extend"
	not input.now < input.sandbox.ceiling_at
	is_object(input.sandbox)
}
