package sock_test

import (
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { os.Exit(netlab.Main(m)) }

func pair(t *testing.T, group netip.AddrPort, ifname string, src netip.Addr) (tx, rx *sock.Conn) {
	t.Helper()
	ifi, err := net.InterfaceByName(ifname)
	require.NoError(t, err)
	wild := netip.IPv4Unspecified()
	if group.Addr().Is6() {
		wild = netip.IPv6Unspecified()
	}
	rx, err = sock.Open(sock.Config{Local: netip.AddrPortFrom(wild, group.Port()), ReusePort: true, ReadBuffer: 1 << 20})
	require.NoError(t, err)
	require.NoError(t, rx.Join(ifi, group.Addr(), netip.Addr{}))
	if !src.IsValid() {
		src = wild
	}
	tx, err = sock.Open(sock.Config{Local: netip.AddrPortFrom(src, 0), Interface: ifi, Loopback: true})
	require.NoError(t, err)
	t.Cleanup(func() { rx.Close(); tx.Close() })
	return tx, rx
}

func TestBatchRoundTrip(t *testing.T) {
	netlab.Require(t)
	for _, tc := range []struct {
		name, ifname string
		group        netip.AddrPort
	}{
		{"ipv4-lo", "lo", netip.MustParseAddrPort("239.1.2.3:30001")},
		{"ipv6-veth", netlab.VethA, netip.MustParseAddrPort("[ff15::1:2]:30002")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tx, rx := pair(t, tc.group, tc.ifname, netip.Addr{})
			out := sock.NewBatch(8, 0)
			for i := range out.Msgs {
				out.Msgs[i].Buf = []byte{byte(i), 1, 2, 3}
				out.Msgs[i].Addr = tc.group
			}
			n, err := tx.WriteBatch(out, 8)
			require.NoError(t, err)
			require.Equal(t, 8, n)
			in := sock.NewBatch(16, 2048)
			got := 0
			require.NoError(t, rx.SetReadDeadline(time.Now().Add(2*time.Second)))
			for got < 8 {
				n, err := rx.ReadBatch(in)
				require.NoError(t, err)
				for i := range n {
					m := in.Msgs[i]
					require.Equal(t, []byte{byte(got), 1, 2, 3}, m.Buf)
					require.Equal(t, tc.group.Addr(), m.Dst)
					require.Equal(t, tx.LocalAddr().Port(), m.Addr.Port())
					require.NotZero(t, m.IfIndex)
					got++
				}
			}
		})
	}
}

func TestBatchZeroAlloc(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.1.2.4:30003")
	tx, rx := pair(t, group, "lo", netip.Addr{})
	out := sock.NewBatch(4, 0)
	for i := range out.Msgs {
		out.Msgs[i].Buf = make([]byte, 100)
		out.Msgs[i].Addr = group
	}
	in := sock.NewBatch(4, 2048)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := tx.WriteBatch(out, 4); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < 4; {
			n, err := rx.ReadBatch(in)
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
	})
	require.Zero(t, allocs)
}

// TestReadBufferForced: a request above net.core.rmem_max is granted in
// full where the process may force it (root in the host's user namespace,
// as in the lab of a root caller) and capped elsewhere, never refused.
func TestReadBufferForced(t *testing.T) {
	netlab.Require(t)
	const want = 16 << 20
	c, err := sock.Open(sock.Config{Local: netip.MustParseAddrPort("127.0.0.1:0"), ReadBuffer: want, WriteBuffer: want})
	require.NoError(t, err)
	defer c.Close()
	rmemMax := readInt(t, "/proc/sys/net/core/rmem_max")
	uidMap, err := os.ReadFile("/proc/self/uid_map")
	require.NoError(t, err)
	hostRoot := os.Geteuid() == 0 && strings.Join(strings.Fields(string(uidMap)), " ") == "0 0 4294967295"
	t.Logf("rmem_max %d, host root %v: granted read %d, write %d", rmemMax, hostRoot, c.ReadBufferGranted, c.WriteBufferGranted)
	if hostRoot {
		require.Equal(t, 2*want, c.ReadBufferGranted, "forced beyond rmem_max")
		require.Equal(t, 2*want, c.WriteBufferGranted, "forced beyond wmem_max")
		return
	}
	require.GreaterOrEqual(t, c.ReadBufferGranted, min(2*want, 2*rmemMax))
}

func readInt(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	return n
}

// TestBusyPoll: a busy-polling reader gets a datagram that arrives while
// it spins, without allocating; on a quiet socket the spin gives up and
// the read deadline still ends the read; Close does not hang on a
// spinning reader; out-of-range polls are refused.
func TestBusyPoll(t *testing.T) {
	netlab.Require(t)
	for _, d := range []time.Duration{-time.Nanosecond, sock.MaxBusyPoll + 1} {
		_, err := sock.Open(sock.Config{Local: netip.MustParseAddrPort("127.0.0.1:0"), BusyPoll: d})
		require.ErrorContains(t, err, "busy poll", "BusyPoll %v", d)
	}
	group := netip.MustParseAddrPort("239.1.2.6:30005")
	ifi, err := net.InterfaceByName("lo")
	require.NoError(t, err)
	rx, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(netip.IPv4Unspecified(), group.Port()), ReusePort: true, BusyPoll: sock.MaxBusyPoll})
	require.NoError(t, err)
	require.NoError(t, rx.Join(ifi, group.Addr(), netip.Addr{}))
	tx, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(netip.IPv4Unspecified(), 0), Interface: ifi, Loopback: true})
	require.NoError(t, err)
	defer tx.Close()

	// The sender writes 200 µs after the reader asks: well inside the
	// reader's 5 ms spin.
	ask, sent := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sent)
		msg := []byte("spin")
		for range ask {
			// Real time on purpose: the datagram must come while the
			// reader spins on the kernel's queue (busy poll).
			time.Sleep(200 * time.Microsecond)
			if err := tx.WriteTo(msg, group); err != nil {
				panic(err)
			}
		}
	}()
	in := sock.NewBatch(4, 2048)
	require.NoError(t, rx.SetReadDeadline(time.Now().Add(10*time.Second)))
	allocs := testing.AllocsPerRun(50, func() {
		ask <- struct{}{}
		n, err := rx.ReadBatch(in)
		if err != nil || n != 1 || string(in.Msgs[0].Buf) != "spin" {
			t.Fatalf("ReadBatch = %d, %v", n, err)
		}
	})
	close(ask)
	<-sent
	require.Zero(t, allocs)

	// Quiet socket: the spin ends, the poller's deadline fires.
	start := time.Now()
	require.NoError(t, rx.SetReadDeadline(start.Add(30*time.Millisecond)))
	_, err = rx.ReadBatch(in)
	require.True(t, sock.IsTimeout(err), "want a timeout, got %v", err)
	require.Less(t, time.Since(start), 5*time.Second)

	// Close while the reader spins or parks: the read ends with ErrClosed.
	require.NoError(t, rx.SetReadDeadline(time.Time{}))
	done := make(chan error, 1)
	go func() { _, err := rx.ReadBatch(in); done <- err }()
	time.Sleep(2 * time.Millisecond) // real time: the reader is in the kernel's read (spinning or parked)
	require.NoError(t, rx.Close())
	select {
	case err := <-done:
		require.ErrorIs(t, err, net.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("ReadBatch did not return after Close")
	}
}
