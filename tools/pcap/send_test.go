package pcap

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/internal/labtest"
	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/wire"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// TestSenderPacing: captured packets go out verbatim, in order, paced by
// their capture times. The sends run in a testing/synctest bubble, so
// each goes out exactly when due (the socket is only written, which
// never blocks the bubble); the packets are read after it.
func TestSenderPacing(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.192.7.7:31077")
	lo, err := net.InterfaceByName("lo")
	require.NoError(t, err)
	rx, err := net.ListenMulticastUDP("udp4", lo, net.UDPAddrFromAddrPort(group))
	require.NoError(t, err)
	defer rx.Close()

	t0 := time.Unix(1700000000, 0).UnixNano()
	var pkts [][]byte
	for i := range 5 {
		pkts = append(pkts, moldPacket(t, "LIVE", wire.Seq(1+2*i), "a", "b"))
	}
	synctest.Test(t, func(t *testing.T) {
		s, err := NewSender(SendConfig{Group: group, Speed: 2})
		require.NoError(t, err)
		defer s.Close()
		start := time.Now()
		for i, p := range pkts {
			// 40 ms apart in capture time: 20 ms at speed 2.
			require.NoError(t, s.Send(context.Background(), Event{Time: t0 + int64(i)*int64(40*time.Millisecond), Packet: p}))
			require.Equal(t, time.Duration(i)*20*time.Millisecond, time.Since(start), "packet %d paced at capture time / speed", i)
		}
		require.EqualValues(t, 5, s.Sent())

		// A cancelled context stops a wait.
		cctx, ccancel := context.WithCancel(context.Background())
		ccancel()
		err = s.Send(cctx, Event{Time: t0 + int64(time.Hour), Packet: pkts[0]})
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, 80*time.Millisecond, time.Since(start), "a cancelled wait returns at once")
	})

	buf := make([]byte, 2048)
	for i, p := range pkts {
		require.NoError(t, rx.SetReadDeadline(time.Now().Add(5*time.Second)))
		n, _, err := rx.ReadFromUDPAddrPort(buf)
		require.NoError(t, err, "packet %d", i)
		require.Equal(t, p, buf[:n])
	}
}

func TestSenderConfig(t *testing.T) {
	_, err := NewSender(SendConfig{})
	require.Error(t, err)
	_, err = NewSender(SendConfig{Group: netip.MustParseAddrPort("239.1.1.1:5"), Interface: "no-such-if0"})
	require.ErrorContains(t, err, "no-such-if0")
	_, err = NewSender(SendConfig{Group: netip.MustParseAddrPort("239.1.1.1:5"), TTL: 300})
	require.Error(t, err)
}
