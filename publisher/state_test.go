package publisher

import (
	"sync"
	"testing"
	"testing/synctest"
	"unsafe"

	"github.com/mdbus/mdbus/wire"
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

// TestRingReusesLastFreed: the next packet goes into the buffer of the
// last packet sent, still in the CPU's caches, never into one whose
// packet is sealed and unsent; the queue's bound holds.
func TestRingReusesLastFreed(t *testing.T) {
	const q, payload = 8, 200
	s, err := wire.ParseSession("RING")
	require.NoError(t, err)
	r := newRing(q, payload)
	// Buffers are compared by address (require.Equal on pointers would
	// compare the bytes they point to).
	open := func() uintptr {
		require.True(t, r.room())
		r.openPacket(s, 1, payload)
		require.NoError(t, r.enc.Add([]byte("m")))
		p := uintptr(unsafe.Pointer(unsafe.SliceData(r.enc.Bytes())))
		r.seal()
		return p
	}
	// Fill the queue: eight distinct buffers.
	seen := map[uintptr]bool{}
	for range q {
		seen[open()] = true
	}
	require.Len(t, seen, q)
	require.False(t, r.room(), "the queue is full")
	// Send three: the next packets take them back, last freed first.
	first, n := r.take(3)
	require.EqualValues(t, 3, n)
	addr := func(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
	freed := []uintptr{addr(r.pkts[first%q]), addr(r.pkts[(first+1)%q]), addr(r.pkts[(first+2)%q])}
	r.sent(n)
	for i := 2; i >= 0; i-- {
		require.Equal(t, freed[i], open(), "buffer freed %d-th from last reused", 2-i)
	}
	require.False(t, r.room())
	// The unsent packets kept their own buffers throughout.
	inFlight := map[uintptr]bool{}
	for k := r.done; k < r.sealed; k++ {
		inFlight[addr(r.pkts[k%q])] = true
	}
	require.Len(t, inFlight, q, "every packet in flight has a buffer of its own")
}
