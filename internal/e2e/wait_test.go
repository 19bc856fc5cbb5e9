package e2e

import (
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/labtest"
)

// poll calls cond every pollEvery until it holds or d passes, and says
// whether it held. It bounds a wait and returns as soon as cond holds, so
// no test guesses how long the system under test needs; a test that goes
// on anyway (to report what it found) uses it, one that cannot go on uses
// waitFor.
func poll(d time.Duration, cond func() bool) bool { return pollEach(d, pollEvery, cond) }

// pollEach is poll calling cond every period, for conditions that cost a
// process (tmux) to check.
func pollEach(d, every time.Duration, cond func() bool) bool { return labtest.Poll(d, every, cond) }

// pollEvery is short against every bound here (seconds) and long against
// a condition's cost (a counter or a stat of a file).
const pollEvery = 5 * time.Millisecond

// waitFor fails the test unless cond holds within d. Bounds are sized for
// a loaded 2-core CI host under -race, tens of times what an idle host
// needs; they only decide how long a broken run takes to report.
func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	if !poll(d, cond) {
		t.Fatalf("condition not met within %v", d)
	}
}

// settle waits until value stays the same for quiet, or until bound
// passes, and returns its last value. It is for what has no event to wait
// on, such as the datagrams still in flight when a process is killed;
// each caller says why nothing arrives after quiet.
func settle[T comparable](bound, quiet time.Duration, value func() T) T {
	tick := time.NewTicker(quiet / 10)
	defer tick.Stop()
	end := time.Now().Add(bound)
	last, since := value(), time.Now()
	for time.Since(since) < quiet && time.Now().Before(end) {
		<-tick.C
		if v := value(); v != last {
			last, since = v, time.Now()
		}
	}
	return last
}
