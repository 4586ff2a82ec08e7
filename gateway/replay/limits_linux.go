//go:build linux

package replay

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// limitsSupported: Linux sets a child's limits with prlimit(2).
const limitsSupported = true

// setLimits sets RLIMIT_DATA and RLIMIT_CPU (soft and hard alike) on the
// process pid.
func setLimits(pid int, lim Limits) error {
	mem := uint64(lim.Memory) //nolint:gosec // G115: Run checked it is positive
	if err := unix.Prlimit(pid, unix.RLIMIT_DATA, &unix.Rlimit{Cur: mem, Max: mem}, nil); err != nil {
		return fmt.Errorf("RLIMIT_DATA: %w", err)
	}
	cpu := uint64(cpuSeconds(lim.CPU).Seconds())
	if err := unix.Prlimit(pid, unix.RLIMIT_CPU, &unix.Rlimit{Cur: cpu, Max: cpu}, nil); err != nil {
		return fmt.Errorf("RLIMIT_CPU: %w", err)
	}
	return nil
}
