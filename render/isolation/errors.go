package isolation

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig is the sentinel every Config validation error wraps.
// Callers branch on it with errors.Is and read the offending flag with
// errors.As to *FlagError.
var ErrInvalidConfig = errors.New("isolation: invalid config")

// FlagError reports one invalid Config value. Flag is the command-line flag
// that sets it (e.g. "--subnet"), or the Config field for values that come
// from policy data or code. A FlagError always unwraps to ErrInvalidConfig.
type FlagError struct {
	// Flag names the flag (or field) that carries the bad value.
	Flag string
	// Value is the offending value as given.
	Value string
	// Reason says what is wrong with it.
	Reason string
}

// Error returns `isolation: invalid config: <flag> "<value>": <reason>`.
func (e *FlagError) Error() string {
	return fmt.Sprintf("%s: %s %q: %s", ErrInvalidConfig.Error(), e.Flag, e.Value, e.Reason)
}

// Unwrap returns ErrInvalidConfig so that errors.Is(err, ErrInvalidConfig) holds.
func (e *FlagError) Unwrap() error { return ErrInvalidConfig }

// flagErr builds a *FlagError with a formatted reason.
func flagErr(flag, value, format string, args ...any) *FlagError {
	return &FlagError{Flag: flag, Value: value, Reason: fmt.Sprintf(format, args...)}
}
