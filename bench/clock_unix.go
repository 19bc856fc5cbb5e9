//go:build unix

package bench

import "golang.org/x/sys/unix"

// clockMonotonic reads CLOCK_MONOTONIC in nanoseconds (a system call).
func clockMonotonic() (int64, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, false
	}
	return ts.Nano(), true
}
