# Tests for the routes under /v1/sandboxes/:id (sandboxes.rego): T3 on the
# target, H9, E1-E3, L2 (extend). Fixtures live in authz_test.rego.
package sandgate.authz_test

import data.sandgate.authz
import data.sandgate.lib.paths
import future.keywords.not

# ---------------------------------------------------------------------------
# T3: the target
# ---------------------------------------------------------------------------

# The session token outlives nothing: move the token's exp far out so that only
# the sandbox's own expiry is tested.
long_session(key) := patch(base(key, "session"), {"token": {"exp": sandbox.ceiling_at + 3600}})

expired_sandbox := {"now": sandbox.expires_at + 1, "token": {"exp": sandbox.ceiling_at + 3600}}

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
# H9
# ---------------------------------------------------------------------------

test_h9_well_formed_id_allowed if {
	allowed(base("DELETE /v1/sandboxes/:id", "operator"))
}

test_h9_path_traversal_id if {
	inp := patch(base("DELETE /v1/sandboxes/:id", "operator"), {"request": {"params": {"id": "../../etc"}}})
	ids(inp) == {"H9"}
}

test_h9_path_traversal_id_for_session if {
	inp := patch(base("GET /v1/sandboxes/:id", "session"), {
		"request": {"params": {"id": "../../etc"}},
		"token": {"sandbox_id": "../../etc"},
	})
	ids(inp) == {"H9"}
}

test_h9_id_bad_shapes if {
	every id in ["K7X2M9P4Q8R5T1V6", "short", "k7x2m9p4q8r5t1v6k7x2m9p4q8r5t1v6x", "sandgate-sbx-k7x2m9p4", "k7x2m9p4q8r5t1v6\n", ""] {
		"H9" in ids(patch(base("DELETE /v1/sandboxes/:id", "operator"), {"request": {"params": {"id": id}}}))
	}
}

test_h9_id_not_a_string if {
	inp := patch(base("GET /v1/sandboxes/:id", "operator"), {"request": {"params": {"id": 12345678}}})
	ids(inp) == {"H9"}
}

test_h9_job_id_without_prefix if {
	inp := patch(base("DELETE /v1/sandboxes/:id", "operator"), {"sandbox": {"job_id": sid}})
	ids(inp) == {"H9"}
}

test_h9_job_id_of_another_job if {
	every role in ["operator", "agent", "session"] {
		ids(patch(base("DELETE /v1/sandboxes/:id", role), {"sandbox": {"job_id": "payments-api"}})) == {"H9"}
	}
}

test_h9_job_id_of_another_sandbox if {
	inp := patch(base("GET /v1/sandboxes/:id", "operator"), {"sandbox": {"job_id": concat("", [cfg.prefix, other_sid])}})
	ids(inp) == {"H9"}
}

test_h9_record_of_another_sandbox if {
	inp := patch(base("GET /v1/sandboxes/:id", "operator"), {"sandbox": {"id": other_sid}})
	ids(inp) == {"H9"}
}

# ---------------------------------------------------------------------------
# E1
# ---------------------------------------------------------------------------

test_e1_argv_allowed if {
	allowed(exec_with({"argv": ["/bin/sh", "-c", "ls -la /workspace"]}))
}

test_e1_argv_only_required_field if {
	allowed(patch(base(exec_key, "session"), {"request": {"body": {"argv": ["id"], "timeout_seconds": null}}}))
	allowed(json.remove(base(exec_key, "session"), ["request/body/timeout_seconds", "request/body/stdin_bytes", "request/body/env_count"]))
}

test_e1_argv_missing if {
	ids(json.remove(base(exec_key, "session"), ["request/body/argv"])) == {"E1"}
}

test_e1_body_missing if {
	ids(json.remove(base(exec_key, "session"), ["request/body"])) == {"E1"}
}

test_e1_argv_not_an_array if {
	ids(exec_with({"argv": "rm -rf /"})) == {"E1"}
}

test_e1_argv_null if {
	ids(exec_with({"argv": null})) == {"E1"}
}

test_e1_argv_empty if {
	ids(exec_with({"argv": []})) == {"E1"}
}

test_e1_argv0_option if {
	ids(exec_with({"argv": ["-rf", "/"]})) == {"E1"}
}

test_e1_argv0_empty if {
	ids(exec_with({"argv": ["", "x"]})) == {"E1"}
}

test_e1_later_args_may_start_with_a_dash if {
	allowed(exec_with({"argv": ["rm", "-rf", "/workspace/build"]}))
}

test_e1_argv_with_non_string if {
	ids(exec_with({"argv": ["echo", 1]})) == {"E1"}
	ids(exec_with({"argv": [null]})) == {"E1"}
	ids(exec_with({"argv": ["echo", {"a": "b"}]})) == {"E1"}
}

test_e1_argv_with_nul_byte if {
	ids(exec_with({"argv": ["cat", "/etc/passwd\u0000.txt"]})) == {"E1"}
}

test_e1_argv_at_max_args_allowed if {
	allowed(exec_with({"argv": array.concat(["true"], ["x" | some _ in numbers.range(2, cfg.exec.max_args)])}))
}

test_e1_too_many_args if {
	argv := ["x" | some _ in numbers.range(1, cfg.exec.max_args + 1)]
	ids(exec_with({"argv": argv})) == {"E1"}
}

test_e1_argv_at_max_bytes_allowed if {
	allowed(exec_with({"argv": ["echo", repeat("a", cfg.exec.max_vector_bytes - 4)]}))
}

test_e1_too_many_bytes if {
	ids(exec_with({"argv": ["echo", repeat("a", cfg.exec.max_vector_bytes - 3)]})) == {"E1"}
}

test_e1_bytes_are_utf8_bytes_not_characters if {
	# "é" is 2 bytes: half as many characters as the byte limit overflow it.
	half := cfg.exec.max_vector_bytes / 2
	ids(exec_with({"argv": ["echo", repeat("é", half)]})) == {"E1"}
	allowed(exec_with({"argv": ["echo", repeat("é", half - 2)]}))
}

# E1 bounds everything the caller puts in the vector sent to Nomad: argv, the
# environment entries and the workdir together.
test_e1_env_counts_toward_the_vector if {
	allowed(exec_with({"argv": ["env"], "env_count": 50, "env_names": env_names(50), "env_bytes": cfg.exec.max_vector_bytes - 3}))
	ids(exec_with({"argv": ["env"], "env_count": 50, "env_names": env_names(50), "env_bytes": cfg.exec.max_vector_bytes - 2})) == {"E1"}

	# 50 values of 12,000 bytes
	ids(exec_with({"argv": ["env"], "env_count": 50, "env_names": env_names(50), "env_bytes": 50 * 12006})) == {"E1"}
}

test_e1_workdir_counts_toward_the_vector if {
	dir := concat("", ["/workspace/", repeat("d", 989)])
	allowed(exec_with({"argv": ["pwd"], "workdir": dir, "env_bytes": cfg.exec.max_vector_bytes - 1003}))
	d := authz.decision with input as exec_with({"argv": ["pwd"], "workdir": dir, "env_bytes": cfg.exec.max_vector_bytes - 1002})
	{v.msg | some v in d.violations} == {sprintf("exec: argv, env and workdir together are %v bytes, more than %v", [cfg.exec.max_vector_bytes + 1, cfg.exec.max_vector_bytes])}
}

test_e1_a_null_or_malformed_part_never_lifts_the_bound if {
	big := repeat("a", cfg.exec.max_vector_bytes)
	ids(exec_with({"argv": ["echo", big], "workdir": null})) == {"E1"}
	ids(exec_with({"argv": ["echo", big], "env_bytes": null})) == {"E1"}
	ids(exec_with({"argv": ["echo", big], "env_bytes": "x"})) == {"E1"}
	ids(exec_with({"argv": ["true"], "env_bytes": -1})) == {"E1"}
	ids(exec_with({"argv": ["true"], "env_bytes": 1.5})) == {"E1"}
	ids(exec_with({"argv": ["true"], "workdir": 42})) == {"E1"}
}

# ---------------------------------------------------------------------------
# E1: the workdir
# ---------------------------------------------------------------------------

# The messages of an exec with this workdir.
workdir_msgs(w) := {v.msg | some v in d.violations} if {
	d := authz.decision with input as exec_with({"argv": ["pwd"], "workdir": w})
}

workdir_form_msg := "exec: workdir must be a normalised absolute path (it starts with '/'; no empty, '.' or '..' segment; no trailing '/')"

workdir_roots_msg := sprintf("exec: workdir must be one of exec.workdir_roots %v or under one of them", [cfg.exec.workdir_roots])

test_e1_workdir_a_root_itself_allowed if {
	every root in cfg.exec.workdir_roots {
		allowed(exec_with({"argv": ["pwd"], "workdir": root}))
	}
}

test_e1_workdir_nested_under_a_root_allowed if {
	every w in ["/workspace/src", "/workspace/a/b/c", "/tmp/build.1", "/workspace/.hidden", "/workspace/...", "/workspace/a..b", "/workspace/a b"] {
		allowed(exec_with({"argv": ["pwd"], "workdir": w}))
	}
}

test_e1_workdir_absent_or_null_allowed if {
	allowed(exec_with({"argv": ["pwd"]}))
	allowed(exec_with({"argv": ["pwd"], "workdir": null}))
}

test_e1_workdir_relative if {
	every w in ["workspace", "workspace/src", "./workspace", "../workspace", "tmp"] {
		workdir_msgs(w) == {workdir_form_msg, workdir_roots_msg}
	}
}

test_e1_workdir_empty if {
	workdir_msgs("") == {workdir_form_msg, workdir_roots_msg}
}

# A path that climbs out is refused as not normalised, whatever it starts with.
test_e1_workdir_dot_dot if {
	every w in ["/workspace/..", "/workspace/../etc", "/workspace/src/../../etc", "/tmp/../../../etc/shadow", "/workspace/a/../b"] {
		workdir_msgs(w) == {workdir_form_msg}
	}
}

test_e1_workdir_dot_and_empty_segments if {
	every w in ["/workspace/.", "/workspace/./src", "//workspace", "/workspace//src", "/./workspace"] {
		ids(exec_with({"argv": ["pwd"], "workdir": w})) == {"E1"}
		workdir_form_msg in workdir_msgs(w)
	}
}

test_e1_workdir_trailing_slash if {
	workdir_msgs("/workspace/") == {workdir_form_msg}
	workdir_msgs("/workspace/src/") == {workdir_form_msg}
	workdir_msgs("/tmp/") == {workdir_form_msg}
}

# The prefix match is on a segment boundary.
test_e1_workdir_sharing_a_prefix_with_a_root_is_not_under_it if {
	every w in ["/workspacefoo", "/workspace-other/src", "/tmpx", "/tmp.d"] {
		workdir_msgs(w) == {workdir_roots_msg}
	}
}

# The workdir roots share F1's predicate: a root that is not a normalised
# absolute path admits nothing.
test_e1_an_empty_or_odd_workdir_root_admits_nothing if {
	every roots in [[""], ["/workspace/"], ["workspace"], ["//"], [["/"]], [null]] {
		workdir_msgs("/etc") == {sprintf("exec: workdir must be one of exec.workdir_roots %v or under one of them", [roots])} with data.sandgate.config.exec.workdir_roots as roots
	}
}

test_e1_workdir_outside_the_roots if {
	every w in ["/etc", "/", "/root", "/alloc", "/local", "/secrets", "/proc/self/cwd", "/var/tmp", "/WORKSPACE"] {
		workdir_msgs(w) == {workdir_roots_msg}
	}
}

test_e1_workdir_with_a_nul_byte if {
	workdir_msgs("/workspace/\u0000/../etc") == {"exec: workdir contains a NUL byte", workdir_form_msg}
	workdir_msgs("/tmp/a\u0000b") == {"exec: workdir contains a NUL byte"}
}

test_e1_workdir_length_bound if {
	max := cfg.exec.max_workdir_bytes
	at := concat("", ["/workspace/", repeat("d", max - 11)])
	allowed(exec_with({"argv": ["pwd"], "workdir": at}))
	over := concat("", [at, "d"])
	workdir_msgs(over) == {sprintf("exec: workdir is more than exec.max_workdir_bytes (%v) bytes", [max])}
}

test_e1_workdir_length_is_utf8_bytes if {
	# "é" is 2 bytes: half as many characters as the bound overflow it.
	# "/tmp/" is 5 bytes: n of them fit while 5 + 2n <= max.
	n := floor((cfg.exec.max_workdir_bytes - 5) / 2)
	allowed(exec_with({"argv": ["pwd"], "workdir": concat("", ["/tmp/", repeat("é", n)])}))
	ids(exec_with({"argv": ["pwd"], "workdir": concat("", ["/tmp/", repeat("é", n + 1)])})) == {"E1"}
}

test_e1_workdir_rules_read_policy_data if {
	# Other roots apply at once; "/" admits every normalised absolute path.
	allowed(exec_with({"argv": ["pwd"], "workdir": "/srv/job"})) with data.sandgate.config.exec.workdir_roots as ["/srv"]
	denied(exec_with({"argv": ["pwd"], "workdir": "/workspace"})) with data.sandgate.config.exec.workdir_roots as ["/srv"]
	allowed(exec_with({"argv": ["pwd"], "workdir": "/etc"})) with data.sandgate.config.exec.workdir_roots as ["/"]
	allowed(exec_with({"argv": ["pwd"], "workdir": "/"})) with data.sandgate.config.exec.workdir_roots as ["/"]
	denied(exec_with({"argv": ["pwd"], "workdir": "/etc/.."})) with data.sandgate.config.exec.workdir_roots as ["/"]
	denied(exec_with({"argv": ["pwd"], "workdir": "/workspace/src"})) with data.sandgate.config.exec.max_workdir_bytes as 10
}

# A root that is not itself a normalised absolute path matches nothing.
test_e1_workdir_malformed_roots_match_nothing if {
	every roots in [["workspace"], ["/workspace/"], ["/workspace/../"], [""], [42], "/workspace", [], null] {
		denied(exec_with({"argv": ["pwd"], "workdir": "/workspace/src"})) with data.sandgate.config.exec.workdir_roots as roots
		denied(exec_with({"argv": ["pwd"], "workdir": "/workspace"})) with data.sandgate.config.exec.workdir_roots as roots
	}
}

test_e1_workdir_missing_policy_data_refuses if {
	inp := exec_with({"argv": ["pwd"], "workdir": "/workspace"})
	d := authz.decision with input as inp with data.sandgate.config as json.remove(cfg, ["exec/workdir_roots"])
	{v.msg | some v in d.violations} == {"exec: workdir must be one of exec.workdir_roots unset or under one of them"}
	d2 := authz.decision with input as inp with data.sandgate.config as json.remove(cfg, ["exec/max_workdir_bytes"])
	{v.msg | some v in d2.violations} == {"exec: workdir is more than exec.max_workdir_bytes (unset) bytes"}

	# Without a workdir, nothing reads them.
	allowed(exec_with({"argv": ["pwd"]})) with data.sandgate.config as json.remove(cfg, ["exec/workdir_roots", "exec/max_workdir_bytes"])
}

# The shipped roots are well formed (a malformed one would match nothing).
test_e1_workdir_shipped_roots_are_normalised if {
	count(cfg.exec.workdir_roots) > 0
	every root in cfg.exec.workdir_roots {
		paths.normalised_absolute(root)
		root != "/"
	}
}

test_e1_workdir_other_routes_ignore_it if {
	allowed(patch(base("GET /v1/sandboxes/:id", "session"), {"request": {"body": {"workdir": "/etc/../.."}}}))
}

test_e1_stdin_bytes_bounds if {
	allowed(exec_with({"argv": ["cat"], "stdin_bytes": cfg.exec.max_stdin_bytes}))
	ids(exec_with({"argv": ["cat"], "stdin_bytes": cfg.exec.max_stdin_bytes + 1})) == {"E1"}
	ids(exec_with({"argv": ["cat"], "stdin_bytes": -1})) == {"E1"}
	ids(exec_with({"argv": ["cat"], "stdin_bytes": "10"})) == {"E1"}
}

test_e1_applies_to_operators_too if {
	ids(patch(base(exec_key, "operator"), {"request": {"body": {"argv": ["-x"]}}})) == {"E1"}
}

test_e_body_rules_ignore_other_routes if {
	# An exec-shaped body on a status route is not an exec.
	allowed(patch(base("GET /v1/sandboxes/:id", "session"), {"request": {"body": {"argv": [], "timeout_seconds": 999}}}))
}

test_e1_argv_object_is_not_an_array if {
	ids(exec_with({"argv": {"0": "ls"}})) == {"E1"}
}

test_e1_reports_every_problem_it_finds if {
	d := authz.decision with input as exec_with({"argv": ["-x", 1], "stdin_bytes": -1})
	{v.msg | some v in d.violations} == {
		"exec: argv[0] is empty or starts with '-'",
		"exec: argv[1] is not a string",
		"exec: stdin_bytes must be an integer in [0, 262144]",
	}
}

# ---------------------------------------------------------------------------
# E2
# ---------------------------------------------------------------------------

test_e2_timeout_bounds_allowed if {
	allowed(exec_with({"argv": ["true"], "timeout_seconds": 1}))
	allowed(exec_with({"argv": ["true"], "timeout_seconds": cfg.exec.max_timeout_seconds}))
}

test_e2_timeout_121 if {
	ids(exec_with({"argv": ["true"], "timeout_seconds": 121})) == {"E2"}
}

test_e2_timeout_above_max if {
	ids(exec_with({"argv": ["true"], "timeout_seconds": cfg.exec.max_timeout_seconds + 1})) == {"E2"}
}

test_e2_timeout_zero if {
	ids(exec_with({"argv": ["true"], "timeout_seconds": 0})) == {"E2"}
}

test_e2_timeout_not_an_integer if {
	ids(exec_with({"argv": ["true"], "timeout_seconds": 1.5})) == {"E2"}
	ids(exec_with({"argv": ["true"], "timeout_seconds": "30"})) == {"E2"}
}

test_e2_env_count_bounds if {
	allowed(exec_with({"argv": ["env"], "env_count": cfg.exec.max_env, "env_names": env_names(cfg.exec.max_env)}))
	ids(exec_with({"argv": ["env"], "env_count": cfg.exec.max_env + 1, "env_names": env_names(cfg.exec.max_env + 1)})) == {"E2"}
	ids(exec_with({"argv": ["env"], "env_count": -1})) == {"E1", "E2"}
	ids(exec_with({"argv": ["env"], "env_count": true})) == {"E1", "E2"}
}

# ---------------------------------------------------------------------------
# E3
# ---------------------------------------------------------------------------

test_e3_streams_allowed if {
	allowed(logs_with({"stream": "stdout"}))
	allowed(logs_with({"stream": "stderr", "tail_bytes": cfg.exec.max_logs_tail_bytes}))
	allowed(logs_with({}))
	allowed(json.remove(base(logs_key, "session"), ["request/query"]))
}

test_e3_stream_foo if {
	ids(logs_with({"stream": "foo"})) == {"E3"}
}

test_e3_stream_not_a_string if {
	ids(logs_with({"stream": ["stdout"]})) == {"E3"}
}

test_e3_tail_bytes_above_max if {
	ids(logs_with({"tail_bytes": cfg.exec.max_logs_tail_bytes + 1})) == {"E3"}
}

test_e3_tail_bytes_zero if {
	ids(logs_with({"tail_bytes": 0})) == {"E3"}
}

test_e3_tail_bytes_not_an_integer if {
	ids(logs_with({"tail_bytes": "4096"})) == {"E3"}
}

test_e3_null_query_fields_are_defaults if {
	allowed(logs_with({"stream": null, "tail_bytes": null}))
}

test_e3_both_query_fields_wrong if {
	d := authz.decision with input as logs_with({"stream": "stdin", "tail_bytes": -5})
	count(d.violations) == 2
	{v.rule | some v in d.violations} == {"E3"}
}

# ---------------------------------------------------------------------------
# L2: extend
# ---------------------------------------------------------------------------

test_l2_operator_extend_allowed if {
	allowed(extend_with({"ttl_seconds": cfg.lifetime.min_ttl_seconds}))
	allowed(extend_with({"ttl_seconds": cfg.lifetime.ceiling_seconds}))
	allowed(extend_with({}))
}

test_l2_extend_by_agent if {
	ids(patch(base(extend_key, "agent"), {"request": {"body": {"ttl_seconds": 600}}})) == {"T2", "L2"}
}

test_l2_extend_by_agent_holding_the_scope if {
	# Even a (mis-minted) agent token carrying the extend scope is refused.
	scopes := array.concat(cfg.roles.agent.scopes, ["extend"])
	ids(patch(base(extend_key, "agent"), {"token": {"scopes": scopes}})) == {"T2", "L2"}
}

test_l2_extend_ttl_above_ceiling if {
	ids(extend_with({"ttl_seconds": cfg.lifetime.ceiling_seconds + 1})) == {"L2"}
}

test_l2_extend_ttl_below_min if {
	ids(extend_with({"ttl_seconds": cfg.lifetime.min_ttl_seconds - 1})) == {"L2"}
}

test_l2_extend_ttl_not_an_integer if {
	ids(extend_with({"ttl_seconds": "3600"})) == {"L2"}
	ids(extend_with({"ttl_seconds": 3600.5})) == {"L2"}
}

test_l2_extend_before_ceiling_allowed if {
	# Expiry pushed out (not expired), one second before the ceiling.
	inp := patch(base(extend_key, "operator"), {
		"now": sandbox.ceiling_at - 1,
		"token": {"exp": sandbox.ceiling_at + 3600},
		"sandbox": {"expires_at": sandbox.ceiling_at},
	})
	allowed(inp)
}

test_l2_extend_at_ceiling if {
	# expires_at == ceiling_at: at the ceiling it is also expired (T3).
	inp := patch(base(extend_key, "operator"), {
		"now": sandbox.ceiling_at,
		"token": {"exp": sandbox.ceiling_at + 3600},
		"sandbox": {"expires_at": sandbox.ceiling_at},
	})
	ids(inp) == {"L2", "T3"}
}

test_l2_extend_past_ceiling if {
	inp := patch(base(extend_key, "operator"), {
		"now": sandbox.ceiling_at + 60,
		"token": {"exp": sandbox.ceiling_at + 3600},
	})
	ids(inp) == {"L2", "T3"}
}

test_l2_extend_by_session_reports_role_and_l2 if {
	d := authz.decision with input as base(extend_key, "session")
	{"rule": "L2", "msg": "extend: only operators may extend a sandbox"} in d.violations
}

# ---------------------------------------------------------------------------
# Several rules at once
# ---------------------------------------------------------------------------

test_policy_data_missing_thresholds_fail_closed if {
	# Without the exec thresholds in policy data, exec is refused (never allowed
	# on an undefined comparison) and the messages still render.
	d := authz.decision with input as base(exec_key, "session") with data.sandgate.config as object.remove(cfg, ["exec"])
	{v.rule | some v in d.violations} == {"E1", "E2"}
	every v in d.violations {
		contains(v.msg, "unset")
	}
}

test_e1_argv_with_a_non_string_and_a_nul_byte_names_both if {
	d := authz.decision with input as exec_with({"argv": ["cat", 1, "a\u0000"]})
	{v.msg | some v in d.violations} == {
		"exec: argv[1] is not a string",
		"exec: argv contains a NUL byte",
	}
}

test_e1_argv_not_an_array_and_too_long_messages if {
	d := authz.decision with input as exec_with({"argv": "ls"})
	{v.msg | some v in d.violations} == {"exec: argv is missing or not an array"}
	argv := ["x" | some _ in numbers.range(1, cfg.exec.max_args + 1)]
	d2 := authz.decision with input as exec_with({"argv": argv})
	{v.msg | some v in d2.violations} == {sprintf("exec: argv has more than %v elements", [cfg.exec.max_args])}
}

test_e1_env_bytes_past_the_sanity_bound if {
	"E1" in ids(exec_with({"argv": ["env"], "env_bytes": 1e19}))
	allowed(exec_with({"argv": ["env"], "env_bytes": 0}))
}

test_t3_messages_name_who_is_refused if {
	d := authz.decision with input as patch(base("POST /v1/sandboxes/:id/exec", "operator"), expired_sandbox)
	d.violations == {{"rule": "T3", "msg": "POST /v1/sandboxes/:id/exec is refused on an expired or ended sandbox"}}
	d2 := authz.decision with input as patch(long_session("GET /v1/sandboxes/:id"), {"now": sandbox.expires_at})
	d2.violations == {{"rule": "T3", "msg": "sandbox has expired or ended"}}
}

test_e2_max_output_bytes_bounds if {
	allowed(exec_with({"argv": ["yes"], "max_output_bytes": 1}))
	allowed(exec_with({"argv": ["yes"], "max_output_bytes": cfg.exec.max_output_bytes}))
	ids(exec_with({"argv": ["yes"], "max_output_bytes": cfg.exec.max_output_bytes + 1})) == {"E2"}
	ids(exec_with({"argv": ["yes"], "max_output_bytes": 0})) == {"E2"}
	ids(exec_with({"argv": ["yes"], "max_output_bytes": 1.5})) == {"E2"}
	ids(exec_with({"argv": ["yes"], "max_output_bytes": "64k"})) == {"E2"}
	allowed(exec_with({"argv": ["yes"], "max_output_bytes": null}))
}

test_e1_env_names_allowed if {
	allowed(exec_with({"argv": ["env"], "env_count": 3, "env_names": ["HOME", "PATH", "_x"]}))
	long := concat("", [c | some _ in numbers.range(1, 128); c := "A"])
	allowed(exec_with({"argv": ["env"], "env_count": 1, "env_names": [long]}))
	ids(exec_with({"argv": ["env"], "env_count": 1, "env_names": [concat("", [long, "B"])]})) == {"E1"}
}

test_e1_env_names_malformed_or_reserved_denied if {
	ids(exec_with({"argv": ["env"], "env_count": 1, "env_names": ["1X"]})) == {"E1"}
	ids(exec_with({"argv": ["env"], "env_count": 1, "env_names": ["A-B"]})) == {"E1"}
	ids(exec_with({"argv": ["env"], "env_count": 1, "env_names": ["NOMAD_SECRETS_DIR"]})) == {"E1"}
	ids(exec_with({"argv": ["env"], "env_count": 1, "env_names": ["SANDGATE_X"]})) == {"E1"}
	ids(exec_with({"argv": ["env"], "env_count": 1, "env_names": [7]})) == {"E1"}
	msgs(exec_with({"argv": ["env"], "env_count": 2, "env_names": ["NOMAD_X", "OK"]})) == {`exec: env name NOMAD_X must match exec.env_name_pattern ^[A-Za-z_][A-Za-z0-9_]{0,127}$ and not start with one of ["NOMAD_", "SANDGATE_"]`}
}

test_e1_env_names_must_match_env_count if {
	ids(exec_with({"argv": ["env"], "env_count": 2, "env_names": ["A"]})) == {"E1"}
	ids(json.remove(exec_with({"argv": ["env"], "env_count": 1}), ["request/body/env_names"])) == {"E1"}
	ids(exec_with({"argv": ["env"], "env_count": 1, "env_names": "A"})) == {"E1"}
}

test_e1_env_name_data_missing_refuses_every_name if {
	ids(exec_with({"argv": ["env"], "env_count": 1, "env_names": ["A"]})) == {"E1"} with data.sandgate.config as json.remove(cfg, ["exec/env_name_pattern"])
	ids(exec_with({"argv": ["env"], "env_count": 1, "env_names": ["A"]})) == {"E1"} with data.sandgate.config as json.remove(cfg, ["exec/reserved_env_prefixes"])
	allowed(exec_with({"argv": ["env"], "env_count": 0, "env_names": []})) with data.sandgate.config as json.remove(cfg, ["exec/reserved_env_prefixes"])
}
