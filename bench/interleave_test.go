package bench

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTurnsRoundRobin: probes of several searches run one at a time, in
// turn, and a search that ends leaves the others to go on alternating.
func TestTurnsRoundRobin(t *testing.T) {
	const n = 3
	probes := []int{2, 5, 4} // search 0 ends first, then 2
	tu := newTurns(n)
	var (
		mu      sync.Mutex
		order   []int
		running atomic.Int32
		overlap atomic.Bool
	)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			defer tu.leave(i)
			for range probes[i] {
				tu.take(i)
				if running.Add(1) != 1 {
					overlap.Store(true)
				}
				runtime.Gosched() // a probe takes time: let the others try
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				running.Add(-1)
				tu.give(i)
			}
		})
	}
	wg.Wait()
	require.False(t, overlap.Load(), "two probes at once")
	require.Equal(t, []int{0, 1, 2, 0, 1, 2, 1, 2, 1, 2, 1}, order)
}

// TestTurnsLeaveBeforeProbing: a search that fails before its first probe
// (a bad case) passes its turn on instead of holding the others.
func TestTurnsLeaveBeforeProbing(t *testing.T) {
	tu := newTurns(2)
	done := make(chan struct{})
	go func() {
		tu.take(1)
		tu.give(1)
		close(done)
	}()
	tu.leave(0)
	<-done
}

// TestLossGroups: a lossless mdbus cell is searched with the lossy cells
// of its shape that follow it; other cells alone.
func TestLossGroups(t *testing.T) {
	cases := CapacityCases(CapacityMatrix{
		Sizes:        []Sizes{{Min: 64, Max: 64}},
		Subscribers:  []int{1},
		Systems:      []System{Mdbus, Raw},
		PayloadSizes: []int{1472, 8972},
		Losses:       []float64{0.01, 0.05},
	})
	groups := lossGroups(cases)
	var shape [][]float64
	for _, g := range groups {
		var losses []float64
		for _, c := range g {
			losses = append(losses, c.Loss)
			require.True(t, sameShape(g[0], c))
		}
		shape = append(shape, losses)
	}
	require.Equal(t, [][]float64{{0, 0.01, 0.05}, {0, 0.01, 0.05}, {0}}, shape)
	require.Equal(t, 1472, groups[0][0].PayloadSize)
	require.Equal(t, 8972, groups[1][0].PayloadSize)
	require.Equal(t, Raw, groups[2][0].System)
}
