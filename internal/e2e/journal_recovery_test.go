package e2e

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/internal/synth"
	"github.com/mdbus/mdbus/internal/verify"
	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/recorder"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// Acceptance: a subscriber that misses a range older than the
// rewinder's in-memory cache recovers it from the rewinder's journal,
// through the ordinary re-request path.
func TestAcceptanceJournalRecoveryDepth(t *testing.T) {
	netlab.Require(t)
	n := scale(50_000, 20_000)
	const cacheMsgs = 1000
	feed := netip.MustParseAddrPort("239.192.27.1:32080")
	j, err := journal.Open(t.TempDir(), journal.Config{})
	require.NoError(t, err)
	defer j.Close()
	rw, err := recorder.NewRewinder(recorder.RewinderConfig{
		Feed:    feed,
		Journal: j,
		Cache:   retransmit.CacheConfig{MaxMessages: cacheMsgs},
		Server:  retransmit.ServerConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"), RequesterRateBytes: 1e9, RateBytes: 1e9},
	})
	require.NoError(t, err)
	defer rw.Close()
	pub, err := publisher.New(publisher.Config{Group: feed, Session: "DEPTH", RateMessages: 100_000,
		HeartbeatInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	defer pub.Close()
	gen := synth.New(5)
	want := verify.NewHash()
	var buf []byte
	for range n {
		buf = gen.Next(buf[:0])
		want.Add(buf)
		_, err := pub.Publish(buf)
		require.NoError(t, err)
	}
	session, _ := wire.ParseSession("DEPTH")
	waitFor(t, 10*time.Second, func() bool {
		_, next, ok := j.Bounds(session)
		return ok && next == wire.Seq(n+1)
	})
	first, _, _ := rw.Cache().Bounds(session)
	require.Greater(t, first, wire.Seq(n-2*cacheMsgs), "the cache holds only the newest messages")

	// A subscriber that joins now, from sequence 1, misses everything
	// before the next packet: all of it but the newest is older than the
	// cache.
	c := newChecker("late", -1)
	sub, err := subscriber.New(subscriber.Config{Group: feed, StartSeq: 1, Recovery: subscriber.Recovery{Retransmitter: rw.Addr()}, OnMessage: c.onMessage})
	require.NoError(t, err)
	defer sub.Close()
	_, err = pub.Publish([]byte("last"))
	require.NoError(t, err)
	want.Add([]byte("last"))
	waitFor(t, 30*time.Second, func() bool { return c.Delivered() >= n+1 })
	c.verify(t, session, want.Sum(), n+1, 1)
	st, ss := sub.Stats(), rw.ServerStats()
	t.Logf("late subscriber: %d messages, %d NAKs, recovered %d (cache held [%d, %d]); rewinder answered %d requests, %d packets",
		c.Delivered(), st.NAKs, st.Recovered, first, n, ss.Answered, ss.UnicastPackets)
	require.GreaterOrEqual(t, st.Recovered, uint64(n-cacheMsgs), "the range older than the cache came from the journal")
	require.Zero(t, st.LostMessages)
}

// stall wraps a feed socket so that its reader stops every every-th
// batch while pub sends packets more packets: the kernel's small receive
// buffer then overflows.
type stall struct {
	sock.PacketConn
	n            atomic.Int64
	every        int64
	packets      uint64
	pub          atomic.Pointer[publisher.Publication]
	stalls, left atomic.Int64
}

func (s *stall) ReadBatch(b *sock.Batch) (int, error) {
	if s.n.Add(1)%s.every == 0 && s.left.Load() > 0 {
		if p := s.pub.Load(); p != nil {
			s.left.Add(-1)
			s.stalls.Add(1)
			// The bound only ends a stall the publisher's end cut short.
			sent := p.Stats().Packets
			poll(2*time.Second, func() bool { return p.Stats().Packets >= sent+s.packets })
		}
	}
	return s.PacketConn.ReadBatch(b)
}

// Acceptance: a recorder whose reader stalls behind a small
// receive buffer suffers kernel drops, asks its upstream retransmitter for
// what it missed, and ends with a hole-free journal byte-identical to what
// was sent.
func TestAcceptanceRecorderKernelDrops(t *testing.T) {
	netlab.Require(t)
	n := scale(200_000, 40_000)
	feed := netip.MustParseAddrPort("239.192.27.2:32081")
	cache := retransmit.NewCache(retransmit.CacheConfig{MaxMessages: 1 << 20})
	srv, err := retransmit.NewServer(retransmit.ServerConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"),
		Sources: []retransmit.Source{cache}, RequesterRateBytes: 1e9, RateBytes: 1e9})
	require.NoError(t, err)
	defer srv.Close()
	j, err := journal.Open(t.TempDir(), journal.Config{})
	require.NoError(t, err)
	defer j.Close()
	st := &stall{every: 50, packets: 300} // 300 packets: some 400 KiB against a buffer of 64 KiB
	st.left.Store(5)
	rec, err := recorder.NewRecorder(recorder.Config{
		Feed: feed, Upstream: srv.Addr(), Journal: j, StartSeq: 1,
		ReadBuffer: 64 << 10,
		Wrap:       func(c sock.PacketConn) sock.PacketConn { st.PacketConn = c; return st },
	})
	require.NoError(t, err)
	defer rec.Close()
	pub, err := publisher.New(publisher.Config{Group: feed, Session: "DROPS", Sinks: []publisher.Sink{cache},
		RateMessages: 100_000, HeartbeatInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	st.pub.Store(pub)
	gen := synth.New(6)
	var sent [][]byte
	var buf []byte
	for range n {
		buf = gen.Next(buf[:0])
		sent = append(sent, bytes.Clone(buf))
		_, err := pub.Publish(buf)
		require.NoError(t, err)
	}
	// The publisher's heartbeats reveal a lost tail; only then end the
	// session (its end is sent once: were it dropped too, nothing would
	// tell the recorder of the messages before it).
	session, _ := wire.ParseSession("DROPS")
	waitFor(t, 30*time.Second, func() bool {
		_, next, ok := j.Bounds(session)
		return ok && next == wire.Seq(n+1)
	})
	require.NoError(t, pub.Close()) // end of session
	waitFor(t, 10*time.Second, func() bool {
		ts, _ := rec.Stats()
		return ts.Ended == 1
	})
	fs := rec.FeedStats()
	ts, jerr := rec.Stats()
	require.NoError(t, jerr)
	t.Logf("recorder: %d stalls, kernel drops %d, NAKs %d, recovered %d, lost %d; journaled %d messages in %d incarnation(s)",
		st.stalls.Load(), fs.KernelDrops, fs.NAKs, fs.Recovered, fs.LostMessages, ts.Messages, ts.Incarnations)
	t.Logf("recorder feed: reorder overflows %d, resyncs %d, held max %d, lost ranges %d", fs.ReorderOverflows, fs.Resyncs, fs.HeldMax, fs.LostRanges)
	require.Positive(t, fs.KernelDrops, "the stalls must make the kernel drop (else this test proves nothing)")
	require.Zero(t, fs.LostMessages)
	require.Equal(t, uint64(1), ts.Incarnations, "one incarnation: no hole restarted the history")
	require.NoError(t, rec.Close())

	// The journal holds exactly what was sent.
	var infos []journal.StreamInfo
	for _, si := range j.Streams() {
		if si.ID.Session == session {
			infos = append(infos, si)
		}
	}
	require.Len(t, infos, 1)
	require.Equal(t, wire.Seq(1), infos[0].First)
	require.Equal(t, wire.Seq(n+1), infos[0].Next)
	require.True(t, infos[0].Ended)
	r, err := j.OpenReader(infos[0].ID)
	require.NoError(t, err)
	defer r.Close()
	for i := range n {
		rec, err := r.Next()
		require.NoError(t, err)
		require.Equal(t, wire.Seq(i+1), rec.Seq)
		require.True(t, bytes.Equal(sent[i], rec.Data), "message %d differs", i+1)
	}
	_, err = r.Next()
	require.True(t, errors.Is(err, io.EOF), "nothing after the last message: %v", err)
}
