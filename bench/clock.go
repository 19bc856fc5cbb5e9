package bench

import (
	"sync"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
)

// Clock readings in this package are CLOCK_MONOTONIC nanoseconds: the same
// clock in every process on one host, so a timestamp written into a message
// by one process can be subtracted from a reading taken by another.
//
// unix.ClockGettime is a real system call (x/sys does not use the vDSO), too
// slow to call per message. The runtime's monotonic clock reads the same
// CLOCK_MONOTONIC through the vDSO, from an origin private to the process, so
// the offset between the two is measured once (the smallest of several
// bracketing reads) and Now adds it to time.Since.

var (
	clockOrigin = time.Now()
	clockOnce   sync.Once
	clockOffset int64
)

func calibrate() {
	best := int64(1) << 62
	for range 64 {
		a := time.Since(clockOrigin)
		mono, ok := clockMonotonic()
		if !ok {
			continue
		}
		b := time.Since(clockOrigin)
		if w := int64(b - a); w < best {
			best = w
			// The kernel read sits between a and b: take the middle.
			clockOffset = mono - int64(a) - w/2
		}
	}
}

// Now returns CLOCK_MONOTONIC in nanoseconds. It does not allocate and costs
// a vDSO clock read.
func Now() int64 {
	clockOnce.Do(calibrate)
	return clockOffset + int64(time.Since(clockOrigin))
}

// realtimeOffset returns CLOCK_REALTIME minus CLOCK_MONOTONIC in nanoseconds,
// to convert kernel receive timestamps (SO_TIMESTAMPNS is CLOCK_REALTIME) to
// the monotonic clock. The wall clock can be stepped during a run; the
// offset is taken once per run, so a step shows up as a shifted split.
func realtimeOffset() int64 {
	best := int64(1) << 62
	var off int64
	for range 64 {
		a := Now()
		w := time.Now().UnixNano()
		b := Now()
		if b-a < best {
			best = b - a
			off = w - (a + (b-a)/2)
		}
	}
	return off
}

// cpuSeconds is the user+system CPU time of this process (children
// excluded), 0 where the OS does not say.
func cpuSeconds() float64 { return monotime.ProcessCPU().Seconds() }
