//go:build linux

package replay

import (
	"syscall"
	"time"
)

// SleepPrecise sleeps d with nanosleep(2): the kernel's high-resolution
// timer wakes the thread within its timer slack (50 µs by default), where
// a Go timer under a millisecond wakes after ~1.1 ms. The goroutine's
// thread blocks meanwhile (the runtime hands its processor to others).
func (realClock) SleepPrecise(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for {
		// On EINTR ts holds the time left.
		if err := syscall.Nanosleep(&ts, &ts); err != syscall.EINTR {
			return
		}
	}
}
