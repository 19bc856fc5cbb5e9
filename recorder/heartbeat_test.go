//go:build unix

package recorder

import (
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// advance moves a synctest bubble's clock on by d and returns once every
// goroutine of the bubble is blocked again: the timers due by then have
// fired and what they started is done. Call it only in a bubble.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// heartbeatsSent reads, without waiting, the heartbeats queued on rx
// (sendto on loopback queues a datagram before it returns), as
// session -> next sequence.
func heartbeatsSent(t *testing.T, rx *net.UDPConn) map[wire.Session]wire.Seq {
	t.Helper()
	rc, err := rx.SyscallConn()
	require.NoError(t, err)
	got := map[wire.Session]wire.Seq{}
	buf := make([]byte, 2048)
	for {
		var n int
		var rerr error
		require.NoError(t, rc.Read(func(fd uintptr) bool {
			n, _, rerr = syscall.Recvfrom(int(fd), buf, syscall.MSG_DONTWAIT)
			return true // never wait: the bubble's clock would stop
		}))
		if errors.Is(rerr, syscall.EAGAIN) {
			return got
		}
		require.NoError(t, rerr)
		h, err := wire.ParseHeader(buf[:n])
		require.NoError(t, err)
		require.Zero(t, h.Count, "a heartbeat carries no message")
		_, dup := got[h.Session]
		require.False(t, dup, "one heartbeat per session per tick")
		got[h.Session] = h.Seq
	}
}

// TestRewinderHeartbeatsSilentSessions runs the rewinder's heartbeat
// goroutine on a synctest bubble's clock: a session silent on the feed for
// Heartbeat gets a heartbeat carrying the next sequence the rewinder
// holds, repeated every Heartbeat, and a session that spoke within the
// last Heartbeat gets none. The heartbeats go to a unicast socket of the
// test (in the lab), read without waiting after each tick.
func TestRewinderHeartbeatsSilentSessions(t *testing.T) {
	netlab.Require(t)
	rx, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	require.NoError(t, err)
	defer rx.Close()
	to := rx.LocalAddr().(*net.UDPAddr).AddrPort()
	synctest.Test(t, func(t *testing.T) {
		hb, err := sock.Open(sock.Config{Local: netip.MustParseAddrPort("127.0.0.1:0")})
		require.NoError(t, err)
		const every = time.Second
		r := &Rewinder{cache: retransmit.NewCache(retransmit.CacheConfig{}), sessions: map[wire.Session]*rewound{},
			hbConn: hb, hbGroup: to, hbEvery: every, stop: make(chan struct{})}
		defer func() {
			close(r.stop)
			r.wg.Wait()
			hb.Close()
		}()
		r.wg.Add(1)
		go r.heartbeats()
		sessA, _ := wire.ParseSession("A")
		sessB, _ := wire.ParseSession("B")
		src := netip.MustParseAddrPort("127.0.0.1:7")
		feed := func(s wire.Session, seq wire.Seq) {
			r.onMessage(subscriber.Message{Stream: subscriber.StreamID{Source: src, Session: s, Incarnation: 1}, Seq: seq, Data: []byte("m")})
		}

		feed(sessA, 10) // t = 0
		advance(every / 2)
		feed(sessB, 20) // t = 0.5 s
		advance(every/2 - time.Nanosecond)
		require.Empty(t, heartbeatsSent(t, rx), "before the first tick")
		advance(time.Nanosecond) // t = 1 s: A silent for 1 s, B for 0.5 s
		require.Equal(t, map[wire.Session]wire.Seq{sessA: 11}, heartbeatsSent(t, rx))
		advance(every) // t = 2 s: both silent, A again
		require.Equal(t, map[wire.Session]wire.Seq{sessA: 11, sessB: 21}, heartbeatsSent(t, rx))
		advance(every / 2)
		feed(sessA, 11)    // t = 2.5 s: A speaks
		advance(every / 2) // t = 3 s: A spoke 0.5 s ago
		require.Equal(t, map[wire.Session]wire.Seq{sessB: 21}, heartbeatsSent(t, rx))
		advance(every) // t = 4 s
		require.Equal(t, map[wire.Session]wire.Seq{sessA: 12, sessB: 21}, heartbeatsSent(t, rx))
	})
}
