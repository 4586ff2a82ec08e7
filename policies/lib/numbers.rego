# METADATA
# title: Shared predicates on numbers
# description: >-
#   The one definition of the integer and number ranges
#   the entrypoints check request fields, input facts and budget figures
#   against, so every rule judges a number the same way. A bound that is
#   missing from policy data or not a number makes the predicate fail, never
#   hold: a check written `not numbers.int_in(n, lo, hi)` refuses. No rule
#   here denies by itself; the entrypoints turn these facts into violations.
# scope: package
package sandgate.lib.numbers

import future.keywords.not

# int_in(n, lo, hi): n is a whole number (a number equal to its floor) in
# [lo, hi]. The whole-number test is spelled out here and in int_at_least
# rather than shared through a third function: a nested call cost about 25
# allocations a decision on the request path (make bench-latency).
int_in(n, lo, hi) if {
	is_number(n)
	floor(n) == n
	is_number(lo)
	is_number(hi)
	n >= lo
	n <= hi
}

# int_at_least(n, lo): n is a whole number of at least lo.
int_at_least(n, lo) if {
	is_number(n)
	floor(n) == n
	is_number(lo)
	n >= lo
}

# at_least(n, lo): n is a number (whole or not) of at least lo.
at_least(n, lo) if {
	is_number(n)
	is_number(lo)
	n >= lo
}
