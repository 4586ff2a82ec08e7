# METADATA
# title: Shared predicates on sandbox paths
# description: >-
#   The one definition of a normalised absolute path and of "at or under a
#   root", shared by F1 (files.roots) and E1 (exec.workdir_roots) so both
#   judge a path and a root the same way. A root that is not itself a
#   normalised absolute path ("", "workspace", "/workspace/") is under
#   nothing and has nothing under it: a typo in policy data refuses paths,
#   never admits them (the gateway also refuses such a bundle at load). No
#   rule here denies by itself; the entrypoints turn these facts into
#   violations.
# scope: package
package sandgate.lib.paths

import future.keywords.not

# normalised_absolute(p): p is a string that is "/", or "/" followed by
# segments none of which is empty, "." or "..", with no trailing "/".
normalised_absolute(p) if p == "/"

normalised_absolute(p) if {
	is_string(p)
	startswith(p, "/")
	not endswith(p, "/")
	every seg in split(substring(p, 1, -1), "/") {
		not seg in {"", ".", ".."}
	}
}

# at_or_under(p, root): root is a normalised absolute path and p is root or
# below it on a segment boundary (/workspacefoo is not under /workspace;
# every absolute path is under "/"). p itself is not judged here: callers
# require it normalised first, so ".." cannot climb back out.
at_or_under(p, root) if {
	normalised_absolute(root)
	p == root
}

at_or_under(p, root) if {
	is_string(p)
	normalised_absolute(root)
	startswith(p, concat("", [trim_suffix(root, "/"), "/"]))
}
