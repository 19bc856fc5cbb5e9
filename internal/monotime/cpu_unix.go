//go:build unix

package monotime

import (
	"syscall"
	"time"
)

// ProcessCPU returns the user and system CPU time this process has used
// (getrusage(2), children excluded), or 0 when the kernel does not say.
// Two readings around a run, divided by its wall time and the processors
// it had, say whether the run waited for a CPU.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
