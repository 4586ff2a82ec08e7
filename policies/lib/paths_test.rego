package sandgate.lib.paths_test

import data.sandgate.lib.paths
import future.keywords.not

test_normalised_absolute_paths if {
	every p in ["/", "/workspace", "/workspace/a/b", "/workspace/.hidden", "/workspace/...", "/a b"] {
		paths.normalised_absolute(p)
	}
}

test_odd_paths_are_not_normalised if {
	every p in ["", "workspace", "./workspace", "/workspace/", "//workspace", "/workspace//a", "/workspace/.", "/workspace/..", "/workspace/../etc", "/./x"] {
		not paths.normalised_absolute(p)
	}
	not paths.normalised_absolute(["/workspace"])
	not paths.normalised_absolute(null)
}

test_at_or_under_a_root_on_a_segment_boundary if {
	paths.at_or_under("/workspace", "/workspace")
	paths.at_or_under("/workspace/a/b", "/workspace")
	not paths.at_or_under("/workspacefoo", "/workspace")
	not paths.at_or_under("/etc/shadow", "/workspace")
	paths.at_or_under("/etc/shadow", "/")
	paths.at_or_under("/", "/")
}

# The hole this library closed: an empty root (or any root that is not a
# normalised absolute path) admitted every path, because "" + "/" is a
# prefix of every absolute path.
test_a_root_that_is_not_normalised_has_nothing_under_it if {
	every root in ["", "workspace", "/workspace/", "//", "/workspace/..", ["/"], null] {
		not paths.at_or_under("/etc/shadow", root)
		not paths.at_or_under("/workspace/x", root)
	}
	not paths.at_or_under("", "")
}
