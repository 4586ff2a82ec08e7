//go:build !linux

package replay

// limitsSupported: elsewhere a worker cannot be bounded, and Run refuses
// to start one (fail closed).
const limitsSupported = false

func setLimits(int, Limits) error { return ErrUnsupported }
