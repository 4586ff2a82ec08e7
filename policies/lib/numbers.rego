# METADATA
# title: Shared predicates on numbers
# description: >-
#   The one definition of a whole number and of the integer and number ranges
#   the entrypoints check request fields, input facts and budget figures
#   against, so every rule judges a number the same way. A bound that is
#   missing from policy data or not a number makes the predicate fail, never
#   hold: a check written `not numbers.int_in(n, lo, hi)` refuses. No rule
#   here denies by itself; the entrypoints turn these facts into violations.
# scope: package
package sandgate.lib.numbers

import future.keywords.not

# whole(n): n is a number without a fractional part.
whole(n) if {
	is_number(n)
	floor(n) == n
}

# int_in(n, lo, hi): n is a whole number in [lo, hi].
int_in(n, lo, hi) if {
	whole(n)
	is_number(lo)
	is_number(hi)
	n >= lo
	n <= hi
}

# int_at_least(n, lo): n is a whole number of at least lo.
int_at_least(n, lo) if {
	whole(n)
	is_number(lo)
	n >= lo
}

# at_least(n, lo): n is a number (whole or not) of at least lo.
at_least(n, lo) if {
	is_number(n)
	is_number(lo)
	n >= lo
}
