//go:build unix

package bench

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// clockMonotonic reads CLOCK_MONOTONIC in nanoseconds (a system call).
func clockMonotonic() (int64, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, false
	}
	return ts.Nano(), true
}

// cpuSeconds is the user+system CPU time of this process (children
// excluded).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
