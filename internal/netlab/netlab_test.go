package netlab_test

import (
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { os.Exit(netlab.Main(m)) }

func TestLabNetwork(t *testing.T) {
	netlab.Require(t)
	lo, err := net.InterfaceByName("lo")
	require.NoError(t, err)
	require.NotZero(t, lo.Flags&net.FlagUp, "lo is up")
	require.NotZero(t, lo.Flags&net.FlagMulticast, "lo is multicast")
	for _, name := range []string{netlab.VethA, netlab.VethB} {
		ifi, err := net.InterfaceByName(name)
		require.NoError(t, err)
		require.NotZero(t, ifi.Flags&net.FlagUp, name)
	}
	// The lab must not see the host's interfaces: only lo and the pair.
	all, err := net.Interfaces()
	require.NoError(t, err)
	require.Len(t, all, 3)
}

func TestSetupRefusesOutsideLab(t *testing.T) {
	if netlab.Inside() {
		t.Setenv("MDBUS_NETLAB", "")
	}
	require.Error(t, netlab.Setup())
}

// TestHosts: two hosts on the lab's bridge reach each other over IPv4 and
// IPv6, each sees only lo and its own link, and a host whose link is down
// is cut off. (After TestLabNetwork, which counts the lab's interfaces.)
func TestHosts(t *testing.T) {
	netlab.Require(t)
	a, err := netlab.NewHost("a")
	require.NoError(t, err)
	defer a.Close()
	b, err := netlab.NewHost("b")
	require.NoError(t, err)
	defer b.Close()
	for _, pair := range [][2]netip.Addr{{a.IPv4, b.IPv4}, {a.IPv6, b.IPv6}} {
		var rx *net.UDPConn
		require.NoError(t, b.Do(func() {
			all, err := net.Interfaces()
			require.NoError(t, err)
			require.Len(t, all, 2, "a host sees lo and its link")
			rx, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(pair[1], 0)))
			require.NoError(t, err)
		}))
		defer rx.Close()
		var tx *net.UDPConn
		require.NoError(t, a.Do(func() {
			tx, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(pair[0], 0)))
			require.NoError(t, err)
		}))
		defer tx.Close()
		to := rx.LocalAddr().(*net.UDPAddr).AddrPort()
		buf := make([]byte, 16)
		_, err := tx.WriteToUDPAddrPort([]byte("hello"), to)
		require.NoError(t, err)
		require.NoError(t, rx.SetReadDeadline(time.Now().Add(5*time.Second)))
		n, from, err := rx.ReadFromUDPAddrPort(buf)
		require.NoError(t, err)
		require.Equal(t, "hello", string(buf[:n]))
		require.Equal(t, pair[0], from.Addr().Unmap())

		require.NoError(t, b.SetLink(false))
		_, _ = tx.WriteToUDPAddrPort([]byte("lost"), to)
		require.NoError(t, rx.SetReadDeadline(time.Now().Add(100*time.Millisecond)))
		_, _, err = rx.ReadFromUDPAddrPort(buf)
		require.Error(t, err, "a host with its link down is cut off")
		require.NoError(t, b.SetLink(true))
	}
}
