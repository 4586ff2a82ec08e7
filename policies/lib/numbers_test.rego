package sandgate.lib.numbers_test

import data.sandgate.lib.numbers
import future.keywords.not

test_whole_numbers_only if {
	every n in [0, 1, 1e18, 2.0] {
		numbers.int_at_least(n, 0)
	}
	every n in [0.5, 1.25, "1", null, true, [1], {"n": 1}] {
		not numbers.int_at_least(n, 0)
		not numbers.int_in(n, 0, 10)
	}
}

test_int_in_a_range if {
	numbers.int_in(1, 1, 3)
	numbers.int_in(3, 1, 3)
	not numbers.int_in(0, 1, 3)
	not numbers.int_in(4, 1, 3)
	not numbers.int_in(2.5, 1, 3)
	not numbers.int_in("2", 1, 3)
}

# A bound missing from policy data, or not a number, admits nothing.
test_a_missing_or_odd_bound_admits_nothing if {
	not numbers.int_in(2, data.no.such.bound, 3)
	not numbers.int_in(2, 1, data.no.such.bound)
	not numbers.int_in(2, 1, "3")
	not numbers.int_in(2, null, 3)
	not numbers.int_at_least(2, data.no.such.bound)
	not numbers.int_at_least(2, "1")
	not numbers.at_least(2, data.no.such.bound)
	not numbers.at_least(2, null)
}

test_int_at_least if {
	numbers.int_at_least(1, 1)
	numbers.int_at_least(7, 0)
	not numbers.int_at_least(0, 1)
	not numbers.int_at_least(1.5, 1)
	not numbers.int_at_least(null, 0)
}

test_at_least if {
	numbers.at_least(0, 0)
	numbers.at_least(0.5, 0)
	not numbers.at_least(-0.5, 0)
	not numbers.at_least("1", 0)
	not numbers.at_least(null, 0)
}
