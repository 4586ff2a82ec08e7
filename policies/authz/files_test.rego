# Tests for the files routes (files.rego): F1 and F2, and T3 on files.
package sandgate.authz_test

import data.sandgate.authz
import future.keywords.not

files_get := "GET /v1/sandboxes/:id/files"

files_put := "PUT /v1/sandboxes/:id/files"

files_delete := "DELETE /v1/sandboxes/:id/files"

# files_at(key, raw, normalised) is the base input of key, for role session,
# with ?path=raw that the gateway normalised to normalised.
files_at(key, raw, normalised) := patch(base(key, "session"), {"request": {"query": {"path": raw}, "file": {"path": normalised}}})

test_f1_every_role_reads_writes_and_deletes_under_the_roots if {
	every role in ["operator", "agent", "session"] {
		every key in [files_get, files_put, files_delete] {
			allowed(base(key, role))
		}
	}
}

test_f1_nested_paths_and_both_roots_are_allowed if {
	every p in ["/workspace/a/b/c.txt", "/tmp/x", "/workspace/.hidden", "/workspace/sp ace/ünïcode"] {
		allowed(files_at(files_put, p, p))
		allowed(files_at(files_get, p, p))
	}
}

test_f1_a_root_is_listed_but_never_replaced_or_removed if {
	allowed(files_at(files_get, "/workspace", "/workspace"))
	allowed(files_at(files_get, "/tmp/", "/tmp"))
	ids(files_at(files_put, "/workspace", "/workspace")) == {"F1"}
	ids(files_at(files_delete, "/tmp/", "/tmp")) == {"F1"}
	ids(files_delete_root_message) == {"F1"}
}

files_delete_root_message := files_at(files_delete, "/workspace", "/workspace")

test_f1_root_message_names_the_method_and_path if {
	d := authz.decision with input as files_delete_root_message
	some v in d.violations
	v.msg == "files: DELETE /workspace would replace or remove an allowed root"
}

test_f1_paths_outside_the_roots_are_refused if {
	every p in ["/etc/passwd", "/", "/proc/self/environ", "/workspacefoo", "/workspacefoo/x", "/tm", "/bin/sh"] {
		every key in [files_get, files_put, files_delete] {
			ids(files_at(key, p, p)) == {"F1"}
		}
	}
}

test_f1_dot_dot_is_refused_even_inside_a_root if {
	every raw in ["/workspace/../etc/passwd", "/workspace/a/../b", "/tmp/..", "/workspace/.."] {
		ids(files_at(files_get, raw, "/workspace/b")) == {"F1"}
	}
}

test_f1_a_relative_empty_or_missing_path_is_refused if {
	every raw in ["workspace/x", "", "./x"] {
		ids(files_at(files_get, raw, "/workspace/x")) == {"F1"}
	}
	ids(json.remove(base(files_get, "session"), ["request/query/path"])) == {"F1"}
	ids(patch(base(files_get, "session"), {"request": {"query": {"path": 7}}})) == {"F1"}
}

test_f1_nul_is_refused if {
	ids(files_at(files_put, "/workspace/a\u0000b", "/workspace/a\u0000b")) == {"F1"}
}

test_f1_the_path_length_is_bounded if {
	long := concat("", ["/workspace/", repeat("a", cfg.files.max_path_bytes)])
	ids(files_at(files_get, long, long)) == {"F1"}
	just := concat("", ["/workspace/", repeat("a", cfg.files.max_path_bytes - 11)])
	allowed(files_at(files_get, just, just))

	# Bytes, not characters: two-byte characters count twice.
	wide := concat("", ["/workspace/", repeat("é", (cfg.files.max_path_bytes / 2) - 5)])
	ids(files_at(files_get, wide, wide)) == {"F1"}
}

test_f1_a_badly_normalised_file_path_is_refused if {
	every p in ["/workspace//x", "/workspace/./x", "/workspace/x/", "workspace/x", "", "/workspace/../etc"] {
		ids(files_at(files_get, "/workspace/x", p)) == {"F1"}
	}
	ids(json.remove(base(files_get, "session"), ["request/file"])) == {"F1"}
	ids(patch(base(files_get, "session"), {"request": {"file": {"path": ["/workspace/x"]}}})) == {"F1"}
}

test_f1_missing_or_odd_roots_refuse if {
	ids(base(files_get, "session")) == {"F1"} with data.sandgate.config.files.roots as []
	ids(base(files_get, "session")) == {"F1"} with data.sandgate.config.files.roots as ["workspace"]
	allowed(files_at(files_get, "/etc/hosts", "/etc/hosts")) with data.sandgate.config.files.roots as ["/"]
	ids(base(files_get, "session")) == {"F1"} with data.sandgate.config.files.roots as ["/workspace/"]
}

# An empty root admitted every path (it and "/" made a prefix of all of
# them): a session token read /etc/shadow. A root that is not a normalised
# absolute path admits nothing, whatever else the list holds.
test_f1_an_empty_or_odd_root_admits_nothing if {
	every roots in [[""], ["", "/workspace"], ["/workspace/.."], ["//"], [["/"]], [null]] {
		ids(files_at(files_get, "/etc/shadow", "/etc/shadow")) == {"F1"} with data.sandgate.config.files.roots as roots
		ids(files_at(files_put, "/etc/shadow", "/etc/shadow")) == {"F1"} with data.sandgate.config.files.roots as roots
	}
	allowed(base(files_get, "session")) with data.sandgate.config.files.roots as ["", "/workspace"]
}

test_f1_the_root_slash_itself_is_never_replaced if {
	ids(files_at(files_put, "/", "/")) == {"F1"} with data.sandgate.config.files.roots as ["/"]
}

test_f1_the_message_names_the_path_and_the_roots if {
	d := authz.decision with input as files_at(files_get, "/etc/passwd", "/etc/passwd")
	some v in d.violations
	v.msg == sprintf("files: path /etc/passwd is not under an allowed root %v", [cfg.files.roots])
}

test_f2_a_write_states_its_size_within_the_bound if {
	allowed(patch(base(files_put, "agent"), {"request": {"file": {"bytes": 0}}}))
	allowed(patch(base(files_put, "agent"), {"request": {"file": {"bytes": cfg.files.max_write_bytes}}}))
	every n in [cfg.files.max_write_bytes + 1, -1, 1.5, "10", null] {
		ids(patch(base(files_put, "agent"), {"request": {"file": {"bytes": n}}})) == {"F2"}
	}
	ids(json.remove(base(files_put, "agent"), ["request/file/bytes"])) == {"F2"}
}

test_f2_reads_and_deletes_carry_no_size if {
	allowed(base(files_get, "agent"))
	allowed(base(files_delete, "agent"))
}

test_f2_mode_bits_are_bounded if {
	every m in [0, 420, 384, 493, 511] {
		allowed(patch(base(files_put, "session"), {"request": {"file": {"mode": m}}}))
	}
	allowed(json.remove(base(files_put, "session"), ["request/file/mode"]))
	allowed(patch(base(files_put, "session"), {"request": {"file": {"mode": null}}}))

	# setuid (04000), setgid (02000), sticky (01000), beyond, negative, fractional, text
	every m in [2541, 1517, 1023, 4096, -1, 1.5, "0644"] {
		ids(patch(base(files_put, "session"), {"request": {"file": {"mode": m}}})) == {"F2"}
	}
}

test_f2_the_mode_message_names_the_allowed_bits if {
	d := authz.decision with input as patch(base(files_put, "session"), {"request": {"file": {"mode": 2541}}})
	some v in d.violations
	v.msg == "files: mode must use only the bits 777"
}

test_t3_files_are_refused_on_an_expired_sandbox_for_every_role if {
	every role in ["operator", "agent"] {
		every key in [files_get, files_put, files_delete] {
			ids(patch(base(key, role), expired_sandbox)) == {"T3"}
		}
	}
	every key in [files_get, files_put, files_delete] {
		ids(patch(long_session(key), {"now": sandbox.expires_at + 1})) == {"T3"}
	}
}

test_t2_a_token_without_the_files_scopes_is_refused if {
	ids(patch(base(files_get, "session"), {"token": {"scopes": ["status", "exec"]}})) == {"T2"}
	ids(patch(base(files_put, "session"), {"token": {"scopes": ["files:read"]}})) == {"T2"}
	allowed(patch(base(files_get, "session"), {"token": {"scopes": ["files:read"]}}))
}

test_f2_a_read_window_is_bounded if {
	allowed(patch(base(files_get, "session"), {"request": {"query": {"offset": 0, "length": 1}}}))
	allowed(patch(base(files_get, "session"), {"request": {"query": {"offset": 1e12, "length": cfg.files.max_read_bytes}}}))
	allowed(patch(base(files_get, "session"), {"request": {"query": {"offset": 10}}}))
	allowed(patch(base(files_get, "session"), {"request": {"query": {"length": 10, "offset": null}}}))
	every q in [
		{"length": 0}, {"length": cfg.files.max_read_bytes + 1}, {"length": -1}, {"length": 1.5}, {"length": "10"},
		{"offset": -1}, {"offset": 0.5}, {"offset": "0"}, {"offset": 1e19},
	] {
		ids(patch(base(files_get, "session"), {"request": {"query": q}})) == {"F2"}
	}
}

test_f2_the_read_window_message_names_the_bound if {
	d := authz.decision with input as patch(base(files_get, "session"), {"request": {"query": {"length": 0}}})
	some v in d.violations
	v.msg == sprintf("files: offset must be a non-negative integer and length an integer in [1, %v]", [cfg.files.max_read_bytes])
}

test_f2_a_read_without_max_read_bytes_refuses_a_length if {
	ids(patch(base(files_get, "session"), {"request": {"query": {"length": 10}}})) == {"F2"} with data.sandgate.config.files.max_read_bytes as null
}
