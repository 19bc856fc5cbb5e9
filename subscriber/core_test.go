package subscriber

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

func TestInOrder(t *testing.T) {
	h := newHarness(t, Config{})
	h.feed(srcA, pkt(sessA, 1, 3))
	h.feed(srcA, pkt(sessA, 4, 1))
	h.feed(srcA, hb(sessA, 5))
	h.feed(srcA, pkt(sessA, 5, 5))
	require.Equal(t, seqRange(1, 10), h.seqs(srcA, sessA))
	require.Empty(t, h.gaps)
	st := h.stats()
	require.EqualValues(t, 4, st.Datagrams)
	require.EqualValues(t, 4, st.Packets)
	require.EqualValues(t, 1, st.Heartbeats)
	require.EqualValues(t, 9, st.Messages)
	var bytes uint64
	for s := wire.Seq(1); s < 10; s++ {
		bytes += uint64(len(payload(s)))
	}
	require.Equal(t, bytes, st.Bytes)
	require.Equal(t, 1, st.Streams)
	onlyDrops(t, st, nil)
	ss := h.stream(srcA, sessA)
	require.Equal(t, wire.Seq(10), ss.Next)
	require.EqualValues(t, 9, ss.Delivered)
	require.Equal(t, bytes, ss.Bytes)
}

func TestDuplicates(t *testing.T) {
	h := newHarness(t, Config{})
	h.feed(srcA, pkt(sessA, 1, 3))
	h.feed(srcA, pkt(sessA, 1, 3)) // whole packet again
	h.feed(srcA, pkt(sessA, 2, 1)) // stale single message
	h.feed(srcA, pkt(sessA, 2, 4)) // overlaps: 2,3 old, 4,5 new
	require.Equal(t, seqRange(1, 6), h.seqs(srcA, sessA))
	st := h.stats()
	require.EqualValues(t, 3+1+2, st.Duplicates)
	require.EqualValues(t, 5, st.Messages)
	onlyDrops(t, st, map[DropReason]uint64{DropDuplicate: 2})
	require.EqualValues(t, 6, h.stream(srcA, sessA).Duplicates)
}

func TestReorderWithinBound(t *testing.T) {
	h := newHarness(t, Config{})
	h.feed(srcA, pkt(sessA, 1, 1))
	h.feed(srcA, pkt(sessA, 5, 2)) // gap [2,5)
	h.feed(srcA, pkt(sessA, 4, 1))
	h.feed(srcA, pkt(sessA, 4, 1)) // duplicate of a held packet
	h.feed(srcA, pkt(sessA, 3, 1))
	require.Equal(t, seqRange(1, 2), h.seqs(srcA, sessA))
	ss := h.stream(srcA, sessA)
	require.Equal(t, 3, ss.Held)
	h.feed(srcA, pkt(sessA, 2, 1))
	require.Equal(t, seqRange(1, 7), h.seqs(srcA, sessA))
	require.Equal(t, []Gap{{StreamID{Source: srcA, Session: sessA, Incarnation: 1}, 2, 5}}, h.gaps)
	st := h.stats()
	require.Zero(t, st.Held)
	require.Equal(t, 3, st.HeldMax)
	require.EqualValues(t, 3, st.Reordered)
	require.EqualValues(t, 1, st.Duplicates)
	onlyDrops(t, st, map[DropReason]uint64{DropDuplicate: 1})
	require.Len(t, h.c.free, 3, "slot buffers returned")
}

func TestReorderOverlappingHeld(t *testing.T) {
	// A repair may be packetised differently from the original: held
	// packets can overlap, and delivery skips what is already out.
	h := newHarness(t, Config{})
	h.feed(srcA, pkt(sessA, 1, 1))
	h.feed(srcA, pkt(sessA, 3, 3)) // 3..5
	h.feed(srcA, pkt(sessA, 4, 4)) // 4..7, overlaps
	h.feed(srcA, pkt(sessA, 4, 2)) // 4..5, covered by 3..5
	h.feed(srcA, pkt(sessA, 2, 1))
	require.Equal(t, seqRange(1, 8), h.seqs(srcA, sessA))
	require.Equal(t, []Gap{{StreamID{Source: srcA, Session: sessA, Incarnation: 1}, 2, 3}}, h.gaps)
	st := h.stats()
	require.EqualValues(t, 2+2, st.Duplicates) // 4,5 of 4..7 on drain; 4..5 covered
	onlyDrops(t, st, map[DropReason]uint64{DropDuplicate: 1})
}

func TestReorderBufferFull(t *testing.T) {
	const bound = 4
	// With a retransmitter the gap is kept and the newest packet dropped:
	// it can still be repaired.
	h := newHarness(t, Config{Receive: Receive{ReorderPackets: bound}, Recovery: Recovery{Retransmitter: testRetransmitter}})
	h.feed(srcA, pkt(sessA, 1, 1))
	for s := wire.Seq(3); s < 3+bound; s++ {
		h.feed(srcA, pkt(sessA, s, 1))
	}
	require.Equal(t, bound, h.stream(srcA, sessA).Held)
	h.feed(srcA, pkt(sessA, 10, 2)) // full: dropped, [7,12) missing
	h.feed(srcA, pkt(sessA, 8, 1))  // full, inside a reported gap: no new gap
	require.Equal(t, bound, h.stream(srcA, sessA).Held)
	id := StreamID{Source: srcA, Session: sessA, Incarnation: 1}
	require.Equal(t, []Gap{{id, 2, 3}, {id, 7, 12}}, h.gaps)
	h.feed(srcA, pkt(sessA, 2, 1))
	require.Equal(t, seqRange(1, 7), h.seqs(srcA, sessA))
	for s := wire.Seq(7); s < 12; s++ { // the repairs
		h.feed(srcA, pkt(sessA, s, 1))
	}
	require.Equal(t, seqRange(1, 12), h.seqs(srcA, sessA))
	st := h.stats()
	require.Equal(t, bound, st.HeldMax)
	require.EqualValues(t, 2, st.Gaps)
	require.EqualValues(t, 1+5, st.GapMessages)
	onlyDrops(t, st, map[DropReason]uint64{DropReorderFull: 2})
}

var testRetransmitter = netip.MustParseAddrPort("127.0.0.1:9")

// TestReorderOverflowWithoutRecovery: with nothing that could repair a gap,
// a full reorder buffer gives up its oldest gap (a Loss) instead of
// dropping the newer packet, which would only make a gap of its own.
func TestReorderOverflowWithoutRecovery(t *testing.T) {
	const bound = 4
	h := newHarness(t, Config{Receive: Receive{ReorderPackets: bound}})
	h.feed(srcA, pkt(sessA, 1, 1))
	for s := wire.Seq(3); s < 3+bound; s++ {
		h.feed(srcA, pkt(sessA, s, 1))
	}
	require.Equal(t, bound, h.stream(srcA, sessA).Held)
	h.feed(srcA, pkt(sessA, 7, 2)) // full: [2,3) is given up, everything else delivered
	require.Equal(t, append([]wire.Seq{1}, seqRange(3, 9)...), h.seqs(srcA, sessA))
	id := StreamID{Source: srcA, Session: sessA, Incarnation: 1}
	require.Equal(t, []Loss{{id, 2, 3}}, h.losses)
	st := h.stats()
	require.EqualValues(t, 1, st.ReorderOverflows)
	require.EqualValues(t, 1, st.LostMessages)
	require.Zero(t, h.stream(srcA, sessA).Held)
	onlyDrops(t, st, nil)
}

func TestNoReorderBuffer(t *testing.T) {
	h := newHarness(t, Config{Receive: Receive{ReorderPackets: -1}})
	h.feed(srcA, pkt(sessA, 1, 1))
	h.feed(srcA, pkt(sessA, 3, 1))
	h.feed(srcA, pkt(sessA, 2, 1))
	require.Equal(t, seqRange(1, 3), h.seqs(srcA, sessA))
	require.Equal(t, []Gap{{StreamID{Source: srcA, Session: sessA, Incarnation: 1}, 2, 4}}, h.gaps)
	onlyDrops(t, h.stats(), map[DropReason]uint64{DropReorderFull: 1})
}

func TestGapRanges(t *testing.T) {
	type arrival struct {
		seq wire.Seq
		n   int // 0: heartbeat
	}
	for _, tc := range []struct {
		name     string
		arrivals []arrival
		gaps     [][2]wire.Seq
		next     wire.Seq
	}{
		{"one-missing", []arrival{{1, 1}, {3, 1}}, [][2]wire.Seq{{2, 3}}, 2},
		{"two-holes", []arrival{{1, 2}, {5, 1}, {9, 3}}, [][2]wire.Seq{{3, 5}, {6, 9}}, 3},
		{"fill-does-not-repeat", []arrival{{1, 1}, {6, 1}, {3, 1}, {8, 1}}, [][2]wire.Seq{{2, 6}, {7, 8}}, 2},
		{"filled-in-order", []arrival{{1, 1}, {4, 1}, {2, 2}, {5, 1}}, [][2]wire.Seq{{2, 4}}, 6},
		{"heartbeat-tail", []arrival{{1, 3}, {7, 0}, {7, 0}, {5, 0}}, [][2]wire.Seq{{4, 7}}, 4},
		{"heartbeat-then-packet", []arrival{{1, 1}, {5, 0}, {8, 1}}, [][2]wire.Seq{{2, 5}, {5, 8}}, 2},
		{"heartbeat-behind", []arrival{{1, 5}, {3, 0}, {6, 0}}, nil, 6},
		{"packet-inside-heartbeat-gap", []arrival{{1, 1}, {10, 0}, {5, 2}}, [][2]wire.Seq{{2, 10}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			for _, a := range tc.arrivals {
				if a.n == 0 {
					h.feed(srcA, hb(sessA, a.seq))
				} else {
					h.feed(srcA, pkt(sessA, a.seq, a.n))
				}
			}
			var want []Gap
			var msgs uint64
			for _, g := range tc.gaps {
				want = append(want, Gap{StreamID{Source: srcA, Session: sessA, Incarnation: 1}, g[0], g[1]})
				msgs += uint64(g[1] - g[0])
			}
			require.Equal(t, want, h.gaps)
			ss := h.stream(srcA, sessA)
			require.Equal(t, tc.next, ss.Next)
			require.EqualValues(t, len(want), ss.Gaps)
			require.Equal(t, msgs, ss.GapMessages)
		})
	}
}

func TestStartSeq(t *testing.T) {
	t.Run("later-first-packet-is-a-gap", func(t *testing.T) {
		h := newHarness(t, Config{StartSeq: 1})
		h.feed(srcA, pkt(sessA, 4, 2))
		require.Empty(t, h.msgs)
		require.Equal(t, []Gap{{StreamID{Source: srcA, Session: sessA, Incarnation: 1}, 1, 4}}, h.gaps)
		h.feed(srcA, pkt(sessA, 1, 3))
		require.Equal(t, seqRange(1, 6), h.seqs(srcA, sessA))
	})
	t.Run("earlier-is-stale", func(t *testing.T) {
		h := newHarness(t, Config{StartSeq: 10})
		h.feed(srcA, pkt(sessA, 5, 3))
		h.feed(srcA, pkt(sessA, 8, 4)) // 8,9 stale; 10,11 delivered
		require.Equal(t, seqRange(10, 12), h.seqs(srcA, sessA))
		require.EqualValues(t, 5, h.stats().Duplicates)
	})
	t.Run("first-packet-too-far", func(t *testing.T) {
		h := newHarness(t, Config{StartSeq: 1, Limits: Limits{MaxGap: 100}})
		h.feed(srcA, pkt(sessA, 200, 1))
		st := h.stats()
		require.Zero(t, st.Streams)
		onlyDrops(t, st, map[DropReason]uint64{DropSeqJump: 1})
	})
	t.Run("join-live-heartbeat", func(t *testing.T) {
		h := newHarness(t, Config{})
		h.feed(srcA, hb(sessA, 50))
		h.feed(srcA, pkt(sessA, 50, 2))
		require.Equal(t, seqRange(50, 52), h.seqs(srcA, sessA))
		require.Empty(t, h.gaps)
	})
}

func TestEndOfSession(t *testing.T) {
	id := StreamID{Source: srcA, Session: sessA, Incarnation: 1}
	t.Run("after-everything", func(t *testing.T) {
		h := newHarness(t, Config{})
		h.feed(srcA, pkt(sessA, 1, 3))
		h.feed(srcA, eos(sessA, 4))
		require.Equal(t, []ended{{id, 4}}, h.ends)
		h.feed(srcA, eos(sessA, 4)) // publishers repeat it
		h.feed(srcA, hb(sessA, 4))
		h.feed(srcA, pkt(sessA, 2, 1))
		h.feed(srcA, pkt(sessA, 4, 1))
		h.feed(srcA, hb(sessA, 9))
		h.feed(srcA, eos(sessA, 5))
		require.Len(t, h.ends, 1)
		require.Equal(t, seqRange(1, 4), h.seqs(srcA, sessA))
		st := h.stats()
		require.EqualValues(t, 1, st.StreamsEnded)
		onlyDrops(t, st, map[DropReason]uint64{DropDuplicate: 1, DropAfterEnd: 2, DropBadEndOfSession: 1})
		require.True(t, h.stream(srcA, sessA).Ended)
	})
	t.Run("waits-for-missing", func(t *testing.T) {
		h := newHarness(t, Config{})
		h.feed(srcA, pkt(sessA, 1, 1))
		h.feed(srcA, pkt(sessA, 3, 1))
		h.feed(srcA, eos(sessA, 6))
		require.Empty(t, h.ends)
		require.Equal(t, []Gap{{id, 2, 3}, {id, 4, 6}}, h.gaps)
		h.feed(srcA, pkt(sessA, 4, 2))
		require.Empty(t, h.ends)
		h.feed(srcA, pkt(sessA, 2, 1))
		require.Equal(t, []ended{{id, 6}}, h.ends)
		require.Equal(t, seqRange(1, 6), h.seqs(srcA, sessA))
		require.Zero(t, h.stats().Held)
	})
	t.Run("held-beyond-end-dropped", func(t *testing.T) {
		h := newHarness(t, Config{})
		h.feed(srcA, pkt(sessA, 1, 1))
		h.feed(srcA, pkt(sessA, 3, 1))
		h.feed(srcA, pkt(sessA, 6, 1))
		h.feed(srcA, eos(sessA, 4))
		require.Equal(t, 1, h.stream(srcA, sessA).Held)
		h.feed(srcA, pkt(sessA, 2, 1))
		require.Equal(t, []ended{{id, 4}}, h.ends)
		onlyDrops(t, h.stats(), map[DropReason]uint64{DropAfterEnd: 1})
		require.Zero(t, h.stats().Held)
	})
	t.Run("below-delivered", func(t *testing.T) {
		h := newHarness(t, Config{})
		h.feed(srcA, pkt(sessA, 1, 5))
		h.feed(srcA, eos(sessA, 3))
		require.Empty(t, h.ends)
		onlyDrops(t, h.stats(), map[DropReason]uint64{DropBadEndOfSession: 1})
	})
	t.Run("join-live-on-end", func(t *testing.T) {
		h := newHarness(t, Config{})
		h.feed(srcA, eos(sessA, 9))
		require.Equal(t, []ended{{id, 9}}, h.ends)
		require.Empty(t, h.msgs)
	})
}

func TestSeveralPublishers(t *testing.T) {
	h := newHarness(t, Config{})
	h.feed(srcA, pkt(sessA, 1, 2))
	h.feed(srcB, pkt(sessA, 100, 1)) // same session name, other source
	h.feed(srcA, pkt(sessA, 4, 1))   // gap on A only
	h.feed(srcB, pkt(sessA, 101, 1))
	h.feed(srcA, pkt(sessA, 3, 1))
	require.Equal(t, seqRange(1, 5), h.seqs(srcA, sessA))
	require.Equal(t, seqRange(100, 102), h.seqs(srcB, sessA))
	require.Equal(t, []Gap{{StreamID{Source: srcA, Session: sessA, Incarnation: 1}, 3, 4}}, h.gaps)
	st := h.stats()
	require.Equal(t, 2, st.Streams)
	require.Zero(t, st.SessionChanges)
}

func TestSessionChange(t *testing.T) {
	h := newHarness(t, Config{})
	h.feed(srcA, pkt(sessA, 1, 2))
	h.feed(srcA, pkt(sessB, 1, 3)) // restart: new session, same source
	h.feed(srcA, pkt(sessA, 3, 1)) // a late packet of the old session
	require.Equal(t, seqRange(1, 4), h.seqs(srcA, sessA))
	require.Equal(t, seqRange(1, 4), h.seqs(srcA, sessB))
	st := h.stats()
	require.EqualValues(t, 1, st.SessionChanges)
	require.Equal(t, 2, st.Streams)
	require.True(t, h.stream(srcA, sessA).Superseded)
	require.False(t, h.stream(srcA, sessB).Superseded)
}

func TestMaxStreams(t *testing.T) {
	h := newHarness(t, Config{Limits: Limits{MaxStreams: 2}})
	srcC := netip.MustParseAddrPort("127.0.0.3:40003")
	h.feed(srcA, pkt(sessA, 1, 1))
	h.feed(srcB, pkt(sessA, 1, 1))
	h.feed(srcC, pkt(sessA, 1, 1)) // no room, nothing evictable
	onlyDrops(t, h.stats(), map[DropReason]uint64{DropTooManyStreams: 1})
	h.feed(srcA, eos(sessA, 2))    // A ends: evictable
	h.feed(srcC, pkt(sessA, 1, 1)) // evicts A
	st := h.stats()
	require.Equal(t, 2, st.Streams)
	require.EqualValues(t, 1, st.StreamsEvicted)
	require.Equal(t, []wire.Seq{1}, h.seqs(srcC, sessA))
	// A new session of B finds no room either: live streams are never
	// evicted, and B's old stream is superseded only once the new one
	// exists.
	h.feed(srcB, pkt(sessB, 1, 1))
	onlyDrops(t, h.stats(), map[DropReason]uint64{DropTooManyStreams: 2})
	require.False(t, h.stream(srcB, sessA).Superseded)
}

func TestEvictSuperseded(t *testing.T) {
	h := newHarness(t, Config{Limits: Limits{MaxStreams: 2}})
	h.feed(srcA, pkt(sessA, 1, 1))
	h.feed(srcA, pkt(sessB, 1, 1)) // supersedes A/sessA
	h.feed(srcB, pkt(sessA, 1, 1)) // evicts A/sessA
	st := h.stats()
	require.Equal(t, 2, st.Streams)
	require.EqualValues(t, 1, st.StreamsEvicted)
	require.EqualValues(t, 1, st.SessionChanges)
	onlyDrops(t, st, nil)
	h.feed(srcA, pkt(sessA, 2, 1)) // the old session again: a new stream, no room
	onlyDrops(t, h.stats(), map[DropReason]uint64{DropTooManyStreams: 1})
}

func TestRepair(t *testing.T) {
	h := newHarness(t, Config{})
	h.feed(srcA, pkt(sessA, 1, 1))
	h.feed(srcA, pkt(sessA, 4, 1))
	h.r.repair = true // as a unicast repair reader would
	h.r.group = netip.Addr{}
	h.feedMsg(sock.Message{Buf: pkt(sessA, 2, 2), Addr: repairer, Dst: srcA.Addr()})
	h.feedMsg(sock.Message{Buf: pkt(sessB, 1, 1), Addr: repairer})
	require.Equal(t, seqRange(1, 5), h.seqs(srcA, sessA))
	st := h.stats()
	require.Equal(t, 1, st.Streams)
	onlyDrops(t, st, map[DropReason]uint64{DropUnknownRepair: 1})
}

// TestBadInput feeds each kind of bad datagram to a live stream: it is
// counted under its reason and the stream carries on.
func TestBadInput(t *testing.T) {
	twoMsgs := pkt(sessA, 2, 2)
	oneMsgCount2 := append(raw(sessA, 2, 2), pkt(sessA, 2, 1)[wire.HeaderLen:]...)
	badSession := pkt(sessA, 2, 1)
	badSession[3] = 0x01
	garbage := make([]byte, 300)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range garbage {
		garbage[i] = byte(rng.Uint32())
	}
	garbage[0] = 0x80 // not printable: a session never starts so

	for _, tc := range []struct {
		name   string
		msg    sock.Message
		reason DropReason
		cfg    Config
	}{
		{"empty", sock.Message{Buf: nil}, DropShortHeader, Config{}},
		{"short-header", sock.Message{Buf: pkt(sessA, 2, 1)[:19]}, DropShortHeader, Config{}},
		{"truncated-message", sock.Message{Buf: twoMsgs[:len(twoMsgs)-1]}, DropTruncated, Config{}},
		{"count-above-bytes", sock.Message{Buf: oneMsgCount2}, DropTruncated, Config{}},
		{"count-below-bytes", sock.Message{Buf: append(raw(sessA, 2, 1), twoMsgs[wire.HeaderLen:]...)}, DropTrailingBytes, Config{}},
		{"length-past-datagram", sock.Message{Buf: raw(sessA, 2, 1, 0xFF, 0xFF, 1, 2, 3)}, DropTruncated, Config{}},
		{"count-ffff-with-messages", sock.Message{Buf: append(raw(sessA, 2, 0xFFFF), twoMsgs[wire.HeaderLen:]...)}, DropEndOfSessionData, Config{}},
		{"heartbeat-with-data", sock.Message{Buf: raw(sessA, 2, 0, 0, 1, 'x')}, DropHeartbeatData, Config{}},
		{"zero-seq", sock.Message{Buf: pkt(sessA, 0, 1)}, DropZeroSeq, Config{}},
		{"zero-seq-heartbeat", sock.Message{Buf: hb(sessA, 0)}, DropZeroSeq, Config{}},
		{"zero-seq-end", sock.Message{Buf: eos(sessA, 0)}, DropZeroSeq, Config{}},
		{"seq-overflow", sock.Message{Buf: pkt(sessA, math.MaxUint64, 2)}, DropSeqOverflow, Config{}},
		{"bad-session", sock.Message{Buf: badSession}, DropBadSession, Config{}},
		{"garbage", sock.Message{Buf: garbage, Addr: netip.MustParseAddrPort("10.9.9.9:1")}, DropBadSession, Config{}},
		{"seq-jump-2^40", sock.Message{Buf: pkt(sessA, 2+1<<40, 1)}, DropSeqJump, Config{}},
		{"heartbeat-jump-2^40", sock.Message{Buf: hb(sessA, 2+1<<40)}, DropSeqJump, Config{}},
		{"end-jump-2^40", sock.Message{Buf: eos(sessA, 2+1<<40)}, DropSeqJump, Config{}},
		{"seq-jump-max-gap", sock.Message{Buf: pkt(sessA, 2+11, 1)}, DropSeqJump, Config{Limits: Limits{MaxGap: 10}}},
		{"truncated-datagram", sock.Message{Buf: pkt(sessA, 2, 1), Truncated: true}, DropTruncatedDatagram, Config{}},
		{"wrong-group", sock.Message{Buf: pkt(sessA, 2, 1), Dst: netip.MustParseAddr("239.7.7.8")}, DropWrongGroup, Config{}},
		{"unicast-to-port", sock.Message{Buf: pkt(sessA, 2, 1), Dst: netip.MustParseAddr("127.0.0.1")}, DropWrongGroup, Config{}},
		{"wrong-source", sock.Message{Buf: pkt(sessA, 2, 1), Addr: srcB}, DropWrongSource, Config{Source: srcA.Addr()}},
		{"too-many-streams-new-source", sock.Message{Buf: pkt(sessA, 2, 1), Addr: srcB}, DropTooManyStreams, Config{Limits: Limits{MaxStreams: 1}}},
		{"too-many-streams-session-change", sock.Message{Buf: pkt(sessB, 2, 1)}, DropTooManyStreams, Config{Limits: Limits{MaxStreams: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.cfg)
			h.feed(srcA, pkt(sessA, 1, 1))
			m := tc.msg
			if !m.Addr.IsValid() {
				m.Addr = srcA
			}
			if !m.Dst.IsValid() {
				m.Dst = testGroup.Addr()
			}
			h.feedMsg(m)
			st := h.stats()
			onlyDrops(t, st, map[DropReason]uint64{tc.reason: 1})
			require.Equal(t, seqRange(1, 2), h.seqs(srcA, sessA))
			require.Empty(t, h.gaps)
			require.Zero(t, st.Held)
			h.feed(srcA, pkt(sessA, 2, 2))
			require.Equal(t, seqRange(1, 4), h.seqs(srcA, sessA), "the stream carries on")
			require.Equal(t, 1, h.stats().Streams)
		})
	}
}

func TestDstUnknownAccepted(t *testing.T) {
	h := newHarness(t, Config{})
	h.feedMsg(sock.Message{Buf: pkt(sessA, 1, 1), Addr: srcA}) // no PKTINFO
	require.Equal(t, seqRange(1, 2), h.seqs(srcA, sessA))
}

func TestKernelDrops(t *testing.T) {
	h := newHarness(t, Config{})
	for _, tc := range []struct {
		ovfl uint32
		want uint64
	}{{0, 0}, {5, 5}, {5, 5}, {math.MaxUint32, math.MaxUint32}, {3, math.MaxUint32 + 4}} {
		h.r.batch.Drops = tc.ovfl
		h.feed(srcA, hb(sessA, 1))
		require.Equal(t, tc.want, h.stats().KernelDrops)
	}
}

func TestDropReasonString(t *testing.T) {
	seen := map[string]bool{}
	for r := range NumDropReasons {
		s := r.String()
		require.NotEmpty(t, s, "reason %d", r)
		require.NotEqual(t, "unknown", s)
		require.False(t, seen[s], "duplicate name %q", s)
		seen[s] = true
	}
	require.Equal(t, "unknown", NumDropReasons.String())
	require.Zero(t, Stats{}.Drop(NumDropReasons))
}

// TestRandomized sends several streams through a network that reorders
// within a window, duplicates and loses packets, with a NAK-like repairer
// that resends what each reported gap names a little later. Whatever the
// order, each stream is delivered once, in order, in full; gaps never
// overlap and never name a delivered sequence; the reorder buffer never
// passes its bound.
func TestRandomized(t *testing.T) {
	type sent struct {
		src  netip.AddrPort
		sess wire.Session
		seq  wire.Seq
		n    int // 0: end of session
	}
	// Distinct sessions: repairs name the session alone, so two live
	// streams of one session cannot both be repaired (see TestSameSessionTwoSources).
	ids := []StreamID{{Source: srcA, Session: sessA, Incarnation: 1}, {Source: srcB, Session: mustSession("SESSC"), Incarnation: 1}, {Source: srcB, Session: sessB, Incarnation: 1}}
	for seed := range uint64(20) {
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			bound := 1 + rng.IntN(32)
			h := newHarness(t, Config{Receive: Receive{ReorderPackets: bound}, Recovery: Recovery{Retransmitter: testRetransmitter}})
			var all []sent
			for _, id := range ids {
				seq := wire.Seq(1)
				for range 300 {
					n := 1 + rng.IntN(5)
					all = append(all, sent{id.Source, id.Session, seq, n})
					seq += wire.Seq(n)
				}
				all = append(all, sent{id.Source, id.Session, seq, 0})
			}
			send := func(p sent) {
				if p.n == 0 {
					h.feed(p.src, eos(p.sess, p.seq))
				} else {
					h.feed(p.src, pkt(p.sess, p.seq, p.n))
				}
				require.LessOrEqual(t, h.stats().HeldMax, bound)
			}
			overlaps := func(p sent, g Gap) bool {
				return g.Stream == (StreamID{Source: p.src, Session: p.sess, Incarnation: 1}) && g.From < p.seq+wire.Seq(max(p.n, 1)) && p.seq < g.To
			}

			// Each stream's first packet first (join live), then the
			// rest moved up to bound places.
			first := []sent{all[0], all[301], all[602]}
			rest := slices.DeleteFunc(slices.Clone(all), func(p sent) bool { return slices.Contains(first, p) })
			keys := make(map[sent]int, len(rest))
			for i, p := range rest {
				keys[p] = i + rng.IntN(bound+1)
			}
			slices.SortStableFunc(rest, func(a, b sent) int { return keys[a] - keys[b] })
			for _, p := range first {
				send(p)
			}

			// One packet in 20 is lost, one in 20 duplicated. Repairs for
			// each new gap arrive 1 to bound+1 steps later.
			type due struct {
				at int
				p  sent
			}
			var pending []due
			seenGaps := 0
			step := 0
			deliver := func(p sent) {
				send(p)
				step++
				for ; seenGaps < len(h.gaps); seenGaps++ {
					for _, q := range all {
						if overlaps(q, h.gaps[seenGaps]) {
							pending = append(pending, due{step + 1 + rng.IntN(bound+1), q})
						}
					}
				}
				slices.SortStableFunc(pending, func(a, b due) int { return a.at - b.at })
			}
			flush := func(upTo int) {
				for len(pending) > 0 && pending[0].at <= upTo {
					d := pending[0]
					pending = pending[1:]
					deliver(d.p)
				}
			}
			for _, p := range rest {
				flush(step)
				switch r := rng.IntN(20); r {
				case 0:
					continue
				case 1:
					deliver(p)
				}
				deliver(p)
			}
			for i := 0; len(pending) > 0 && i < 100000; i++ {
				flush(pending[0].at)
			}
			// Tail losses (a lost end of session) and repairs that found
			// the reorder buffer full are only found by a retry: resend
			// every packet of an unfinished stream once more, in order.
			for _, p := range all {
				for _, ss := range h.c.streamStats() {
					if ss.ID == (StreamID{Source: p.src, Session: p.sess, Incarnation: 1}) && !ss.Ended && p.seq+wire.Seq(p.n) >= ss.Next {
						send(p)
					}
				}
			}

			for _, id := range ids {
				ss := h.stream(id.Source, id.Session)
				require.True(t, ss.Ended, "%v ended", id)
				require.Equal(t, seqRange(1, ss.Next), h.seqs(id.Source, id.Session))
				var last wire.Seq
				for _, g := range h.gaps {
					if g.Stream == id {
						require.Less(t, g.From, g.To)
						require.GreaterOrEqual(t, g.From, last, "gaps ascend without overlap")
						last = g.To
					}
				}
			}
			require.Len(t, h.ends, 3)
			st := h.stats()
			require.Zero(t, st.Held)
			t.Logf("bound %d: %d datagrams, %d reordered, %d gaps, %d duplicates, %d reorder-full",
				bound, st.Datagrams, st.Reordered, st.Gaps, st.Duplicates, st.Drops[DropReorderFull])
		})
	}
}

// TestForgottenSessionReturnsAsNewIncarnation: a session whose stream was
// forgotten (superseded by its source's next session, then evicted for
// room) and that comes back gets a new incarnation, so its messages are
// never delivered again under the StreamID that delivered them (found by
// FuzzCore).
func TestForgottenSessionReturnsAsNewIncarnation(t *testing.T) {
	h := newHarness(t, Config{Limits: Limits{MaxStreams: 3}})
	h.feed(srcA, pkt(sessA, 1, 3))
	for _, s := range []string{"SESSX", "SESSY", "SESSZ"} {
		h.feed(srcA, pkt(mustSession(s), 1, 1)) // the fourth evicts SESSA
	}
	h.feed(srcA, pkt(sessA, 3, 2))
	var got []delivered
	for _, m := range h.msgs {
		if m.id.Session == sessA {
			got = append(got, m)
		}
	}
	first := StreamID{Source: srcA, Session: sessA, Incarnation: 1}
	second := first
	second.Incarnation = 2
	require.Equal(t, []delivered{{first, 1}, {first, 2}, {first, 3}, {second, 3}, {second, 4}}, got)
}

// TestIncarnationMemoryKeepsTheLastForgotten: a sender cycling through
// sessions leaves at most incarnationMemory forgotten sessions' numbers
// behind; the session forgotten last still comes back as a new
// incarnation, the one forgotten longest ago starts over at 1.
func TestIncarnationMemoryKeepsTheLastForgotten(t *testing.T) {
	const maxStreams = 2
	h := newHarness(t, Config{Limits: Limits{MaxStreams: maxStreams}})
	limit := incarnationMemory(maxStreams)
	n := limit + 100
	name := func(i int) wire.Session { return mustSession(fmt.Sprintf("S%09d", i)) }
	for i := range n {
		// Each session supersedes the one before, and evicts the one
		// before that.
		h.feed(srcA, pkt(name(i), 1, 1))
		require.LessOrEqual(t, len(h.c.incarnations), limit+maxStreams)
		require.LessOrEqual(t, len(h.c.forgotten), 2*limit+1)
	}
	require.EqualValues(t, n-maxStreams, h.c.st.StreamsEvicted)
	require.Equal(t, limit+maxStreams, len(h.c.incarnations))
	h.feed(srcA, pkt(name(n-3), 2, 1)) // forgotten last
	h.feed(srcA, pkt(name(0), 2, 1))   // forgotten first: its number is gone
	last := h.msgs[len(h.msgs)-2:]
	require.Equal(t, StreamID{Source: srcA, Session: name(n - 3), Incarnation: 2}, last[0].id)
	require.Equal(t, StreamID{Source: srcA, Session: name(0), Incarnation: 1}, last[1].id)
}
