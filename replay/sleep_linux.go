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

// Yield does not give up the processor: on Linux the pacer spins only
// the last FineSpin before a message (it sleeps precisely until then), and
// a goroutine scheduled in that time (the publisher's sender, a
// subscriber in the same process) could hold the processor past the
// target; so the spin only looks at the clock, for at most FineSpin.
func (realClock) Yield() {}
