package sock_test

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/stretchr/testify/require"
)

// highIndexInterface makes veth pairs in the lab (the lab's kernel may
// lack the dummy module) until one end has an index of at least 64 and gives it a link-local address; it returns the
// interface and the address (with its zone).
func highIndexInterface(t *testing.T) (*net.Interface, netip.Addr) {
	t.Helper()
	ip := func(args ...string) {
		out, err := exec.Command("ip", args...).CombinedOutput()
		require.NoError(t, err, "ip %v: %s", args, out)
	}
	for i := range 100 {
		name := fmt.Sprintf("mdbz%d", i)
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			ip("link", "add", name, "type", "veth", "peer", "name", fmt.Sprintf("mdby%d", i))
			if ifi, err = net.InterfaceByName(name); err != nil {
				t.Fatal(err)
			}
		}
		if ifi.Index < 64 {
			continue
		}
		ip("link", "set", name, "up")
		ip("link", "set", fmt.Sprintf("mdby%d", i), "up")
		addr := netip.MustParseAddr("fe80::64")
		_ = exec.Command("ip", "-6", "addr", "add", addr.String()+"/64", "dev", name, "nodad").Run() // may exist already
		return ifi, addr.WithZone(name)
	}
	t.Fatal("no interface index reached 64")
	return nil, netip.Addr{}
}

// TestZoneHighIndex: a link-local source on an interface of index >= 64
// gets its zone name, the lookup is cached (no netlink dump, so no
// allocation, per datagram), and concurrent readers share the cache
// without a race (run with -race): a lookup per datagram would cost a
// netlink dump each, and an unguarded cache would race.
func TestZoneHighIndex(t *testing.T) {
	netlab.Require(t)
	ifi, addr := highIndexInterface(t)
	const readers = 2
	var rx [readers]*sock.Conn
	for i := range rx {
		c, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(addr, 0)})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		rx[i] = c
	}
	tx, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(addr, 0)})
	require.NoError(t, err)
	defer tx.Close()
	const rounds = 50
	read := func(c *sock.Conn, b *sock.Batch) int {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		n, err := c.ReadBatch(b)
		require.NoError(t, err)
		return n
	}
	var wg sync.WaitGroup
	for _, c := range rx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := sock.NewBatch(1, 64)
			for got := 0; got < rounds; {
				got += read(c, b)
				if src := b.Msgs[0].Addr.Addr(); src.Zone() != ifi.Name {
					t.Errorf("source %v: zone %q, want %q (index %d)", src, src.Zone(), ifi.Name, ifi.Index)
					return
				}
			}
		}()
	}
	// Send until both readers have had their rounds: a link that has just
	// come up may lose the first datagrams.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for i := 0; i < 5000; i++ {
		select {
		case <-done:
			i = 5000
			continue
		default:
		}
		for _, c := range rx {
			_ = tx.WriteTo([]byte("zone"), netip.AddrPortFrom(addr, c.LocalAddr().Port()))
		}
		time.Sleep(200 * time.Microsecond) // real time: a resend rate while the kernel joins
	}
	<-done
	for _, c := range rx { // drain what the readers did not need
		require.NoError(t, c.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
		for b := sock.NewBatch(64, 64); ; {
			if _, err := c.ReadBatch(b); err != nil {
				break
			}
		}
	}

	b := sock.NewBatch(1, 64)
	allocs := testing.AllocsPerRun(20, func() {
		require.NoError(t, tx.WriteTo([]byte("zone"), netip.AddrPortFrom(addr, rx[0].LocalAddr().Port())))
		read(rx[0], b)
	})
	require.Zero(t, allocs, "a cached zone costs nothing per datagram")
	require.Equal(t, ifi.Name, b.Msgs[0].Addr.Addr().Zone())
}

// TestBusyPollHonoursDeadline: a busy-polling read returns at its read
// deadline, not after its whole spin (before, it spun the full BusyPoll
// past the deadline every time). The check is the fastest of 20 reads, so
// a loaded machine slowing some of them does not matter.
func TestBusyPollHonoursDeadline(t *testing.T) {
	netlab.Require(t)
	c, err := sock.Open(sock.Config{Local: netip.MustParseAddrPort("127.0.0.1:0"), BusyPoll: sock.MaxBusyPoll})
	require.NoError(t, err)
	defer c.Close()
	b := sock.NewBatch(1, 64)
	fastest := time.Hour
	for range 20 {
		start := time.Now()
		require.NoError(t, c.SetReadDeadline(start.Add(time.Millisecond)))
		_, err := c.ReadBatch(b)
		require.True(t, sock.IsTimeout(err), "err %v", err)
		fastest = min(fastest, time.Since(start))
	}
	t.Logf("fastest read with a 1 ms deadline and a %v busy poll: %v", sock.MaxBusyPoll, fastest)
	require.Less(t, fastest, sock.MaxBusyPoll)
}
