package retransmit

import (
	"bytes"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// client is a requester: a socket that sends re-requests and reads the
// answers.
type client struct {
	t     *testing.T
	conn  *sock.Conn
	batch *sock.Batch
}

func newClient(t *testing.T, local string) *client {
	t.Helper()
	conn, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(netip.MustParseAddr(local), 0), ReadBuffer: 1 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return &client{t: t, conn: conn, batch: sock.NewBatch(64, wire.MaxPayloadSize)}
}

// joined returns a raw socket that joined group on ifname, as a subscriber
// of the repair group would.
func joined(t *testing.T, group netip.AddrPort, ifname string) *client {
	t.Helper()
	ifi, err := net.InterfaceByName(ifname)
	require.NoError(t, err)
	wild := netip.IPv4Unspecified()
	if group.Addr().Is6() {
		wild = netip.IPv6Unspecified()
	}
	conn, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(wild, group.Port()), ReusePort: true, ReadBuffer: 1 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	require.NoError(t, conn.Join(ifi, group.Addr(), netip.Addr{}))
	return &client{t: t, conn: conn, batch: sock.NewBatch(64, wire.MaxPayloadSize)}
}

func (c *client) send(to netip.AddrPort, b []byte) {
	c.t.Helper()
	require.NoError(c.t, c.conn.WriteTo(b, to))
}

func (c *client) ask(to netip.AddrPort, s wire.Session, seq wire.Seq, count uint16) {
	c.t.Helper()
	c.send(to, request(s, seq, count))
}

// answer is what a client read: messages by sequence, packets and where
// they came from.
type answer struct {
	msgs    map[wire.Seq][]byte
	packets int
	from    []netip.AddrPort
	first   wire.Seq
	// confirms are the NAK confirms read among the packets.
	confirms []wire.Confirm
}

// read collects answer packets until it holds want messages or timeout
// passes without one arriving.
func (c *client) read(want int, timeout time.Duration) answer {
	c.t.Helper()
	a := answer{msgs: map[wire.Seq][]byte{}}
	for len(a.msgs) < want {
		require.NoError(c.t, c.conn.SetReadDeadline(time.Now().Add(timeout)))
		n, err := c.conn.ReadBatch(c.batch)
		if sock.IsTimeout(err) {
			break
		}
		require.NoError(c.t, err)
		for i := range n {
			m := &c.batch.Msgs[i]
			if cf, err := wire.ParseConfirm(m.Buf); err == nil {
				a.confirms = append(a.confirms, cf)
				continue
			}
			pkt, err := wire.ParsePacket(m.Buf)
			require.NoError(c.t, err)
			if a.packets == 0 {
				a.first = pkt.Seq
			}
			a.packets++
			a.from = append(a.from, m.Addr)
			for it := pkt.Messages(); ; {
				msg, seq, ok := it.Next()
				if !ok {
					break
				}
				a.msgs[seq] = bytes.Clone(msg)
			}
		}
	}
	return a
}

// requireMessages asserts that a holds exactly [from, to) with the testMsg
// contents of size.
func requireMessages(t *testing.T, a answer, from, to wire.Seq, size int) {
	t.Helper()
	require.Len(t, a.msgs, int(to-from))
	for q := from; q < to; q++ {
		require.Equal(t, testMsg(q, size), a.msgs[q], "seq %d", q)
	}
}

func startServer(t *testing.T, cfg ServerConfig) *Server {
	t.Helper()
	s, err := NewServer(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// waitStats waits (at most 5 s) until cond holds for the server's stats.
func waitStats(t *testing.T, s *Server, cond func(ServerStats) bool) ServerStats {
	t.Helper()
	var st ServerStats
	if !assert.Eventually(t, func() bool { st = s.Stats(); return cond(st) }, 5*time.Second, time.Millisecond) {
		t.Fatalf("stats condition not met in time: %+v", st)
	}
	return st
}

func cachedSession(t *testing.T, name string, from, to wire.Seq, size int, cfg CacheConfig) (*Cache, wire.Session) {
	s := mustSession(t, name)
	c := NewCache(cfg)
	fill(c, s, from, to, size)
	return c, s
}

func TestServerAnswers(t *testing.T) {
	netlab.Require(t)
	for _, tc := range []struct{ name, listen, client string }{
		{"ipv4-loopback", "127.0.0.1", "127.0.0.1"},
		{"ipv6-loopback", "::1", "::1"},
		{"ipv6-veth", netlab.IPv6A, netlab.IPv6B},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, s := cachedSession(t, "ANS", 1, 3001, 300, CacheConfig{})
			srv := startServer(t, ServerConfig{Listen: netip.AddrPortFrom(netip.MustParseAddr(tc.listen), 0), Sources: []Source{c}, MaxRequestBytes: 1 << 20})
			cl := newClient(t, tc.client)
			cl.ask(srv.Addr(), s, 100, 500)
			a := cl.read(500, 2*time.Second)
			requireMessages(t, a, 100, 600, 300)
			for _, from := range a.from {
				require.Equal(t, srv.Addr(), sock.Unmap(from))
			}
			st := waitStats(t, srv, func(st ServerStats) bool { return st.UnicastPackets == uint64(a.packets) })
			require.EqualValues(t, 1, st.Requests)
			require.EqualValues(t, 1, st.Answered)
			require.EqualValues(t, 500, st.Messages)
			require.Zero(t, st.Refused.Total())
			require.Positive(t, st.UnicastBytes)
		})
	}
}

func TestServerRanges(t *testing.T) {
	netlab.Require(t)
	// The cache holds [101, 201) of 200 messages sent.
	c, s := cachedSession(t, "RANGE", 1, 201, 100, CacheConfig{MaxMessages: 100})
	srv := startServer(t, ServerConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"), Sources: []Source{c}, MaxPerRequest: 300, MaxRequestBytes: 1 << 20})
	cl := newClient(t, "127.0.0.1")
	for i, tc := range []struct {
		name     string
		seq      wire.Seq
		count    uint16
		from, to wire.Seq // expected answer; from == to: none
	}{
		{"inside", 120, 10, 120, 130},
		{"beyond-the-end", 190, 50, 190, 201},
		{"before-the-start", 50, 60, 101, 110},
		{"covering", 1, 300, 101, 201},
		{"all-evicted", 1, 100, 0, 0},
		{"future", 201, 10, 0, 0},
		{"far-future", 1 << 40, 10, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := srv.Stats()
			cl.ask(srv.Addr(), s, tc.seq, tc.count)
			st := waitStats(t, srv, func(st ServerStats) bool { return st.Requests == uint64(i+1) })
			if tc.from == tc.to {
				// Requests is counted before the verdict: wait for it too.
				st = waitStats(t, srv, func(st ServerStats) bool { return st.Refused.OutOfRange > before.Refused.OutOfRange })
				require.Equal(t, before.Refused.OutOfRange+1, st.Refused.OutOfRange)
				return
			}
			a := cl.read(int(tc.to-tc.from), 2*time.Second)
			requireMessages(t, a, tc.from, tc.to, 100)
			require.Equal(t, before.Answered+1, st.Answered)
			if int(tc.to-tc.from) < int(tc.count) {
				require.Equal(t, before.Partial+1, st.Partial)
			}
		})
	}
}

func TestServerBadRequests(t *testing.T) {
	netlab.Require(t)
	c, s := cachedSession(t, "BAD", 1, 1001, 100, CacheConfig{})
	srv := startServer(t, ServerConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"), Sources: []Source{c}, MaxPerRequest: 50, MaxRequestBytes: 1 << 20})
	cl := newClient(t, "127.0.0.1")
	badSession := request(s, 1, 1)
	badSession[3] = 0x01
	for i, tc := range []struct {
		name    string
		b       []byte
		counter func(ServerStats) uint64
	}{
		{"empty", []byte{}, func(st ServerStats) uint64 { return st.Refused.RequestLen }},
		{"short", request(s, 1, 1)[:19], func(st ServerStats) uint64 { return st.Refused.RequestLen }},
		{"long", append(request(s, 1, 1), 0), func(st ServerStats) uint64 { return st.Refused.RequestLen }},
		{"huge-datagram", make([]byte, 9000), func(st ServerStats) uint64 { return st.Refused.RequestLen }},
		{"bad-session", badSession, func(st ServerStats) uint64 { return st.Refused.BadSession }},
		{"zero-seq", request(s, 0, 5), func(st ServerStats) uint64 { return st.Refused.ZeroSeq }},
		{"zero-count", request(s, 5, 0), func(st ServerStats) uint64 { return st.Refused.ZeroCount }},
		{"end-of-session-count", request(s, 5, 0xFFFF), func(st ServerStats) uint64 { return st.Refused.ZeroCount }},
		{"seq-overflow", request(s, 1<<64-3, 10), func(st ServerStats) uint64 { return st.Refused.SeqOverflow }},
		{"unknown-session", request(mustSession(t, "NOSUCH"), 1, 5), func(st ServerStats) uint64 { return st.Refused.UnknownSession }},
		{"out-of-range", request(s, 5000, 5), func(st ServerStats) uint64 { return st.Refused.OutOfRange }},
		{"count-beyond-cap", request(s, 1, 1000), func(st ServerStats) uint64 { return st.Capped }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.counter(srv.Stats())
			cl.send(srv.Addr(), tc.b)
			// A range past what the cache holds is held for a moment
			// (it may be about to arrive), then refused.
			waitStats(t, srv, func(st ServerStats) bool {
				return st.Requests == uint64(i+1) && tc.counter(st) == before+1
			})
		})
	}
	// Only the capped request was answered, with MaxPerRequest messages:
	// the first answer the client reads is exactly that.
	a := cl.read(50, 2*time.Second)
	requireMessages(t, a, 1, 51, 100)
	st := srv.Stats()
	require.EqualValues(t, 1, st.Answered)
	require.EqualValues(t, 11, st.Refused.Total())
	require.EqualValues(t, 9, st.Refused.Malformed())
	a = cl.read(1, 100*time.Millisecond)
	require.Empty(t, a.msgs, "nothing else was answered")
}

func TestServerAllowList(t *testing.T) {
	netlab.Require(t)
	c, s := cachedSession(t, "ALLOW", 1, 101, 100, CacheConfig{})
	srv := startServer(t, ServerConfig{
		Listen:  netip.MustParseAddrPort("127.0.0.1:0"),
		Sources: []Source{c},
		Allow:   []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32"), netip.MustParsePrefix("10.0.0.0/8")},
	})
	denied, allowed := newClient(t, "127.0.0.1"), newClient(t, "127.0.0.2")
	denied.ask(srv.Addr(), s, 1, 10)
	waitStats(t, srv, func(st ServerStats) bool { return st.Refused.NotAllowed == 1 })
	allowed.ask(srv.Addr(), s, 1, 10)
	requireMessages(t, allowed.read(10, 2*time.Second), 1, 11, 100)
	require.Empty(t, denied.read(1, 100*time.Millisecond).msgs)
	st := srv.Stats()
	require.EqualValues(t, 1, st.Answered)
	require.EqualValues(t, 1, st.Refused.Total())
}

func TestServerCoalescing(t *testing.T) {
	netlab.Require(t)
	const window = 2 * time.Second // long: the test must not race the clock
	t.Run("repair-group", func(t *testing.T) {
		c, s := cachedSession(t, "COAL", 1, 101, 100, CacheConfig{})
		group := netip.MustParseAddrPort("239.77.0.1:31001")
		sub := joined(t, group, "lo")
		srv := startServer(t, ServerConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"), Sources: []Source{c},
			RepairGroup: group, CoalesceWindow: window, UnicastFirst: true})
		a, b, x := newClient(t, "127.0.0.1"), newClient(t, "127.0.0.2"), newClient(t, "127.0.0.3")
		a.ask(srv.Addr(), s, 10, 20)
		requireMessages(t, a.read(20, 2*time.Second), 10, 30, 100) // first: unicast, at once
		b.ask(srv.Addr(), s, 10, 20)                               // second requester: once, multicast
		requireMessages(t, sub.read(20, 2*time.Second), 10, 30, 100)
		x.ask(srv.Addr(), s, 10, 20) // third: coalesced
		a.ask(srv.Addr(), s, 10, 20) // first again: coalesced
		st := waitStats(t, srv, func(st ServerStats) bool { return st.Requests == 4 })
		require.EqualValues(t, 2, st.Coalesced)
		require.Zero(t, st.Refused.Total())
		require.EqualValues(t, 2, st.Answered)
		require.Positive(t, st.UnicastPackets)
		require.Positive(t, st.MulticastPackets)
		require.Empty(t, b.read(1, 50*time.Millisecond).msgs, "b is served by the group")
		require.Empty(t, sub.read(1, 50*time.Millisecond).msgs, "one multicast answer")
		// A different range is not coalesced.
		x.ask(srv.Addr(), s, 10, 21)
		requireMessages(t, x.read(21, 2*time.Second), 10, 31, 100)
	})
	t.Run("repair-group-default", func(t *testing.T) {
		// By default the first answer goes to the group, with a confirm
		// that names the range and the requesters heard; a second
		// requester within the window is served by it.
		c, s := cachedSession(t, "COAL", 1, 101, 100, CacheConfig{})
		group := netip.MustParseAddrPort("239.77.0.3:31001")
		sub := joined(t, group, "lo")
		srv := startServer(t, ServerConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"), Sources: []Source{c},
			RepairGroup: group, CoalesceWindow: window})
		a, b := newClient(t, "127.0.0.1"), newClient(t, "127.0.0.2")
		a.ask(srv.Addr(), s, 10, 20)
		got := sub.read(20, 2*time.Second)
		requireMessages(t, got, 10, 30, 100)
		if len(got.confirms) == 0 { // the confirm follows the answer
			got.confirms = sub.read(1, 200*time.Millisecond).confirms
		}
		require.Len(t, got.confirms, 1)
		cf := got.confirms[0]
		require.Equal(t, wire.Confirm{Session: s, Seq: 10, Count: 20, Kind: wire.ConfirmSending, Group: 1}, cf)
		b.ask(srv.Addr(), s, 10, 20)
		st := waitStats(t, srv, func(st ServerStats) bool { return st.Requests == 2 })
		require.EqualValues(t, 1, st.Coalesced)
		require.EqualValues(t, 1, st.Answered)
		require.Zero(t, st.UnicastPackets)
		require.EqualValues(t, 1, st.Confirms)
		require.Empty(t, a.read(1, 50*time.Millisecond).msgs, "nothing unicast")
		require.Empty(t, sub.read(1, 50*time.Millisecond).msgs, "one multicast answer")
		// Two requesters heard: the next confirm says so.
		b.ask(srv.Addr(), s, 40, 5)
		got = sub.read(5, 2*time.Second)
		if len(got.confirms) == 0 {
			got.confirms = sub.read(1, 200*time.Millisecond).confirms
		}
		require.Len(t, got.confirms, 1)
		require.EqualValues(t, 2, got.confirms[0].Group)
	})
	t.Run("unicast-only", func(t *testing.T) {
		c, s := cachedSession(t, "COAL", 1, 101, 100, CacheConfig{})
		srv := startServer(t, ServerConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"), Sources: []Source{c}, CoalesceWindow: window})
		a, b := newClient(t, "127.0.0.1"), newClient(t, "127.0.0.2")
		for range 5 { // a flood of identical requests from one requester
			a.ask(srv.Addr(), s, 40, 10)
		}
		b.ask(srv.Addr(), s, 40, 10) // another requester still gets its answer
		requireMessages(t, a.read(10, 2*time.Second), 40, 50, 100)
		requireMessages(t, b.read(10, 2*time.Second), 40, 50, 100)
		st := waitStats(t, srv, func(st ServerStats) bool { return st.Requests == 6 })
		require.EqualValues(t, 4, st.Coalesced)
		require.EqualValues(t, 2, st.Answered)
		require.Empty(t, a.read(1, 50*time.Millisecond).msgs, "answered once")
	})
}

func TestServerMulticastRepair(t *testing.T) {
	netlab.Require(t)
	for _, tc := range []struct {
		name, listen, client, ifname string
		group                        netip.AddrPort
	}{
		{"ipv4-lo", "127.0.0.1", "127.0.0.2", "lo", netip.MustParseAddrPort("239.77.0.2:31002")},
		{"ipv6-veth", netlab.IPv6A, netlab.IPv6B, netlab.VethA, netip.MustParseAddrPort("[ff15::77:2]:31003")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, s := cachedSession(t, "MCAST", 1, 1001, 500, CacheConfig{})
			sub := joined(t, tc.group, tc.ifname)
			srv := startServer(t, ServerConfig{Listen: netip.AddrPortFrom(netip.MustParseAddr(tc.listen), 0), Sources: []Source{c}, MaxRequestBytes: 1 << 20,
				RepairGroup: tc.group, Interface: tc.ifname, AlwaysMulticast: true, CoalesceWindow: 2 * time.Second})
			cl := newClient(t, tc.client)
			cl.ask(srv.Addr(), s, 1, 300)
			requireMessages(t, sub.read(300, 2*time.Second), 1, 301, 500)
			require.Empty(t, cl.read(1, 50*time.Millisecond).msgs, "nothing unicast")
			st := waitStats(t, srv, func(st ServerStats) bool { return st.MulticastPackets > 0 })
			require.Zero(t, st.UnicastPackets)
			require.EqualValues(t, 300, st.Messages)
			// An identical request within the window is coalesced.
			cl.ask(srv.Addr(), s, 1, 300)
			waitStats(t, srv, func(st ServerStats) bool { return st.Coalesced == 1 })
		})
	}
}

func TestServerRateLimit(t *testing.T) {
	netlab.Require(t)
	c, s := cachedSession(t, "RATE", 1, 1001, 100, CacheConfig{})
	// 1000 B/s and a bucket of one packet: the first request gets one
	// packet (truncated), the next is refused.
	srv := startServer(t, ServerConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"), Sources: []Source{c},
		RateBytes: 1000, RequesterRateBytes: 1000, CoalesceWindow: -1, MaxDeferred: -1})
	cl := newClient(t, "127.0.0.1")
	cl.ask(srv.Addr(), s, 1, 200)
	a := cl.read(200, 200*time.Millisecond)
	require.Equal(t, 1, a.packets)
	require.NotEmpty(t, a.msgs)
	cl.ask(srv.Addr(), s, 1, 200)
	st := waitStats(t, srv, func(st ServerStats) bool { return st.Requests == 2 })
	require.EqualValues(t, 1, st.Partial)
	require.EqualValues(t, 1, st.Refused.RateLimited)
	require.LessOrEqual(t, st.Bytes(), uint64(wire.DefaultPayloadSizeIPv4))
}

// TestServerHoldsBack: by default a request the buckets cannot pay for
// now is not refused but held, confirmed at once as "later" with the
// wait, and answered when the buckets refill, within their rates.
func TestServerHoldsBack(t *testing.T) {
	netlab.Require(t)
	c, s := cachedSession(t, "HOLD", 1, 1001, 100, CacheConfig{})
	const rate = 30_000 // bytes/s: a 1472-byte packet every 49 ms
	srv := startServer(t, ServerConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"), Sources: []Source{c},
		RateBytes: 1e6, RequesterRateBytes: rate, CoalesceWindow: -1})
	cl := newClient(t, "127.0.0.1")
	t0 := time.Now()
	for i := range 4 { // four full packets: the first is paid at once
		cl.ask(srv.Addr(), s, wire.Seq(1+100*i), 100)
	}
	a := cl.read(4*100, 2*time.Second)
	elapsed := time.Since(t0)
	require.Equal(t, 4, a.packets, "every request answered, one packet each")
	require.Len(t, a.confirms, 3, "the three held back are confirmed")
	for i, cf := range a.confirms {
		require.Equal(t, wire.ConfirmLater, cf.Kind)
		require.EqualValues(t, 1+100*(i+1), cf.Seq)
		require.Positive(t, cf.After)
	}
	// The buckets held: three more packets took about three packet times.
	require.Greater(t, elapsed, 100*time.Millisecond, "answered within the rate")
	st := waitStats(t, srv, func(st ServerStats) bool { return st.DeferredAnswered == 3 })
	require.EqualValues(t, 3, st.Deferred)
	require.Zero(t, st.Refused.Total())
	require.EqualValues(t, 4, st.Answered)
}

// countingConn counts what the server's sockets really send.
type countingConn struct {
	sock.PacketConn
	mu      sync.Mutex
	bytes   uint64
	packets uint64
	perAddr map[netip.Addr]uint64
	// confirms counts, per address, the bytes of confirms (wire.Confirm)
	// among perAddr's: they are paid from the global bucket only.
	confirms map[netip.Addr]uint64
}

func (c *countingConn) count(p []byte, to netip.Addr) {
	l := uint64(len(p))
	c.bytes += l
	c.packets++
	c.perAddr[to] += l
	if wire.IsConfirm(p) {
		if c.confirms == nil {
			c.confirms = map[netip.Addr]uint64{}
		}
		c.confirms[to] += l
	}
}

func (c *countingConn) WriteBatch(b *sock.Batch, n int) (int, error) {
	k, err := c.PacketConn.WriteBatch(b, n)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range k {
		c.count(b.Msgs[i].Buf, b.Msgs[i].Addr.Addr())
	}
	return k, err
}

func (c *countingConn) WriteTo(p []byte, to netip.AddrPort) error {
	err := c.PacketConn.WriteTo(p, to)
	if err == nil {
		c.mu.Lock()
		c.count(p, to.Addr())
		c.mu.Unlock()
	}
	return err
}

// TestServerFlood sends 100,000 bogus and hostile requests in one burst
// from many sources, then checks that the bytes the server sent stay
// within its bandwidth caps and that a legitimate requester still gets its
// answer.
func TestServerFlood(t *testing.T) {
	netlab.Require(t)
	const (
		total     = 100_000
		rate      = 1e6 // bytes/s, all repairs
		reqRate   = 3e5 // bytes/s per requester address
		burst     = 10 * time.Millisecond
		msgSize   = 100
		cacheMsgs = 10_000
	)
	c, s := cachedSession(t, "FLOOD", 1, cacheMsgs+1, msgSize, CacheConfig{})
	unknown := mustSession(t, "UNKNOWN")
	var counted []*countingConn
	var countMu sync.Mutex
	t0 := time.Now()
	srv, err := NewServer(ServerConfig{
		Listen:             netip.MustParseAddrPort("127.0.0.1:0"),
		Sources:            []Source{c},
		RepairGroup:        netip.MustParseAddrPort("239.77.0.3:31004"),
		UnicastFirst:       true, // the legitimate requester reads its answer unicast
		RateBytes:          rate,
		RequesterRateBytes: reqRate,
		Burst:              burst,
		ReadBuffer:         4 << 20,
		Wrap: func(pc sock.PacketConn) sock.PacketConn {
			cc := &countingConn{PacketConn: pc, perAddr: map[netip.Addr]uint64{}}
			countMu.Lock()
			counted = append(counted, cc)
			countMu.Unlock()
			return cc
		},
	})
	require.NoError(t, err)
	closed := false
	t.Cleanup(func() {
		if !closed {
			srv.Close()
		}
	})

	// The attackers: 32 sockets on 4 addresses, each a different port.
	var attackers []*sock.Conn
	for i := range 32 {
		conn, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, byte(1 + i%4)}), 0)})
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		attackers = append(attackers, conn)
	}
	rng := rand.New(rand.NewPCG(42, 42))
	hostile := func() []byte {
		switch r := rng.IntN(100); {
		case r < 20: // garbage of any length
			b := make([]byte, rng.IntN(64))
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			return b
		case r < 40: // huge ranges
			return request(s, wire.Seq(1+rng.IntN(cacheMsgs)), wire.MaxCount)
		case r < 60: // valid ranges
			return request(s, wire.Seq(1+rng.IntN(cacheMsgs)), uint16(1+rng.IntN(100)))
		case r < 70:
			return request(unknown, 1, 100)
		case r < 75:
			return request(s, 0, 10)
		case r < 80:
			return request(s, 10, 0)
		default: // the same request over and over
			return request(s, 500, 1000)
		}
	}
	batch := sock.NewBatch(64, 0)
	asked := map[netip.Addr]int{} // requests sent, per source address
	for sent := 0; sent < total; {
		conn := attackers[rng.IntN(len(attackers))]
		n := min(len(batch.Msgs), total-sent)
		for i := range n {
			batch.Msgs[i].Buf = hostile()
			batch.Msgs[i].Addr = srv.Addr()
		}
		k, err := conn.WriteBatch(batch, n)
		require.NoError(t, err)
		sent += k
		asked[conn.LocalAddr().Addr()] += k
	}
	floodSent := time.Since(t0)

	// The legitimate requester retries, boundedly, until it has its answer.
	legit := newClient(t, "127.0.0.200")
	got := map[wire.Seq][]byte{}
	tries := 0
	for ; tries < 100 && len(got) < 20; tries++ {
		legit.ask(srv.Addr(), s, 7000, 20)
		for q, m := range legit.read(20, 50*time.Millisecond).msgs {
			got[q] = m
		}
	}
	requireMessages(t, answer{msgs: got}, 7000, 7020, msgSize)
	asked[netip.MustParseAddr("127.0.0.200")] += tries
	legitDone := time.Since(t0)

	// Let the backlog drain (no request read for 100 ms, bounded by 5 s),
	// then stop and measure.
	drain := time.NewTicker(10 * time.Millisecond)
	defer drain.Stop()
	for last, still, end := srv.Stats().Requests, time.Now(), time.Now().Add(5*time.Second); time.Since(still) < 100*time.Millisecond && time.Now().Before(end); <-drain.C {
		if n := srv.Stats().Requests; n != last {
			last, still = n, time.Now()
		}
	}
	require.NoError(t, srv.Close())
	closed = true
	elapsed := time.Since(t0)
	st := srv.Stats()

	var sentBytes uint64
	perAddr, confirms := map[netip.Addr]uint64{}, map[netip.Addr]uint64{}
	for _, cc := range counted {
		sentBytes += cc.bytes
		for a, n := range cc.perAddr {
			perAddr[a] += n
		}
		for a, n := range cc.confirms {
			confirms[a] += n
		}
	}
	limit := rate * (elapsed + burst).Seconds()
	t.Logf("flood: %d requests sent in %v; legit answered after %d tries at %v; elapsed %v",
		total, floodSent, tries, legitDone, elapsed)
	t.Logf("server: %d requests read, %d dropped by the kernel, %d answered, refused %+v",
		st.Requests, st.KernelDrops, st.Answered, st.Refused)
	t.Logf("sent %d bytes (%d unicast packets, %d multicast); cap %.0f bytes", sentBytes, st.UnicastPackets, st.MulticastPackets, limit)
	require.LessOrEqual(t, float64(sentBytes), limit, "total bandwidth cap")
	require.Equal(t, sentBytes, st.Bytes(), "stats count what was sent")
	for a, n := range perAddr {
		if a.IsMulticast() {
			continue
		}
		// Multicast repairs are charged to requesters too, so the repairs
		// sent unicast to one address are within its own cap. Confirms
		// are paid from the global bucket only: at most one 30-byte
		// confirm per 20-byte request the address sent.
		c := confirms[a]
		t.Logf("%v: %d requests, %d repair bytes, %d confirm bytes", a, asked[a], n-c, c)
		require.LessOrEqual(t, float64(n-c), reqRate*(elapsed+burst).Seconds(), "per-requester cap for %v", a)
		require.LessOrEqual(t, c, uint64(asked[a])*wire.ConfirmLen, "confirms to %v", a)
	}
	require.Positive(t, st.Refused.Malformed())
	require.Positive(t, st.Refused.UnknownSession)
	require.Positive(t, st.Refused.RateLimited)
	require.Positive(t, st.Capped)
}

func TestServerClose(t *testing.T) {
	netlab.Require(t)
	c := NewCache(CacheConfig{})
	srv, err := NewServer(ServerConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"), Sources: []Source{c}})
	require.NoError(t, err)
	require.NoError(t, srv.Close())
	require.ErrorIs(t, srv.Close(), ErrClosed)
}

func TestServerConfigErrors(t *testing.T) {
	c := NewCache(CacheConfig{})
	listen := netip.MustParseAddrPort("127.0.0.1:0")
	for _, tc := range []struct {
		name string
		cfg  ServerConfig
	}{
		{"no-listen", ServerConfig{Sources: []Source{c}}},
		{"no-sources", ServerConfig{Listen: listen}},
		{"nil-source", ServerConfig{Listen: listen, Sources: []Source{nil}}},
		{"group-not-multicast", ServerConfig{Listen: listen, Sources: []Source{c}, RepairGroup: netip.MustParseAddrPort("10.0.0.1:5")}},
		{"group-without-port", ServerConfig{Listen: listen, Sources: []Source{c}, RepairGroup: netip.MustParseAddrPort("239.0.0.1:0")}},
		{"always-multicast-without-group", ServerConfig{Listen: listen, Sources: []Source{c}, AlwaysMulticast: true}},
		{"ttl", ServerConfig{Listen: listen, Sources: []Source{c}, TTL: 300}},
		{"payload", ServerConfig{Listen: listen, Sources: []Source{c}, PayloadSize: 10}},
		{"allow", ServerConfig{Listen: listen, Sources: []Source{c}, Allow: []netip.Prefix{{}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewServer(tc.cfg)
			require.ErrorIs(t, err, ErrConfig)
		})
	}
}

func TestReasonString(t *testing.T) {
	seen := map[string]bool{}
	for r := range numReasons {
		name := r.String()
		require.NotEqual(t, "unknown", name)
		require.False(t, seen[name], name)
		seen[name] = true
	}
	require.Equal(t, "unknown", numReasons.String())
}
