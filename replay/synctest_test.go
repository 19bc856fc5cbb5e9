package replay

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mdbus/mdbus/journal"
	"github.com/stretchr/testify/require"
)

// TestRunOnRuntimeTimers drives the real clock (monotime and Go timers)
// in a synctest bubble, where time moves only when every goroutine waits:
// with Spin < 0 the pacer only sleeps, and each message is emitted
// exactly at its target on the bubble's clock; a deadline mid-replay ends
// the wait at that instant. (The spin, Spin >= 0, looks at a clock that a
// bubble never moves while it spins: the fake clocks above test it.)
func TestRunOnRuntimeTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		recs := records(200, 5*time.Millisecond, 11)
		var at []time.Duration
		var start time.Time
		pr, err := Run(context.Background(), Config{Spin: -1}, Options{
			Open: func() (Source, error) { return &sliceSource{recs: recs}, nil },
			Emit: func(r journal.Record) error {
				if start.IsZero() {
					start = time.Now()
				}
				at = append(at, time.Since(start))
				return nil
			},
		})
		require.NoError(t, err)
		require.Equal(t, uint64(len(recs)), pr.Messages)
		for i, r := range recs {
			require.Equal(t, time.Duration(r.Time-recs[0].Time), at[i], "seq %d", r.Seq)
		}

		// A deadline 100 ms into a replay that would last ~500 ms.
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		begin := time.Now()
		pr, err = Run(ctx, Config{Spin: -1}, Options{
			Open: func() (Source, error) { return &sliceSource{recs: recs}, nil },
			Emit: func(journal.Record) error { return nil },
		})
		require.NoError(t, err, "a cancelled replay stops cleanly")
		require.Equal(t, 100*time.Millisecond, time.Since(begin))
		require.Less(t, pr.Messages, uint64(len(recs)))
	})
}
