package subscriber

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// TestReorderFullGivesUpStalledGap: with a retransmitter, a full reorder
// buffer drops newer packets only while its oldest gap is young; once the
// gap has waited two NAK retry intervals it is given up, so a stalled
// repair cannot make the stream drop everything after it.
func TestReorderFullGivesUpStalledGap(t *testing.T) {
	const bound = 4
	h := newHarness(t, Config{Receive: Receive{ReorderPackets: bound}, Recovery: Recovery{Retransmitter: testRetransmitter}})
	id := StreamID{Source: srcA, Session: sessA, Incarnation: 1}
	h.feed(srcA, pkt(sessA, 1, 1))
	for s := wire.Seq(3); s < 3+bound; s++ {
		h.feed(srcA, pkt(sessA, s, 1))
	}
	h.feed(srcA, pkt(sessA, 7, 1)) // young gap: 7 is dropped (and asked for)
	require.Empty(t, h.losses)
	require.Equal(t, []wire.Seq{1}, h.seqs(srcA, sessA))

	h.now += monotime.Time(2 * nak.DefaultRetry) // the repair of [2,3) is overdue
	h.feed(srcA, pkt(sessA, 8, 1))               // full: [2,3) is given up, 3..6 delivered, 8 held
	require.Equal(t, []Loss{{id, 2, 3}}, h.losses)
	require.Equal(t, append([]wire.Seq{1}, seqRange(3, 7)...), h.seqs(srcA, sessA))
	h.feed(srcA, pkt(sessA, 7, 1)) // the repair of 7 arrives
	require.Equal(t, append([]wire.Seq{1}, seqRange(3, 9)...), h.seqs(srcA, sessA))
	st := h.stats()
	require.EqualValues(t, 1, st.ReorderOverflows)
	require.EqualValues(t, 1, st.LostMessages)
	onlyDrops(t, st, map[DropReason]uint64{DropReorderFull: 1})
}

// TestResync: a stream that fell more than MaxGap behind its publisher
// catches up once a second packet confirms the jump; a lone wild sequence
// costs one dropped packet and nothing else.
func TestResync(t *testing.T) {
	id := StreamID{Source: srcA, Session: sessA, Incarnation: 1}
	t.Run("confirmed", func(t *testing.T) {
		h := newHarness(t, Config{Limits: Limits{MaxGap: 100}, Recovery: Recovery{Retransmitter: testRetransmitter}})
		h.feed(srcA, pkt(sessA, 1, 2))
		h.feed(srcA, pkt(sessA, 500, 1)) // far ahead: dropped, remembered
		h.feed(srcA, pkt(sessA, 3, 1))   // in order: still delivered
		require.Empty(t, h.resyncs)
		h.feed(srcA, pkt(sessA, 501, 2)) // continues 500: resync, and 500 is delivered
		require.Equal(t, []Resync{{id, 4, 500}}, h.resyncs)
		require.Empty(t, h.losses, "a resync is not a loss")
		require.Equal(t, append(seqRange(1, 4), seqRange(500, 503)...), h.seqs(srcA, sessA))
		h.feed(srcA, pkt(sessA, 500, 1)) // a late copy of it
		st := h.stats()
		require.EqualValues(t, 1, st.Resyncs)
		require.EqualValues(t, 2, st.SuspectJumps)
		require.Zero(t, st.LostMessages)
		onlyDrops(t, st, map[DropReason]uint64{DropSeqJump: 2, DropDuplicate: 1})
	})
	t.Run("heartbeats", func(t *testing.T) {
		h := newHarness(t, Config{Limits: Limits{MaxGap: 100}, Recovery: Recovery{Retransmitter: testRetransmitter}})
		h.feed(srcA, pkt(sessA, 1, 1))
		h.feed(srcA, hb(sessA, 1000))
		h.feed(srcA, hb(sessA, 1000))
		require.Empty(t, h.resyncs, "a repeated heartbeat confirms nothing")
		h.feed(srcA, hb(sessA, 1001))
		require.Equal(t, []Resync{{id, 2, 1000}}, h.resyncs)
		require.Equal(t, []Gap{{id, 1000, 1001}}, h.gaps)
		h.feed(srcA, pkt(sessA, 1000, 1))
		require.Equal(t, []wire.Seq{1, 1000}, h.seqs(srcA, sessA))
		require.EqualValues(t, 1, h.stats().Resyncs)
		require.Empty(t, h.losses)
	})
	t.Run("held-then-resync", func(t *testing.T) {
		h := newHarness(t, Config{Limits: Limits{MaxGap: 100}, Recovery: Recovery{Retransmitter: testRetransmitter}})
		h.feed(srcA, pkt(sessA, 1, 1))
		h.feed(srcA, pkt(sessA, 5, 1)) // held: 2..4 missing
		h.feed(srcA, pkt(sessA, 1000, 1))
		h.feed(srcA, pkt(sessA, 1001, 1))
		require.Equal(t, []Loss{{id, 2, 5}}, h.losses, "the gap before what was held is a loss")
		require.Equal(t, []Resync{{id, 6, 1000}}, h.resyncs)
		require.Equal(t, []wire.Seq{1, 5, 1000, 1001}, h.seqs(srcA, sessA))
	})
	t.Run("caught-up-suspect-is-no-jump", func(t *testing.T) {
		// The suspect 150 was kept while next was 2; the stream has
		// caught up to within MaxGap of it when 200 comes: confirming
		// it would move next back from past 155 to 150.
		h := newHarness(t, Config{Limits: Limits{MaxGap: 100}, Recovery: Recovery{Retransmitter: testRetransmitter}})
		h.feed(srcA, pkt(sessA, 1, 1))
		h.feed(srcA, pkt(sessA, 150, 1)) // far ahead of next = 2: kept
		for q := wire.Seq(2); q <= 60; q++ {
			h.feed(srcA, pkt(sessA, q, 1))
		}
		h.feed(srcA, pkt(sessA, 155, 1)) // within reach: held, 61..154 missing
		h.feed(srcA, pkt(sessA, 200, 1)) // 139 beyond next: a new suspect, not a confirmation
		require.Empty(t, h.resyncs)
		require.Empty(t, h.losses)
		h.feed(srcA, pkt(sessA, 201, 1)) // confirms 200: resync past what is held
		for _, r := range h.resyncs {
			require.Less(t, r.From, r.To, "a resync never goes back: %v", r)
		}
		seqs := h.seqs(srcA, sessA)
		require.True(t, slices.IsSorted(seqs), "delivered in order: %v", seqs)
		require.Equal(t, []wire.Seq{155, 200, 201}, seqs[len(seqs)-3:])
	})
	t.Run("repairs-never-jump", func(t *testing.T) {
		h := newHarness(t, Config{Limits: Limits{MaxGap: 100}, Recovery: Recovery{Retransmitter: testRetransmitter}})
		h.feed(srcA, pkt(sessA, 1, 1))
		h.feedRepair(pkt(sessA, 1<<40, 1))
		h.feedRepair(pkt(sessA, 1<<40+1, 1))
		h.feedRepair(hb(sessA, 1<<40+2))
		h.feed(srcA, pkt(sessA, 2, 1))
		require.Empty(t, h.resyncs)
		require.Equal(t, seqRange(1, 3), h.seqs(srcA, sessA))
		onlyDrops(t, h.stats(), map[DropReason]uint64{DropSeqJump: 3})
	})
	t.Run("other-source-never-confirms", func(t *testing.T) {
		// A/B: both feeds reach one stream, so a forger on either could
		// send the first suspect; only the same source confirms it.
		h := newHarness(t, Config{Limits: Limits{MaxGap: 100}, Secondary: netip.MustParseAddrPort("239.7.7.9:31000")})
		h.feed(srcA, pkt(sessA, 1, 1))
		h.feed(srcB, pkt(sessA, 1<<40, 1))
		h.feed(srcA, pkt(sessA, 1<<40+1, 1))
		h.feed(srcB, pkt(sessA, 2, 1))
		require.Empty(t, h.resyncs)
		require.Equal(t, seqRange(1, 3), h.seqs(netip.AddrPort{}, sessA))
	})
	t.Run("lone-wild-sequences", func(t *testing.T) {
		h := newHarness(t, Config{Limits: Limits{MaxGap: 100}, Recovery: Recovery{Retransmitter: testRetransmitter}})
		h.feed(srcA, pkt(sessA, 1, 1))
		for i, wild := range []wire.Seq{1 << 40, 5000, 1 << 50, 4000} { // none agrees with the one before
			h.feed(srcA, pkt(sessA, wild, 1))
			h.feed(srcA, pkt(sessA, wire.Seq(2+i), 1))
		}
		require.Empty(t, h.losses)
		require.Equal(t, seqRange(1, 6), h.seqs(srcA, sessA))
		st := h.stats()
		require.Zero(t, st.Resyncs)
		onlyDrops(t, st, map[DropReason]uint64{DropSeqJump: 4})
	})
}

// TestReorderBytesBound: the reorder buffer is full when its bytes reach
// ReorderBytes, whatever the count; the same overflow rule then applies.
func TestReorderBytesBound(t *testing.T) {
	var size int // of the three packets held
	for s := wire.Seq(3); s < 6; s++ {
		size += len(pkt(sessA, s, 1))
	}
	h := newHarness(t, Config{Receive: Receive{ReorderPackets: 100, ReorderBytes: size}})
	id := StreamID{Source: srcA, Session: sessA, Incarnation: 1}
	h.feed(srcA, pkt(sessA, 1, 1))
	for s := wire.Seq(3); s < 6; s++ {
		h.feed(srcA, pkt(sessA, s, 1))
	}
	require.Equal(t, 3, h.stream(srcA, sessA).Held)
	require.Empty(t, h.losses)
	h.feed(srcA, pkt(sessA, 6, 1)) // a fourth would pass the byte bound: [2,3) is given up
	require.Equal(t, []Loss{{id, 2, 3}}, h.losses)
	require.Equal(t, append([]wire.Seq{1}, seqRange(3, 7)...), h.seqs(srcA, sessA))
	st := h.stats()
	require.EqualValues(t, 1, st.ReorderOverflows)
	require.Zero(t, st.Held)
}
