package demo

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// The demo's clock (live lines every second, the bounded wait for the
// subscribers) runs on a synctest bubble's clock here; the run itself,
// with its sockets, is TestOutputFits80Columns.

// TestLiveLinesEverySecond: while the feed runs (3.5 s here) a block of
// live lines comes every second, exactly, and none after the feed ends;
// the feed's error is what the report returns.
func TestLiveLinesEverySecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		fed := make(chan error, 1)
		errFeed := errors.New("feed failed")
		time.AfterFunc(3500*time.Millisecond, func() { fed <- errFeed })
		var at []time.Duration
		err := reportUntil(fed, liveEvery, func() { at = append(at, time.Since(start)) })
		require.ErrorIs(t, err, errFeed)
		require.Equal(t, 3500*time.Millisecond, time.Since(start), "returns when the feed ends")
		require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}, at)
	})
}

// TestCatchUpWait: the wait for the subscribers ends at the first check
// after they caught up, or at its bound when they never do.
func TestCatchUpWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		caughtUp := func() bool { return time.Since(start) >= 1234*time.Millisecond }
		require.True(t, awaitCaughtUp(catchUpBound, caughtUp))
		require.Equal(t, 1240*time.Millisecond, time.Since(start), "the check after 1.234 s, on the 10 ms grid")

		start = time.Now()
		checks := 0
		require.False(t, awaitCaughtUp(catchUpBound, func() bool { checks++; return false }))
		require.Equal(t, catchUpBound, time.Since(start), "gives up at the bound")
		require.Equal(t, int(catchUpBound/catchUpPoll)+1, checks, "one check per poll, and one at the bound")
	})
}
