package subscriber

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/packetconn"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// The socket tests run in the lab (TestMain): IPv4 multicast on lo,
// IPv6 multicast on the veth pair. Every wait is bounded.

const waitFor = 5 * time.Second

// testPub publishes one session with a raw socket and the wire encoder
// (the publisher package is not used here).
type testPub struct {
	t     testing.TB
	conn  *sock.Conn
	group netip.AddrPort
	sess  wire.Session
	next  wire.Seq
	out   *sock.Batch
}

func newTestPub(t testing.TB, group netip.AddrPort, ifname string, src netip.Addr, sess wire.Session) *testPub {
	t.Helper()
	ifi, err := net.InterfaceByName(ifname)
	require.NoError(t, err)
	conn, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(src, 0), Interface: ifi, Loopback: true})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return &testPub{t: t, conn: conn, group: group, sess: sess, next: 1, out: sock.NewBatch(32, 0)}
}

// packets encodes the next n messages, per to a packet.
func (p *testPub) packets(n, per int) [][]byte {
	var out [][]byte
	for n > 0 {
		k := min(n, per)
		out = append(out, pkt(p.sess, p.next, k))
		p.next += wire.Seq(k)
		n -= k
	}
	return out
}

// send sends dgs to the group, calling wait (if not nil) with the number
// sent so far after each batch so the receiver can keep up.
func (p *testPub) send(dgs [][]byte, wait func(sent int)) {
	p.t.Helper()
	for i := 0; i < len(dgs); {
		n := min(len(dgs)-i, len(p.out.Msgs))
		for j := range n {
			p.out.Msgs[j] = sock.Message{Buf: dgs[i+j], Addr: p.group}
		}
		sent, err := p.conn.WriteBatch(p.out, n)
		require.NoError(p.t, err)
		require.Equal(p.t, n, sent)
		i += n
		if wait != nil {
			wait(i)
		}
	}
}

func (p *testPub) id() StreamID {
	return StreamID{Source: p.conn.LocalAddr(), Session: p.sess, Incarnation: 1}
}

// collector records what a Subscriber's callbacks report, checking order
// and content as it goes.
type collector struct {
	mu   sync.Mutex
	seqs map[StreamID][]wire.Seq
	gaps []Gap
	ends map[StreamID]wire.Seq
	bad  []string
}

func newCollector() *collector {
	return &collector{seqs: map[StreamID][]wire.Seq{}, ends: map[StreamID]wire.Seq{}}
}

func (c *collector) config(cfg Config) Config {
	cfg.OnMessage = c.onMessage
	cfg.OnGap = func(g Gap) { c.mu.Lock(); c.gaps = append(c.gaps, g); c.mu.Unlock() }
	cfg.OnEnd = func(id StreamID, next wire.Seq) { c.mu.Lock(); c.ends[id] = next; c.mu.Unlock() }
	if cfg.Logger == nil {
		cfg.Logger = discard
	}
	return cfg
}

func (c *collector) onMessage(m Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.seqs[m.Stream]
	if n := len(s); n > 0 && s[n-1]+1 != m.Seq {
		c.bad = append(c.bad, "out of order")
	}
	if !bytes.Equal(m.Data, payload(m.Seq)) {
		c.bad = append(c.bad, "bad payload")
	}
	c.seqs[m.Stream] = append(s, m.Seq)
}

func (c *collector) count(id StreamID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seqs[id])
}

func (c *collector) streams() map[StreamID]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[StreamID]int{}
	for id, s := range c.seqs {
		out[id] = len(s)
	}
	return out
}

func (c *collector) check(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Empty(t, c.bad)
}

func newSub(t testing.TB, cfg Config) (*Subscriber, *collector) {
	t.Helper()
	c := newCollector()
	s, err := New(c.config(cfg))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, c
}

// waitDatagrams returns a pacing function for testPub.send: it waits until
// s has read as many datagrams as were sent.
func waitDatagrams(t testing.TB, s *Subscriber) func(int) {
	base := s.Stats().Datagrams
	return func(sent int) {
		require.Eventually(t, func() bool { return s.Stats().Datagrams >= base+uint64(sent) }, waitFor, time.Millisecond)
	}
}

func TestIPv4Lo(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.7.2.1:31010")
	s, c := newSub(t, Config{Group: group})
	require.Equal(t, netip.AddrPortFrom(netip.IPv4Unspecified(), group.Port()), s.LocalAddr())
	pub := newTestPub(t, group, "lo", netip.MustParseAddr("127.0.0.1"), sessA)
	const n = 20000
	pub.send(pub.packets(n, 10), waitDatagrams(t, s))
	pub.send([][]byte{hb(sessA, pub.next), eos(sessA, pub.next)}, nil)
	id := pub.id()
	require.Eventually(t, func() bool { return c.count(id) == n }, waitFor, time.Millisecond)
	require.Eventually(t, func() bool { return s.Stats().StreamsEnded == 1 }, waitFor, time.Millisecond)
	c.check(t)
	c.mu.Lock()
	require.Equal(t, map[StreamID]wire.Seq{id: n + 1}, c.ends)
	require.Empty(t, c.gaps)
	c.mu.Unlock()

	st := s.Stats()
	require.EqualValues(t, n, st.Messages)
	require.EqualValues(t, n/10+2, st.Packets)
	require.EqualValues(t, 1, st.Heartbeats)
	require.Zero(t, st.Dropped)
	require.Zero(t, st.KernelDrops)
	require.Equal(t, DefaultReadBuffer, st.ReadBufferRequested)
	require.Positive(t, st.ReadBufferGranted)
	streams := s.Streams()
	require.Len(t, streams, 1)
	require.Equal(t, id, streams[0].ID)
	require.True(t, streams[0].Ended)
	require.Equal(t, wire.Seq(n+1), streams[0].Next)
}

// TestBusyPoll: a busy-polling subscriber delivers a paced stream whole
// and in order, and Close stops its spinning readers.
func TestBusyPoll(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.7.2.9:31019")
	s, c := newSub(t, Config{Group: group, Receive: Receive{BusyPoll: 2 * time.Millisecond}})
	pub := newTestPub(t, group, "lo", netip.MustParseAddr("127.0.0.1"), sessA)
	const n = 2000
	for _, dg := range pub.packets(n, 10) {
		pub.send([][]byte{dg}, nil)
		// Real time on purpose: busy polling spins on the socket across
		// quiet gaps on the wall clock, shorter than BusyPoll.
		time.Sleep(50 * time.Microsecond)
	}
	id := pub.id()
	require.Eventually(t, func() bool { return c.count(id) == n }, waitFor, time.Millisecond)
	c.check(t)
	require.Zero(t, s.Stats().Dropped)
	start := time.Now()
	require.NoError(t, s.Close())
	require.Less(t, time.Since(start), time.Second, "Close waits for the spinning readers")
}

func TestIPv6Veth(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("[ff15::7:1]:31011")
	s, c := newSub(t, Config{Group: group, Interface: netlab.VethA})
	pub := newTestPub(t, group, netlab.VethA, netip.MustParseAddr(netlab.IPv6A), sessA)
	const n = 2000
	pub.send(pub.packets(n, 20), waitDatagrams(t, s))
	id := pub.id()
	require.Eventually(t, func() bool { return c.count(id) == n }, waitFor, time.Millisecond)
	c.check(t)
	require.Zero(t, s.Stats().Dropped)
	require.Equal(t, netip.AddrPortFrom(netip.IPv6Unspecified(), group.Port()), s.LocalAddr())
}

func TestTwoSubscribersSamePort(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.7.2.2:31012")
	s1, c1 := newSub(t, Config{Group: group})
	s2, c2 := newSub(t, Config{Group: group})
	pub := newTestPub(t, group, "lo", netip.MustParseAddr("127.0.0.1"), sessA)
	const n = 3000
	w1, w2 := waitDatagrams(t, s1), waitDatagrams(t, s2)
	pub.send(pub.packets(n, 5), func(i int) { w1(i); w2(i) })
	for _, c := range []*collector{c1, c2} {
		require.Eventually(t, func() bool { return c.count(pub.id()) == n }, waitFor, time.Millisecond)
		c.check(t)
	}
}

// TestSamePortDifferentGroups: each subscriber gets only its own group,
// though both sockets are bound to the wildcard address and one port (Go
// issue 73484; IP_MULTICAST_ALL=0 and the destination check).
func TestSamePortDifferentGroups(t *testing.T) {
	netlab.Require(t)
	g1 := netip.MustParseAddrPort("239.7.2.3:31013")
	g2 := netip.MustParseAddrPort("239.7.2.4:31013")
	s1, c1 := newSub(t, Config{Group: g1})
	s2, c2 := newSub(t, Config{Group: g2})
	p1 := newTestPub(t, g1, "lo", netip.MustParseAddr("127.0.0.1"), sessA)
	p2 := newTestPub(t, g2, "lo", netip.MustParseAddr("127.0.0.1"), sessB)
	p1.send(p1.packets(500, 5), waitDatagrams(t, s1))
	p2.send(p2.packets(700, 5), waitDatagrams(t, s2))
	// Unicast to the shared port reaches one of the wildcard-bound
	// sockets; neither may take it for its group.
	u := newTestPub(t, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), g1.Port()), "lo", netip.MustParseAddr("127.0.0.1"), sessA)
	u.send([][]byte{pkt(sessA, 1, 1)}, nil)
	require.Eventually(t, func() bool {
		return s1.Stats().Drops[DropWrongGroup]+s2.Stats().Drops[DropWrongGroup] == 1
	}, waitFor, time.Millisecond)
	require.Eventually(t, func() bool { return c1.count(p1.id()) == 500 && c2.count(p2.id()) == 700 }, waitFor, time.Millisecond)
	require.Equal(t, map[StreamID]int{p1.id(): 500}, c1.streams())
	require.Equal(t, map[StreamID]int{p2.id(): 700}, c2.streams())
	c1.check(t)
	c2.check(t)
	t.Logf("wrong-group drops: %d and %d (1 is the unicast datagram)",
		s1.Stats().Drops[DropWrongGroup], s2.Stats().Drops[DropWrongGroup])
}

func TestSSM(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("232.7.2.5:31014")
	ssm, cs := newSub(t, Config{Group: group, Source: netip.MustParseAddr("127.0.0.2")})
	asm, ca := newSub(t, Config{Group: group})
	p1 := newTestPub(t, group, "lo", netip.MustParseAddr("127.0.0.1"), sessA)
	p2 := newTestPub(t, group, "lo", netip.MustParseAddr("127.0.0.2"), sessB)
	wa := waitDatagrams(t, asm)
	p1.send(p1.packets(300, 3), func(i int) { wa(i) })
	p2.send(p2.packets(400, 4), func(i int) { wa(100 + i) })
	require.Eventually(t, func() bool { return ca.count(p1.id()) == 300 && ca.count(p2.id()) == 400 }, waitFor, time.Millisecond)
	require.Eventually(t, func() bool { return cs.count(p2.id()) == 400 }, waitFor, time.Millisecond)
	require.Equal(t, map[StreamID]int{p2.id(): 400}, cs.streams())
	require.Equal(t, netip.MustParseAddr("127.0.0.2"), p2.id().Source.Addr())
	cs.check(t)
	ca.check(t)
	require.Zero(t, ssm.Stats().Dropped)
}

func TestTwoSessionsOneGroup(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.7.2.6:31015")
	// A's gap is held until its "repair" comes, however long a loaded host
	// takes to get there: without a deadline it would be given up after
	// DefaultReorderWindow (20 ms) of wall-clock time.
	s, c := newSub(t, Config{Group: group, Recovery: Recovery{NAK: nak.Config{Deadline: time.Minute}}})
	pa := newTestPub(t, group, "lo", netip.MustParseAddr("127.0.0.1"), sessA)
	pb := newTestPub(t, group, "lo", netip.MustParseAddr("127.0.0.1"), sessB)
	w := waitDatagrams(t, s)
	sent := 0
	pace := func(n int) func(int) { base := sent; sent += n; return func(i int) { w(base + i) } }
	a := pa.packets(100, 5)
	pa.send(a[:1], pace(1))
	pb.send(pb.packets(50, 5), pace(10))
	pa.send(a[2:], pace(len(a)-2)) // a[1] lost: A stalls, B does not
	pb.send(pb.packets(50, 5), pace(10))
	require.Eventually(t, func() bool { return c.count(pb.id()) == 100 }, waitFor, time.Millisecond)
	require.Equal(t, 5, c.count(pa.id()))
	c.mu.Lock()
	require.Equal(t, []Gap{{pa.id(), 6, 11}}, c.gaps)
	c.mu.Unlock()
	pa.send(a[1:2], pace(1)) // the repair
	require.Eventually(t, func() bool { return c.count(pa.id()) == 100 }, waitFor, time.Millisecond)
	c.check(t)
	st := s.Stats()
	require.Equal(t, 2, st.Streams)
	require.EqualValues(t, 1, st.Gaps)
	require.EqualValues(t, 5, st.GapMessages)
	require.Equal(t, 18, st.HeldMax)
	require.Zero(t, st.SessionChanges)
	delivered := map[StreamID]uint64{}
	for _, ss := range s.Streams() {
		delivered[ss.ID] = ss.Delivered
	}
	require.Equal(t, map[StreamID]uint64{pa.id(): 100, pb.id(): 100}, delivered)
}

func TestReadBufferGranted(t *testing.T) {
	netlab.Require(t)
	for _, tc := range []struct {
		name    string
		request int
		capped  bool
	}{
		{"fits", 64 << 10, false},
		{"capped", 1 << 30, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, nil))
			s, _ := newSub(t, Config{Group: netip.MustParseAddrPort("239.7.2.7:31016"), Receive: Receive{ReadBuffer: tc.request}, Logger: logger})
			st := s.Stats()
			require.Equal(t, tc.request, st.ReadBufferRequested)
			if tc.capped {
				require.Less(t, st.ReadBufferGranted, 2*tc.request)
				require.Contains(t, logs.String(), "capped the receive buffer")
				require.Contains(t, logs.String(), "level=WARN")
			} else {
				require.Equal(t, 2*tc.request, st.ReadBufferGranted, "the kernel doubles the request")
				require.Empty(t, logs.String())
			}
			t.Logf("requested %d, granted %d", st.ReadBufferRequested, st.ReadBufferGranted)
		})
	}
}

func TestCloseTwice(t *testing.T) {
	netlab.Require(t)
	s, err := New(Config{Group: netip.MustParseAddrPort("239.7.2.8:31017"), Logger: discard})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Close(), ErrClosed)
	require.Zero(t, s.Stats().Datagrams) // still readable
}

// TestTimerAlarmIsPrecise: New gives the NAK timer goroutine the kernel's
// timer beside the Go timer on Linux (internal/alarm; a Go timer alone
// woke a 100 µs NAK delay a millisecond late), and Close stops it.
func TestTimerAlarmIsPrecise(t *testing.T) {
	netlab.Require(t)
	s, err := New(Config{Group: netip.MustParseAddrPort("239.7.2.9:31018"), Logger: discard,
		Recovery: Recovery{Retransmitter: repairer}})
	require.NoError(t, err)
	if runtime.GOOS == "linux" {
		require.True(t, s.c.alarm.Precise(), "the NAK timer has the kernel's timer")
	}
	require.NoError(t, s.Close())
	require.False(t, s.c.alarm.Wait(), "Close closed the alarm")
}

// failing is a socket whose reads fail after the first: the error stops the
// receive loop and Close returns it.
// failing is a socket whose reads after the first fail, the first
// `fails` times with errBoom, then with net.ErrClosed when closeAfter.
type failing struct {
	sock.PacketConn
	fails      int
	closeAfter bool
	mu         sync.Mutex
	reads      int
}

var errBoom = errors.New("boom")

func (f *failing) ReadBatch(b *sock.Batch) (int, error) {
	f.mu.Lock()
	f.reads++
	n := f.reads
	f.mu.Unlock()
	switch {
	case n == 1:
		return f.PacketConn.ReadBatch(b)
	case n <= 1+f.fails:
		return 0, errBoom
	case f.closeAfter:
		return 0, net.ErrClosed
	}
	return f.PacketConn.ReadBatch(b)
}

// TestReceiveErrorSurfaced: a failing read is counted, kept for Err,
// passed to OnError and retried; the socket is read again once it works.
// (Before, the loop logged the error and stopped reading for good while
// Stats looked healthy.)
func TestReceiveErrorSurfaced(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.7.2.9:31018")
	var mu sync.Mutex
	var seen []error
	s, err := New(Config{Group: group,
		Wrap: func(pc packetconn.PacketConn) packetconn.PacketConn { return &failing{PacketConn: pc, fails: 3} },
		OnError: func(err error) {
			mu.Lock()
			seen = append(seen, err)
			mu.Unlock()
		}})
	require.NoError(t, err)
	pub := newTestPub(t, group, "lo", netip.MustParseAddr("127.0.0.1"), sessA)
	pub.send(pub.packets(1, 1), nil)
	require.Eventually(t, func() bool { return s.Stats().ReadErrors == 3 }, waitFor, time.Millisecond)
	require.ErrorIs(t, s.Err(), errBoom)
	pub.send(pub.packets(1, 1), nil) // read after the retries
	require.Eventually(t, func() bool { return s.Stats().Messages == 2 }, waitFor, time.Millisecond)
	st := s.Stats()
	require.EqualValues(t, 3, st.ReadErrors)
	require.Zero(t, st.ReadersStopped)
	mu.Lock()
	require.Len(t, seen, 3)
	mu.Unlock()
	require.ErrorIs(t, s.Close(), errBoom, "Close returns the first read error")
	require.ErrorIs(t, s.Close(), ErrClosed)
}

// TestReceiveSocketClosedStops: a socket closed under the subscriber
// stops its reader, and says so.
func TestReceiveSocketClosedStops(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.7.2.9:31019")
	s, err := New(Config{Group: group,
		Wrap: func(pc packetconn.PacketConn) packetconn.PacketConn {
			return &failing{PacketConn: pc, closeAfter: true}
		}})
	require.NoError(t, err)
	pub := newTestPub(t, group, "lo", netip.MustParseAddr("127.0.0.1"), sessA)
	pub.send(pub.packets(1, 1), nil)
	select {
	case <-s.done:
	case <-time.After(waitFor):
		t.Fatal("the reader of a closed socket did not stop")
	}
	st := s.Stats()
	require.EqualValues(t, 1, st.ReadersStopped)
	require.EqualValues(t, 1, st.ReadErrors)
	require.ErrorIs(t, s.Err(), net.ErrClosed)
	require.EqualValues(t, 1, st.Messages)
	require.ErrorIs(t, s.Close(), net.ErrClosed)
}

// dropOne is a socket that loses the k-th datagram it reads.
type dropOne struct {
	sock.PacketConn
	k, seen int
}

func (d *dropOne) ReadBatch(b *sock.Batch) (int, error) {
	n, err := d.PacketConn.ReadBatch(b)
	out := 0
	for i := range n {
		d.seen++
		if d.seen == d.k {
			continue
		}
		b.Msgs[out] = b.Msgs[i]
		out++
	}
	return out, err
}

func TestWrapLoss(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.7.2.10:31019")
	s, c := newSub(t, Config{Group: group, Wrap: func(pc sock.PacketConn) sock.PacketConn {
		return &dropOne{PacketConn: pc, k: 3}
	}})
	pub := newTestPub(t, group, "lo", netip.MustParseAddr("127.0.0.1"), sessA)
	dgs := pub.packets(50, 5)
	pub.send(dgs, nil)
	require.Eventually(t, func() bool { return s.Stats().Gaps == 1 }, waitFor, time.Millisecond)
	c.mu.Lock()
	require.Equal(t, []Gap{{pub.id(), 11, 16}}, c.gaps)
	c.mu.Unlock()
	require.Equal(t, 10, c.count(pub.id()))
	pub.send(dgs[2:3], nil) // the repair
	require.Eventually(t, func() bool { return c.count(pub.id()) == 50 }, waitFor, time.Millisecond)
	c.check(t)
}

// TestConfigZeroAndNegative pins the rule stated on Config: zero is the
// default, and negative is "none" for the fields that say so.
func TestConfigZeroAndNegative(t *testing.T) {
	g := netip.MustParseAddrPort("239.1.1.1:5000")
	c, err := Config{Group: g}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, Receive{
		ReadBuffer: DefaultReadBuffer, BatchSize: DefaultBatchSize, DatagramSize: DefaultDatagramSize,
		ReorderPackets: DefaultReorderPackets, ReorderBytes: DefaultReorderBytes,
	}, c.Receive)
	require.Equal(t, Limits{
		MaxStreams: DefaultMaxStreams, MaxStreamsPerSource: DefaultMaxStreamsPerSource,
		StreamIdleTimeout: DefaultStreamIdleTimeout, MaxGap: DefaultMaxGap,
	}, c.Limits)
	require.Equal(t, DefaultInterface, c.Interface)
	require.Equal(t, 5*nak.DefaultRetry, c.Recovery.Failover)

	c, err = Config{Group: g,
		Receive: Receive{ReorderPackets: -1, ReorderBytes: -1},
		Limits:  Limits{MaxStreamsPerSource: -1, StreamIdleTimeout: -1},
	}.withDefaults()
	require.NoError(t, err)
	require.Zero(t, c.Receive.ReorderPackets, "negative: none held")
	require.Zero(t, c.Receive.ReorderBytes, "negative: no byte bound")
	require.Zero(t, c.Limits.MaxStreamsPerSource, "negative: no per-source bound")
	require.Zero(t, c.Limits.StreamIdleTimeout, "negative: never expires")
}

func TestConfigErrors(t *testing.T) {
	g := netip.MustParseAddrPort("239.1.1.1:5000")
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no-group", Config{}},
		{"unicast-group", Config{Group: netip.MustParseAddrPort("127.0.0.1:5000")}},
		{"no-port", Config{Group: netip.MustParseAddrPort("239.1.1.1:0")}},
		{"source-family", Config{Group: netip.MustParseAddrPort("239.1.1.1:5000"), Source: netip.MustParseAddr("fd77::1")}},
		{"secondary-unicast", Config{Group: g, Secondary: netip.MustParseAddrPort("127.0.0.1:5001")}},
		{"secondary-is-group", Config{Group: g, Secondary: g}},
		{"secondary-source-alone", Config{Group: g, SecondarySource: netip.MustParseAddr("127.0.0.1")}},
		{"secondary-source-family", Config{Group: g, Secondary: netip.MustParseAddrPort("239.1.1.2:5000"), SecondarySource: netip.MustParseAddr("fd77::1")}},
		{"repair-group-unicast", Config{Group: g, Recovery: Recovery{RepairGroup: netip.MustParseAddrPort("127.0.0.1:5002")}}},
		{"repair-group-is-group", Config{Group: g, Recovery: Recovery{RepairGroup: g}}},
		{"repair-group-is-secondary", Config{Group: g, Secondary: netip.MustParseAddrPort("239.1.1.2:5000"), Recovery: Recovery{RepairGroup: netip.MustParseAddrPort("239.1.1.2:5000")}}},
		{"retransmitter-multicast", Config{Group: g, Recovery: Recovery{Retransmitter: netip.MustParseAddrPort("239.1.1.3:5000")}}},
		{"retransmitter-unspecified", Config{Group: g, Recovery: Recovery{Retransmitter: netip.MustParseAddrPort("0.0.0.0:5000")}}},
		{"retransmitter-no-port", Config{Group: g, Recovery: Recovery{Retransmitter: netip.MustParseAddrPort("127.0.0.1:0")}}},
		{"backups-without-retransmitter", Config{Group: g, Recovery: Recovery{Backups: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:5000")}}}},
		{"backup-multicast", Config{Group: g, Recovery: Recovery{Retransmitter: netip.MustParseAddrPort("127.0.0.1:5000"), Backups: []netip.AddrPort{netip.MustParseAddrPort("239.1.1.3:5000")}}}},
		{"backup-no-port", Config{Group: g, Recovery: Recovery{Retransmitter: netip.MustParseAddrPort("127.0.0.1:5000"), Backups: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.2:0")}}}},
		{"backup-invalid", Config{Group: g, Recovery: Recovery{Retransmitter: netip.MustParseAddrPort("127.0.0.1:5000"), Backups: []netip.AddrPort{{}}}}},
		{"backup-family", Config{Group: g, Recovery: Recovery{Retransmitter: netip.MustParseAddrPort("127.0.0.1:5000"), Backups: []netip.AddrPort{netip.MustParseAddrPort("[::1]:5000")}}}},
		{"backup-is-retransmitter", Config{Group: g, Recovery: Recovery{Retransmitter: netip.MustParseAddrPort("127.0.0.1:5000"), Backups: []netip.AddrPort{netip.MustParseAddrPort("[::ffff:127.0.0.1]:5000")}}}},
		{"backup-twice", Config{Group: g, Recovery: Recovery{Retransmitter: netip.MustParseAddrPort("127.0.0.1:5000"), Backups: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.2:5000"), netip.MustParseAddrPort("127.0.0.2:5000")}}}},
		{"backups-too-many", Config{Group: g, Recovery: Recovery{Retransmitter: netip.MustParseAddrPort("127.0.0.1:5000"), Backups: make([]netip.AddrPort, MaxBackups+1)}}},
		{"failover-negative", Config{Group: g, Recovery: Recovery{Failover: -time.Millisecond}}},
		{"retransmit-port-and-retransmitter", Config{Group: g, Recovery: Recovery{RetransmitPort: 5000, Retransmitter: netip.MustParseAddrPort("127.0.0.1:5000")}}},
		{"retransmit-port-ab", Config{Group: g, Recovery: Recovery{RetransmitPort: 5000}, Secondary: netip.MustParseAddrPort("239.1.1.2:5000")}},
		{"loss-policy", Config{Group: g, Recovery: Recovery{LossPolicy: 7}}},
		{"busy-poll-negative", Config{Group: g, Receive: Receive{BusyPoll: -time.Microsecond}}},
		{"busy-poll-too-long", Config{Group: g, Receive: Receive{BusyPoll: MaxBusyPoll + 1}}},
		{"read-buffer-negative", Config{Group: g, Receive: Receive{ReadBuffer: -1}}},
		{"batch-size-negative", Config{Group: g, Receive: Receive{BatchSize: -1}}},
		{"datagram-size-negative", Config{Group: g, Receive: Receive{DatagramSize: -1}}},
		{"max-streams-negative", Config{Group: g, Limits: Limits{MaxStreams: -1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			require.ErrorIs(t, err, ErrConfig)
		})
	}
	t.Run("no-interface", func(t *testing.T) {
		_, err := New(Config{Group: netip.MustParseAddrPort("239.1.1.1:5000"), Interface: "nosuch0"})
		require.ErrorContains(t, err, "nosuch0")
	})
}
