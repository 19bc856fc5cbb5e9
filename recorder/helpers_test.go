package recorder

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// askOnce sends one re-request to addr and returns the first answer.
func askOnce(t *testing.T, addr netip.AddrPort, s wire.Session, from wire.Seq, count uint16) (wire.Packet, wire.Seq) {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.WriteToUDPAddrPort(wire.AppendRequest(nil, wire.Request{Session: s, Seq: from, Count: count}), addr)
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, wire.MaxPayloadSize)
	n, _, err := c.ReadFromUDPAddrPort(buf)
	require.NoError(t, err)
	p, err := wire.ParsePacket(buf[:n])
	require.NoError(t, err)
	return p, p.Seq
}
