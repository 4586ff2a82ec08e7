package store

import (
	"fmt"
	"slices"
	"unicode/utf8"
)

// The checks below are part of the contract, so every implementation
// refuses the same records and queries with the same words.

// Invalid returns an error wrapping ErrInvalid that names the field.
func Invalid(field, reason string) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, reason)
}

// ValidateNew checks a record handed to Reserve. The id, node and
// principal are keys (of records, indexes and use) and must be valid
// UTF-8: JSON would store anything else altered, and the record read back
// would name other keys than the ones written.
func ValidateNew(rec Sandbox) error {
	switch {
	case rec.ID == "":
		return Invalid("id", "empty")
	case !utf8.ValidString(rec.ID):
		return Invalid("id", "not valid UTF-8")
	case !utf8.ValidString(rec.Node):
		return Invalid("node", "not valid UTF-8")
	case !utf8.ValidString(rec.Principal):
		return Invalid("principal", "not valid UTF-8")
	case !rec.State.Live():
		return Invalid("state", fmt.Sprintf("%q is not live", rec.State))
	case rec.Node == "":
		return Invalid("node", "empty")
	case rec.Principal == "":
		return Invalid("principal", "empty")
	case rec.CPUMHz < 0:
		return Invalid("cpu_mhz", "negative")
	case rec.MemoryMB < 0:
		return Invalid("memory_mb", "negative")
	}
	return nil
}

// ValidateImport checks a record handed to Importer.Import: what
// ValidateNew checks, but in any valid state.
func ValidateImport(rec Sandbox) error {
	if !rec.State.Valid() {
		return Invalid("state", fmt.Sprintf("unknown state %q", rec.State))
	}
	live := rec
	live.State = StateStarting
	return ValidateNew(live)
}

// CheckChange enforces what Update's mutate may not do.
func CheckChange(cur, next Sandbox) error {
	switch {
	case next.ID != cur.ID:
		return Invalid("id", "may not change")
	case next.Node != cur.Node:
		return Invalid("node", "may not change")
	case next.Principal != cur.Principal:
		return Invalid("principal", "may not change")
	case next.CPUMHz != cur.CPUMHz:
		return Invalid("cpu_mhz", "may not change")
	case next.MemoryMB != cur.MemoryMB:
		return Invalid("memory_mb", "may not change")
	case !next.State.Valid():
		return Invalid("state", fmt.Sprintf("unknown state %q", next.State))
	case !cur.State.Live() && next.State.Live():
		return Invalid("state", fmt.Sprintf("%s record may not become %s", cur.State, next.State))
	}
	return nil
}

// PageLimit applies Query.Limit's default and bounds.
func PageLimit(n int) (int, error) {
	switch {
	case n == 0:
		return DefaultPageLimit, nil
	case n < 1 || n > MaxPageLimit:
		return 0, Invalid("limit", fmt.Sprintf("%d is outside 1..%d", n, MaxPageLimit))
	}
	return n, nil
}

// QueryStates returns a query's states in the order of States, without
// repeats; all four for none.
func QueryStates(states []State) ([]State, error) {
	for _, st := range states {
		if !st.Valid() {
			return nil, Invalid("states", fmt.Sprintf("unknown state %q", st))
		}
	}
	all := States()
	if len(states) == 0 {
		return all, nil
	}
	out := make([]State, 0, len(all))
	for _, st := range all {
		if slices.Contains(states, st) {
			out = append(out, st)
		}
	}
	return out, nil
}
