//go:build linux

package sock_test

import (
	"bufio"
	"errors"
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

// onPoller reports whether the socket behind fd is registered with an
// epoll instance of this process (Go's poller is the only one here): some
// epoll descriptor's fdinfo lists a target descriptor that is the same
// socket.
func onPoller(t *testing.T, fd int) bool {
	t.Helper()
	self, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(self, "socket:"), self)
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	for _, e := range ents {
		if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); l != "anon_inode:[eventpoll]" {
			continue
		}
		f, err := os.Open("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue // closed meanwhile
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 2 || fields[0] != "tfd:" {
				continue
			}
			if l, _ := os.Readlink("/proc/self/fd/" + fields[1]); l == self {
				f.Close()
				return true
			}
		}
		f.Close()
	}
	return false
}

// within returns what done gives within 5 s (real time: a read woken in
// another goroutine), or fails the test with why.
func within(t *testing.T, done <-chan error, why string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal(why)
		return nil
	}
}

// TestBusyPollLeavesPoller: a busy-polling socket is not on Go's poller
// (a plain one is: the check can fail), and still joins, reads, writes,
// times out at its deadline and unblocks a waiting read on Close.
func TestBusyPollLeavesPoller(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.1.2.9:30019")
	lo, err := net.InterfaceByName("lo")
	require.NoError(t, err)

	plain, err := sock.Open(sock.Config{Local: netip.MustParseAddrPort("127.0.0.1:0")})
	require.NoError(t, err)
	defer plain.Close()
	require.False(t, sock.Detached(plain))
	require.True(t, onPoller(t, sock.Fd(plain)), "a plain socket is on the poller")

	rx, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(netip.IPv4Unspecified(), group.Port()), ReusePort: true, BusyPoll: 100 * time.Microsecond})
	require.NoError(t, err)
	require.True(t, sock.Detached(rx))
	require.Equal(t, group.Port(), rx.LocalAddr().Port())
	require.NoError(t, rx.Join(lo, group.Addr(), netip.Addr{}))
	require.False(t, onPoller(t, sock.Fd(rx)), "the busy-polling socket left the poller, also after its join")

	tx, err := sock.Open(sock.Config{Local: netip.MustParseAddrPort("127.0.0.1:0"), Interface: lo, Loopback: true})
	require.NoError(t, err)
	defer tx.Close()
	in := sock.NewBatch(4, 64)

	// Joined: a datagram to the group arrives.
	require.NoError(t, tx.WriteTo([]byte("hello"), group))
	require.NoError(t, rx.SetReadDeadline(time.Now().Add(5*time.Second)))
	n, err := rx.ReadBatch(in)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, "hello", string(in.Msgs[0].Buf))
	require.Equal(t, group.Addr(), in.Msgs[0].Dst)

	// It writes, one datagram and a batch.
	require.NoError(t, rx.WriteTo([]byte("back"), plain.LocalAddr()))
	out := sock.NewBatch(2, 0)
	out.Msgs[0] = sock.Message{Buf: []byte("b1"), Addr: plain.LocalAddr()}
	out.Msgs[1] = sock.Message{Buf: []byte("b2"), Addr: plain.LocalAddr()}
	k, err := rx.WriteBatch(out, 2)
	require.NoError(t, err)
	require.Equal(t, 2, k)
	var got []string
	require.NoError(t, plain.SetReadDeadline(time.Now().Add(5*time.Second)))
	for len(got) < 3 {
		n, err := plain.ReadBatch(in)
		require.NoError(t, err)
		for _, m := range in.Msgs[:n] {
			got = append(got, string(m.Buf))
		}
	}
	require.Equal(t, []string{"back", "b1", "b2"}, got)

	// The deadline ends a read that waits.
	t0 := time.Now()
	require.NoError(t, rx.SetReadDeadline(t0.Add(30*time.Millisecond)))
	_, err = rx.ReadBatch(in)
	require.True(t, sock.IsTimeout(err), "%v", err)
	require.GreaterOrEqual(t, time.Since(t0), 30*time.Millisecond)

	// Moving the deadline into the past wakes a read waiting without one.
	require.NoError(t, rx.SetReadDeadline(time.Time{}))
	done := make(chan error, 1)
	go func() {
		_, err := rx.ReadBatch(sock.NewBatch(4, 64))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // real time: the reader is waiting in poll
	require.NoError(t, rx.SetReadDeadline(time.Now()))
	err = within(t, done, "a waiting read did not see its deadline move")
	require.True(t, sock.IsTimeout(err), "%v", err)

	// Close wakes a read waiting without a deadline.
	require.NoError(t, rx.SetReadDeadline(time.Time{}))
	go func() {
		_, err := rx.ReadBatch(sock.NewBatch(4, 64))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // real time: the reader is waiting in poll
	require.NoError(t, rx.Close())
	err = within(t, done, "Close did not wake a waiting read")
	require.True(t, errors.Is(err, net.ErrClosed), "%v", err)
	require.ErrorIs(t, rx.Close(), net.ErrClosed)
	_, err = rx.ReadBatch(in)
	require.ErrorIs(t, err, net.ErrClosed)
}

// TestBusyPollReadZeroAlloc: reading and writing a socket off the poller
// allocates nothing.
func TestBusyPollReadZeroAlloc(t *testing.T) {
	netlab.Require(t)
	rx, err := sock.Open(sock.Config{Local: netip.MustParseAddrPort("127.0.0.1:0"), BusyPoll: 100 * time.Microsecond, ReadBuffer: 1 << 20})
	require.NoError(t, err)
	defer rx.Close()
	tx, err := sock.Open(sock.Config{Local: netip.MustParseAddrPort("127.0.0.1:0"), SendOnly: true})
	require.NoError(t, err)
	defer tx.Close()
	require.True(t, sock.Detached(rx))
	require.True(t, sock.Detached(tx))
	out := sock.NewBatch(1, 0)
	out.Msgs[0] = sock.Message{Buf: []byte("x"), Addr: rx.LocalAddr()}
	in := sock.NewBatch(1, 64)
	require.NoError(t, rx.SetReadDeadline(time.Now().Add(10*time.Second)))
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := tx.WriteBatch(out, 1); err != nil {
			t.Fatal(err)
		}
		if n, err := rx.ReadBatch(in); err != nil || n != 1 {
			t.Fatal(n, err)
		}
	})
	require.Zero(t, allocs)
}
