//go:build !unix

package bench

// clockMonotonic reports false where there is no CLOCK_MONOTONIC: Now is
// then the runtime's monotonic clock from a process-private origin, good
// within one process only.
func clockMonotonic() (int64, bool) { return 0, false }
