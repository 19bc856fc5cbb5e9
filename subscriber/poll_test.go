package subscriber

import (
	"net/netip"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// TestFeedReaderTakesRepairs: while a gap waits, the feed reader reads the
// repair socket after its batch, so a repair is used without its own
// reader running (it never runs here: open starts no goroutine); without
// a gap it does not. The delivery is whole and in order, and the repair is
// counted as one.
func TestFeedReaderTakesRepairs(t *testing.T) {
	netlab.Require(t)
	rtx, err := sock.Open(sock.Config{Local: netip.MustParseAddrPort("127.0.0.1:0")})
	require.NoError(t, err)
	defer rtx.Close()
	var got []wire.Seq
	group := netip.MustParseAddrPort("239.7.7.8:31008")
	s, err := open(Config{
		Group:     group,
		StartSeq:  1,
		Recovery:  Recovery{Retransmitter: rtx.LocalAddr()},
		OnMessage: func(m Message) { got = append(got, m.Seq) },
		Logger:    discard,
	})
	require.NoError(t, err)
	defer s.closeConns()
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
	tx := labSender(t, netip.Addr{})
	feed := func(b []byte) {
		t.Helper()
		require.NoError(t, tx.WriteTo(b, group))
		require.NoError(t, s.conn.SetReadDeadline(time.Now().Add(5*time.Second)))
		require.NoError(t, s.r.readOnce())
	}

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
	require.Equal(t, []wire.Seq{1, 2, 3, 4}, got)
	require.EqualValues(t, 1, s.c.st.Repairs)
}
