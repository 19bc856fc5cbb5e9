package oneway

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFeedPacing runs Feed on a bubble's clock: message n is handed to
// publish exactly n/Rate after the first, alone when the feed keeps up
// (each wake-up publishes what is due, no more), and the feed ends after
// Duration with Rate·Duration messages.
func TestFeedPacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var at []time.Duration
		var sizes []int
		n, err := Feed(context.Background(), FeedConfig{Rate: 1000, Duration: 20 * time.Millisecond, Seed: 1},
			func(b [][]byte) error {
				at = append(at, time.Since(start))
				sizes = append(sizes, len(b))
				return nil
			})
		require.NoError(t, err)
		require.Equal(t, 20, n)
		require.Len(t, at, 20)
		for i, d := range at {
			require.Equal(t, time.Duration(i)*time.Millisecond, d, "message %d", i)
			require.Equal(t, 1, sizes[i], "message %d", i)
		}
	})
}

// TestFeedCatchesUp: a publish that takes longer than the interval makes
// the next call carry everything due meanwhile, in one batch, so the rate
// holds over the run instead of drifting.
func TestFeedCatchesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sizes []int
		n, err := Feed(context.Background(), FeedConfig{Rate: 1000, Count: 30, Seed: 1},
			func(b [][]byte) error {
				sizes = append(sizes, len(b))
				time.Sleep(5 * time.Millisecond) // a slow send (virtual time)
				return nil
			})
		require.NoError(t, err)
		require.Equal(t, 30, n)
		require.Equal(t, 1, sizes[0])
		require.Equal(t, 5, sizes[1], "the 5 ms the first send took")
		total := 0
		for _, s := range sizes {
			total += s
		}
		require.Equal(t, 30, total)
	})
}

// TestFeedStopsOnCancel: cancelling the context ends the feed at its next
// wait, with what was published so far.
func TestFeedStopsOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		n, err := Feed(ctx, FeedConfig{Rate: 1000, Seed: 1}, func([][]byte) error {
			cancel() // during the first publish: the feed has no end of its own
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, 1, n)
	})
}
