package subscriber

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// TestFeedReaderTakesRepairs: on one Go processor, while a gap waits, the
// feed reader reads the repair socket after its batch, so a repair is used
// without its own reader running (it never runs here: open starts no
// goroutine); without a gap it does not. The delivery is whole and in
// order, and the repair is counted as one. With two processors the feed
// reader leaves the repair socket to its own reader.
func TestFeedReaderTakesRepairs(t *testing.T) {
	onOneAndTwoProcs(t, feedReaderTakesRepairs)
}

// onOneAndTwoProcs runs f with GOMAXPROCS 1 and 2 (one is true for 1).
func onOneAndTwoProcs(t *testing.T, f func(t *testing.T, one bool)) {
	netlab.Require(t)
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprintf("GOMAXPROCS=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			f(t, procs == 1)
		})
	}
}

// pollRig is a subscriber opened without its goroutines on group, with a
// retransmitter socket (rtx) and a feed sender (tx); feed sends a datagram
// and has the feed reader read it.
type pollRig struct {
	s    *Subscriber
	rtx  *sock.Conn
	tx   *sock.Conn
	feed func(b []byte)
}

func newPollRig(t *testing.T, group netip.AddrPort, onMessage func(Message)) pollRig {
	t.Helper()
	return newPollRigWith(t, group, onMessage, nil)
}

// newPollRigWith is newPollRig with the subscriber's Config changed by set
// (nil: none).
func newPollRigWith(t *testing.T, group netip.AddrPort, onMessage func(Message), set func(*Config)) pollRig {
	t.Helper()
	rtx, err := sock.Open(sock.Config{Local: netip.MustParseAddrPort("127.0.0.1:0")})
	require.NoError(t, err)
	t.Cleanup(func() { rtx.Close() })
	cfg := Config{
		Group:     group,
		StartSeq:  1,
		Recovery:  Recovery{Retransmitter: rtx.LocalAddr()},
		OnMessage: onMessage,
		Logger:    discard,
	}
	if set != nil {
		set(&cfg)
	}
	s, err := open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { s.closeConns() })
	tx := labSender(t, netip.Addr{})
	return pollRig{s: s, rtx: rtx, tx: tx, feed: func(b []byte) {
		t.Helper()
		require.NoError(t, tx.WriteTo(b, group))
		require.NoError(t, s.conn.SetReadDeadline(time.Now().Add(5*time.Second)))
		require.NoError(t, s.r.readOnce())
	}}
}

func feedReaderTakesRepairs(t *testing.T, polls bool) {
	var got []wire.Seq
	rig := newPollRig(t, netip.MustParseAddrPort("239.7.7.8:31008"), func(m Message) { got = append(got, m.Seq) })
	s, rtx, feed := rig.s, rig.rtx, rig.feed
	var repairR *reader
	for _, r := range s.readers {
		if r.feed == FeedRepair {
			repairR = r
		}
	}
	require.NotNil(t, repairR)
	require.Equal(t, []*reader{repairR}, s.r.polls)
	to := s.repair.LocalAddr()
	to = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), to.Port())

	// No gap: a datagram on the repair socket is left to its own reader.
	require.NoError(t, rtx.WriteTo(pkt(sessA, 1, 1), to))
	time.Sleep(20 * time.Millisecond) // real time: the datagram reaches the socket
	feed(pkt(sessA, 1, 1))
	require.Zero(t, s.c.st.Repairs)

	// Seq 2 lost: 3 is held. The stale repair of 1 queued above is read
	// with the next poll (a duplicate), then the repair of 2 fills the gap.
	feed(pkt(sessA, 3, 1))
	require.Equal(t, []wire.Seq{1}, got)
	require.NoError(t, rtx.WriteTo(pkt(sessA, 2, 1), to))
	time.Sleep(20 * time.Millisecond)
	feed(pkt(sessA, 4, 1))
	if !polls {
		require.Equal(t, []wire.Seq{1}, got, "the repair is left to the repair socket's reader")
		require.Zero(t, s.c.st.Repairs)
		require.NoError(t, repairR.conn.SetReadDeadline(time.Now().Add(5*time.Second)))
		// The stale repair of 1 and the repair of 2: one batch, or two.
		for i := 0; i < 2 && s.c.st.Repairs == 0; i++ {
			require.NoError(t, repairR.readOnce())
		}
	}
	require.Equal(t, []wire.Seq{1, 2, 3, 4}, got)
	require.EqualValues(t, 1, s.c.st.Repairs)
}

// TestFeedReaderSendsDueNAKs: on one Go processor the feed reader sends a
// re-request that fell due after its batch, without the timer goroutine
// (open starts none); with two it leaves that to the timer goroutine.
func TestFeedReaderSendsDueNAKs(t *testing.T) {
	onOneAndTwoProcs(t, feedReaderSendsDueNAKs)
}

func feedReaderSendsDueNAKs(t *testing.T, inline bool) {
	rig := newPollRig(t, netip.MustParseAddrPort("239.7.7.8:31009"), func(Message) {})
	s, rtx, feed := rig.s, rig.rtx, rig.feed
	feed(pkt(sessA, 1, 1))
	feed(pkt(sessA, 3, 1)) // 2 is missing
	s.c.mu.Lock()
	due := s.c.timerAt
	s.c.mu.Unlock()
	require.NotEqual(t, maxTime, due, "the gap has a deadline")
	// Real time: the first re-request waits a random back-off, bounded.
	require.Less(t, due.Sub(monotime.Now()), time.Second)
	time.Sleep(max(due.Sub(monotime.Now()), 0) + time.Millisecond)
	feed(pkt(sessA, 4, 1))

	in := sock.NewBatch(4, 64)
	wait := 50 * time.Millisecond // nothing comes: how long to look
	if inline {
		wait = 5 * time.Second // it was sent before readOnce returned
	}
	require.NoError(t, rtx.SetReadDeadline(time.Now().Add(wait)))
	n, err := rtx.ReadBatch(in)
	if !inline {
		require.True(t, sock.IsTimeout(err), "no re-request without the timer goroutine: %v", err)
		return
	}
	require.NoError(t, err)
	require.Equal(t, 1, n)
	r, err := wire.ParseRequest(in.Msgs[0].Buf)
	require.NoError(t, err)
	require.Equal(t, wire.Seq(2), r.Seq)
	require.EqualValues(t, 1, r.Count)
}

// TestBusyFeedReaderTakesRepairsBetweenChunks: a feed reader handed a
// batch larger than pollChunk reads the repair socket between its chunks
// while a gap waits, on one Go processor or two: the repair queued there
// fills the gap after the first chunk, so only the rest of that chunk is
// held, and the whole batch is delivered in order by one readOnce, the
// repair reader never running. A batch of pollChunk datagrams or fewer
// leaves the repair to its reader on two processors (as before).
func TestBusyFeedReaderTakesRepairsBetweenChunks(t *testing.T) {
	netlab.Require(t)
	for _, procs := range []int{1, 2} {
		for _, big := range []bool{true, false} {
			t.Run(fmt.Sprintf("GOMAXPROCS=%d/big=%v", procs, big), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				busyFeedReader(t, procs == 1, big)
			})
		}
	}
}

func busyFeedReader(t *testing.T, oneP, big bool) {
	group := netip.MustParseAddrPort("239.7.7.8:31010")
	if !big {
		group = netip.MustParseAddrPort("239.7.7.8:31011")
	}
	var got []wire.Seq
	rig := newPollRigWith(t, group, func(m Message) { got = append(got, m.Seq) }, func(c *Config) {
		c.Receive.DisableGRO = true // plain reads: one batch takes them all
	})
	s, rtx, tx := rig.s, rig.rtx, rig.tx
	n := 2 * pollChunk // one batch of the default 64
	if !big {
		n = pollChunk
	}
	// Seq 1, then 2 lost, then 3..n+1: n datagrams queued on the feed
	// socket, and the repair of 2 queued on the repair socket.
	for seq := 1; seq <= n+1; seq++ {
		if seq != 2 {
			require.NoError(t, tx.WriteTo(pkt(sessA, wire.Seq(seq), 1), group))
		}
	}
	to := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), s.repair.LocalAddr().Port())
	require.NoError(t, rtx.WriteTo(pkt(sessA, 2, 1), to))
	time.Sleep(20 * time.Millisecond) // real time: the datagrams reach the sockets
	require.NoError(t, s.conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	require.NoError(t, s.r.readOnce())
	require.Equal(t, n, int(s.c.st.Datagrams-s.c.st.FeedDatagrams[FeedRepair]), "one batch took every feed datagram")
	want := make([]wire.Seq, n+1)
	for i := range want {
		want[i] = wire.Seq(i + 1)
	}
	switch {
	case big:
		require.Equal(t, want, got, "the batch delivered whole, in order")
		require.EqualValues(t, 1, s.c.st.Repairs)
		require.EqualValues(t, pollChunk-1, s.c.st.Reordered, "held: the rest of the first chunk (3..33), nothing after the poll")
	case oneP:
		require.Equal(t, want, got, "on one processor the poll after the batch takes the repair")
		require.EqualValues(t, n-1, s.c.st.Reordered)
	default:
		require.Equal(t, want[:1], got, "the repair is left to the repair socket's reader")
		require.Zero(t, s.c.st.Repairs)
	}
}

// TestBusyFeedReaderSendsNAKsBetweenChunks: a feed reader handed a batch
// larger than pollChunk sends a gap's first re-request, once due, between
// its chunks, on two Go processors too, without the timer goroutine (open
// starts none).
func TestBusyFeedReaderSendsNAKsBetweenChunks(t *testing.T) {
	netlab.Require(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	group := netip.MustParseAddrPort("239.7.7.8:31012")
	rig := newPollRigWith(t, group, func(Message) {}, func(c *Config) {
		c.Receive.DisableGRO = true
		// Due at once: the default unicast delay (100 µs) is longer than
		// a test's batch takes.
		c.Recovery.NAK.Generator = nak.FixedDelay(0)
	})
	s, rtx, tx := rig.s, rig.rtx, rig.tx
	for seq := 1; seq <= 2*pollChunk+1; seq++ {
		if seq != 2 {
			require.NoError(t, tx.WriteTo(pkt(sessA, wire.Seq(seq), 1), group))
		}
	}
	time.Sleep(20 * time.Millisecond) // real time: the datagrams reach the socket
	require.NoError(t, s.conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	require.NoError(t, s.r.readOnce())
	in := sock.NewBatch(4, 64)
	require.NoError(t, rtx.SetReadDeadline(time.Now().Add(5*time.Second)))
	n, err := rtx.ReadBatch(in)
	require.NoError(t, err, "the re-request left during the batch")
	require.Equal(t, 1, n)
	r, err := wire.ParseRequest(in.Msgs[0].Buf)
	require.NoError(t, err)
	require.Equal(t, wire.Seq(2), r.Seq)
	require.EqualValues(t, 1, r.Count)
}
