package subscriber

import (
	"time"

	"github.com/mdbus/mdbus/wire"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRestartGrace: a publisher restarted under the same session name
// (here from a new source port, after the first run ended) is a new
// incarnation that takes the old one's place at once, but asks for none
// of its gaps during restartGrace: a rewinder answering from its own copy
// of the feed must first see the restart, or it answers with the first
// run's bytes. The gap is asked for when the grace ends; a first
// incarnation asks after the usual delay.
func TestRestartGrace(t *testing.T) {
	h := newHarness(t, Config{Recovery: Recovery{Retransmitter: repairer, NAK: testNAK()}})
	h.feed(srcA, pkt(sessA, 1, 2))
	h.feed(srcA, pkt(sessA, 4, 1)) // first incarnation: gap 3
	found := h.now
	require.Equal(t, []wire.Request{req(sessA, 3, 1)}, h.runUntil(found.Add(time.Millisecond)))
	h.feedRepair(pkt(sessA, 3, 1))
	h.feed(srcA, eos(sessA, 5))

	start := h.now
	h.feed(srcB, pkt(sessA, 1, 2)) // the restarted publisher, from another port
	h.feed(srcB, pkt(sessA, 5, 1)) // gap 3-4
	require.Len(t, h.gaps, 2)
	require.Greater(t, restartGrace, 10*time.Millisecond, "a grace well beyond the usual first NAK (1 ms here)")
	require.Empty(t, h.runUntil(start.Add(restartGrace-time.Millisecond)), "nothing asked during the grace")
	require.Equal(t, []wire.Request{req(sessA, 3, 2)}, h.runUntil(start.Add(restartGrace+time.Millisecond)), "asked when it ends")
	h.feedRepair(pkt(sessA, 3, 2))
	require.Equal(t, seqRange(1, 6), h.seqs(srcB, sessA))
	require.Empty(t, h.losses)
	require.EqualValues(t, 1, h.stats().Incarnations)
}
