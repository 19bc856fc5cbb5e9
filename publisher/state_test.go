package publisher

import (
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
)

// TestTurnExcludes: goroutines that take the turn never overlap, and every
// one of them gets it.
func TestTurnExcludes(t *testing.T) {
	tn := turn{wake: make(chan struct{}, 1)}
	var in, total int // guarded by the turn
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20000 {
				require.True(t, tn.take(nil))
				in++
				if in != 1 {
					t.Error("two holders at once")
				}
				total++
				in--
				tn.give()
			}
		})
	}
	wg.Wait()
	require.Equal(t, 8*20000, total)
	require.Zero(t, tn.state.Load())
}

// TestTurnClosing: a waiter leaves when closing is closed, and the turn
// still works for the others.
func TestTurnClosing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tn := turn{wake: make(chan struct{}, 1)}
		closing := make(chan struct{})
		require.True(t, tn.take(nil))
		got := make(chan bool)
		go func() { got <- tn.take(closing) }()
		synctest.Wait() // the waiter is parked
		close(closing)
		require.False(t, <-got)
		tn.give()
		require.True(t, tn.take(nil), "a free turn is taken")
		require.False(t, tn.take(closing), "a taken one is not, once closing")
		tn.give()
		require.Zero(t, tn.state.Load())
	})
}
