# The files routes, /v1/sandboxes/:id/files (GET reads a file or lists a
# directory, PUT writes one, DELETE removes one): F1 confines the path, F2
# bounds what is written. Whether the token may reach the sandbox at all is T2
# (routes.rego), and T3 refuses files on an expired sandbox
# (sandboxes.rego).
#
# The gateway sends the caller's ?path= as given (query.path) and the same
# path normalised (file.path: "." segments, repeated and trailing slashes
# removed); F1 judges both. Symbolic links are resolved inside the sandbox,
# where the gateway's script refuses a path whose real location leaves
# files.roots (the roots this policy data names), so a link cannot widen what
# F1 allowed.
package sandgate.authz

import data.sandgate.config as cfg
import data.sandgate.lib.numbers
import data.sandgate.lib.paths
import future.keywords.not
import future.keywords.or

_files_route := "/v1/sandboxes/:id/files"

_files_cfg := object.get(cfg, "files", {})

# ---------------------------------------------------------------------------
# F1: the path
# ---------------------------------------------------------------------------

# METADATA
# title: A file operation names an absolute, bounded path
# description: >-
#   query.path must be a non-empty string that starts with "/", holds no NUL
#   byte and is at most files.max_path_bytes UTF-8 bytes long. A relative path
#   would be resolved against whatever directory the task happens to be in.
# custom:
#   id: F1
#   severity: critical
violations contains {"rule": "F1", "msg": sprintf("files: path must be an absolute path without NUL bytes, at most %v bytes", [object.get(_files_cfg, "max_path_bytes", "unset")])} if {
	input.request.route == _files_route
	not {
		p := input.request.query.path
		is_string(p)
		startswith(p, "/")
		not contains(p, "\u0000")
		count(hex.encode(p)) / 2 <= cfg.files.max_path_bytes
	}
}

# METADATA
# title: A file path never climbs with ".."
# description: >-
#   Refuses a query.path with a ".." segment, wherever it is and even where it
#   would stay inside a root once resolved (/workspace/a/../b): what the
#   policy allows is what the caller wrote, never a path that depends on how
#   it is resolved.
# custom:
#   id: F1
#   severity: critical
violations contains {"rule": "F1", "msg": "files: path must not contain a '..' segment"} if {
	input.request.route == _files_route
	p := input.request.query.path
	is_string(p)
	".." in split(p, "/")
}

# METADATA
# title: A file path stays under the allowed roots
# description: >-
#   The normalised path (file.path, computed by the gateway) must be
#   well-formed (absolute, no empty, "." or ".." segment, no trailing slash)
#   and equal to, or under, one of files.roots on a segment boundary:
#   /workspacefoo is not under /workspace. By default only /workspace and /tmp,
#   the sandbox's writable work areas, are reachable; the image's own files
#   (/etc, /bin, /proc) are not. Missing roots refuse every path.
# custom:
#   id: F1
#   severity: critical
violations contains {"rule": "F1", "msg": sprintf("files: path %v is not under an allowed root %v", [_file_path_shown, object.get(_files_cfg, "roots", "unset")])} if {
	input.request.route == _files_route
	not {
		p := input.request.file.path
		paths.normalised_absolute(p)
		some root in cfg.files.roots
		paths.at_or_under(p, root)
	}
}

_file_path_shown := p if {
	p := input.request.file.path
	is_string(p)
	count(p) <= 256
} else := "(missing or too long to show)"

# METADATA
# title: A root itself is never replaced or removed
# description: >-
#   PUT and DELETE refuse a normalised path equal to one of files.roots: a
#   write replaces a file under a root and a delete removes one, never the
#   work area itself. GET of a root lists it.
# custom:
#   id: F1
#   severity: high
violations contains {"rule": "F1", "msg": sprintf("files: %v %v would replace or remove an allowed root", [input.request.method, input.request.file.path])} if {
	input.request.route == _files_route
	input.request.method in {"PUT", "DELETE"}
	some root in cfg.files.roots
	paths.normalised_absolute(input.request.file.path)
	root == input.request.file.path
}

# ---------------------------------------------------------------------------
# F2: what a write brings
# ---------------------------------------------------------------------------

# METADATA
# title: A file write states its size, within the bound
# description: >-
#   PUT must carry its size (file.bytes, the request's Content-Length: the
#   gateway refuses a body without one with 411) as an integer in [0,
#   files.max_write_bytes]; the gateway then reads exactly that many bytes
#   into the sandbox, so the bound cannot be overrun by a longer body.
# custom:
#   id: F2
#   severity: high
violations contains {"rule": "F2", "msg": sprintf("files: a write must state its size, at most %v bytes", [object.get(_files_cfg, "max_write_bytes", "unset")])} if {
	input.request.method == "PUT"
	input.request.route == _files_route
	not numbers.int_in(input.request.file.bytes, 0, cfg.files.max_write_bytes)
}

# METADATA
# title: A written file gets only permission bits the policy allows
# description: >-
#   file.mode (the ?mode= octal, parsed by the gateway; absent means
#   files.default_mode), when present and not null, must be an integer whose
#   bits are all in files.allowed_mode_bits (511, octal 0777, by default: no
#   setuid, setgid or sticky bit).
# custom:
#   id: F2
#   severity: high
violations contains {"rule": "F2", "msg": sprintf("files: mode must use only the bits %o", [object.get(_files_cfg, "allowed_mode_bits", 0)])} if {
	input.request.method == "PUT"
	input.request.route == _files_route
	m := input.request.file.mode
	m != null
	not {
		numbers.int_at_least(m, 0)
		bits.and(m, cfg.files.allowed_mode_bits) == m
	}
}

# ---------------------------------------------------------------------------
# F2: what a read returns
# ---------------------------------------------------------------------------

# METADATA
# title: A file read's window is bounded
# description: >-
#   GET's query.offset, when present and not null, must be a non-negative
#   integer, and query.length an integer in [1, files.max_read_bytes]: a read
#   returns at most length bytes of a regular file from offset, so a file
#   larger than what one read returns is read in parts. (Without a length the
#   whole file, from offset, is the window; the sandbox refuses one larger than
#   files.max_read_bytes with 422 file_too_large.)
# custom:
#   id: F2
#   severity: medium
violations contains {"rule": "F2", "msg": sprintf("files: offset must be a non-negative integer and length an integer in [1, %v]", [object.get(_files_cfg, "max_read_bytes", "unset")])} if {
	input.request.method == "GET"
	input.request.route == _files_route
	not {
		_whole_or_null(object.get(input.request.query, "offset", null), 0, 1e18)
		_whole_or_null(object.get(input.request.query, "length", null), 1, cfg.files.max_read_bytes)
	}
}

_whole_or_null(n, _, _) if n == null

_whole_or_null(n, lo, hi) if numbers.int_in(n, lo, hi)
