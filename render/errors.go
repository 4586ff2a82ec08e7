package render

import (
	"errors"
	"fmt"
)

// ErrInvalidSpec is the sentinel every SandboxSpec validation error wraps.
// Callers branch on it with errors.Is and read the offending field with
// errors.As to *FieldError.
var ErrInvalidSpec = errors.New("render: invalid spec")

// ErrInvalidConfig is the sentinel that New wraps when the renderer's Config
// is unusable. It signals an operator or wiring mistake, never a bad request.
var ErrInvalidConfig = errors.New("render: invalid config")

// FieldError reports the first invalid field of a SandboxSpec. Field is the
// JSON/REST name of the field (for example "cpu_mhz"), Reason a short
// human-readable explanation. A FieldError always unwraps to ErrInvalidSpec.
type FieldError struct {
	// Field is the JSON/REST name of the offending field.
	Field string
	// Reason says what is wrong with it, e.g. "must be positive".
	Reason string
}

// Error returns `render: invalid spec: field "<field>": <reason>`.
func (e *FieldError) Error() string {
	return fmt.Sprintf("%s: field %q: %s", ErrInvalidSpec.Error(), e.Field, e.Reason)
}

// Unwrap returns ErrInvalidSpec so that errors.Is(err, ErrInvalidSpec) holds.
func (e *FieldError) Unwrap() error { return ErrInvalidSpec }

// fieldErr builds a *FieldError with a formatted reason.
func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// configErr builds an error wrapping ErrInvalidConfig.
func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}
