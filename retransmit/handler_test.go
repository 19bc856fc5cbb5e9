package retransmit

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// fakeConn is a PacketConn without a socket: it records what is written.
type fakeConn struct {
	packets, bytes int
	sent           []sentPacket // when keep is set
	keep           bool
	fail           func(to netip.AddrPort) bool // refuse datagrams to some addresses
}

type sentPacket struct {
	to  netip.AddrPort
	pkt []byte
}

func (f *fakeConn) ReadBatch(*sock.Batch) (int, error) { return 0, sock.ErrClosed }
func (f *fakeConn) WriteBatch(b *sock.Batch, n int) (int, error) {
	for i := range n {
		m := &b.Msgs[i]
		if f.fail != nil && f.fail(m.Addr) {
			return i, errRefused
		}
		f.packets++
		f.bytes += len(m.Buf)
		if f.keep {
			f.sent = append(f.sent, sentPacket{m.Addr, bytes.Clone(m.Buf)})
		}
	}
	return n, nil
}
func (f *fakeConn) WriteTo([]byte, netip.AddrPort) error { return nil }
func (f *fakeConn) SetReadDeadline(time.Time) error      { return nil }
func (f *fakeConn) LocalAddr() netip.AddrPort            { return netip.AddrPort{} }
func (f *fakeConn) Close() error                         { return nil }

var errRefused = &testError{"refused"}

type testError struct{ s string }

func (e *testError) Error() string { return e.s }

// testHandler returns a handler over fake connections.
func testHandler(t testing.TB, cfg ServerConfig) (*handler, *fakeConn, *fakeConn, *counters) {
	t.Helper()
	if !cfg.Listen.IsValid() {
		cfg.Listen = netip.MustParseAddrPort("127.0.0.1:1")
	}
	cfg, err := cfg.withDefaults()
	require.NoError(t, err)
	uni, multi := &fakeConn{keep: true}, &fakeConn{keep: true}
	var mc sock.PacketConn
	if cfg.RepairGroup.IsValid() {
		mc = multi
	}
	st := new(counters)
	return newHandler(cfg, uni, mc, st, nil), uni, multi, st
}

func request(s wire.Session, seq wire.Seq, count uint16) []byte {
	return wire.AppendRequest(nil, wire.Request{Session: s, Seq: seq, Count: count})
}

func TestHandlerSendErrorsSkipped(t *testing.T) {
	s := mustSession(t, "SKIP")
	c := NewCache(CacheConfig{})
	fill(c, s, 1, 101, 100)
	h, uni, _, st := testHandler(t, ServerConfig{Sources: []Source{c}, CoalesceWindow: -1})
	bad := netip.MustParseAddrPort("127.0.0.66:9")
	uni.fail = func(to netip.AddrPort) bool { return to == bad }
	now := monotime.Now()
	good := netip.MustParseAddrPort("127.0.0.1:9")
	h.handle(now, request(s, 1, 20), false, good)
	h.handle(now, request(s, 1, 20), false, bad)
	h.handle(now, request(s, 21, 20), false, good)
	h.flush()
	snap := st.snapshot()
	require.EqualValues(t, 3, snap.Answered)
	require.Positive(t, snap.SendErrors)
	for _, p := range uni.sent {
		require.Equal(t, good, p.to)
	}
	require.EqualValues(t, uni.packets, snap.UnicastPackets)
	require.EqualValues(t, uni.bytes, snap.UnicastBytes)
}

// failingSource knows every session and fails every read.
type failingSource struct{}

func (failingSource) Bounds(wire.Session) (wire.Seq, wire.Seq, bool) { return 1, 100, true }
func (failingSource) AppendPacket(dst []byte, _ wire.Session, _ wire.Seq, _, _ int) ([]byte, int, error) {
	return dst, 0, errRefused
}

func TestHandlerSources(t *testing.T) {
	s := mustSession(t, "SRC")
	from := netip.MustParseAddrPort("127.0.0.1:9")
	// messages returns the sequences and contents the handler sent.
	messages := func(sent []sentPacket) map[wire.Seq][]byte {
		got := map[wire.Seq][]byte{}
		for _, p := range sent {
			pkt, err := wire.ParsePacket(p.pkt)
			require.NoError(t, err)
			for it := pkt.Messages(); ; {
				msg, seq, ok := it.Next()
				if !ok {
					break
				}
				require.NotContains(t, got, seq, "sent twice")
				got[seq] = msg
			}
		}
		return got
	}
	t.Run("fallback-in-order", func(t *testing.T) {
		recent, _ := cachedSession(t, "SRC", 101, 201, 80, CacheConfig{}) // the cache
		older, _ := cachedSession(t, "SRC", 1, 150, 80, CacheConfig{})    // the journal
		h, uni, _, st := testHandler(t, ServerConfig{Sources: []Source{recent, older}, MaxRequestBytes: 1 << 20})
		h.handle(monotime.Now(), request(s, 50, 150), false, from)
		h.flush()
		got := messages(uni.sent)
		require.Len(t, got, 150)
		for q := wire.Seq(50); q < 200; q++ {
			require.Equal(t, testMsg(q, 80), got[q])
		}
		require.EqualValues(t, 1, st.snapshot().Answered)
	})
	t.Run("skip-to-held", func(t *testing.T) {
		a, _ := cachedSession(t, "SRC", 300, 310, 80, CacheConfig{})
		b, _ := cachedSession(t, "SRC", 100, 110, 80, CacheConfig{})
		h, uni, _, st := testHandler(t, ServerConfig{Sources: []Source{a, b}, MaxRequestBytes: 1 << 20})
		h.handle(monotime.Now(), request(s, 50, 300), false, from)
		h.flush()
		got := messages(uni.sent)
		require.Len(t, got, 20) // [100, 110) and [300, 310)
		require.Contains(t, got, wire.Seq(100))
		require.Contains(t, got, wire.Seq(309))
		require.EqualValues(t, 1, st.snapshot().Partial)
	})
	t.Run("source-error", func(t *testing.T) {
		h, uni, _, st := testHandler(t, ServerConfig{Sources: []Source{failingSource{}}})
		h.handle(monotime.Now(), request(s, 5, 5), false, from)
		h.flush()
		require.Empty(t, uni.sent)
		require.EqualValues(t, 1, st.snapshot().Refused.SourceError)
	})
	t.Run("too-large", func(t *testing.T) {
		c := NewCache(CacheConfig{})
		c.Add(s, 1, make([]byte, 1400))
		c.Add(s, 2, make([]byte, 1460)) // fits IPv4 payloads, not IPv6
		h, uni, _, st := testHandler(t, ServerConfig{Sources: []Source{c}, Listen: netip.MustParseAddrPort("[::1]:1")})
		h.handle(monotime.Now(), request(s, 2, 1), false, from)
		h.handle(monotime.Now(), request(s, 1, 2), false, from) // the first fits: partial
		h.flush()
		require.Len(t, messages(uni.sent), 1)
		snap := st.snapshot()
		require.EqualValues(t, 1, snap.Refused.TooLarge)
		require.EqualValues(t, 1, snap.Partial)
	})
}

func TestHandlerZeroAlloc(t *testing.T) {
	s := mustSession(t, "ZALLOC")
	c := NewCache(CacheConfig{})
	fill(c, s, 1, 2001, 100)
	h, uni, multi, _ := testHandler(t, ServerConfig{
		Sources: []Source{c}, CoalesceWindow: -1, RateBytes: 1e15, RequesterRateBytes: 1e15,
		RepairGroup: netip.MustParseAddrPort("239.1.1.1:5000"), MaxPerRequest: 1000,
	})
	uni.keep, multi.keep = false, false
	from := netip.MustParseAddrPort("127.0.0.1:4000")
	for _, tc := range []struct {
		name string
		req  []byte
	}{
		{"answer-100", request(s, 100, 100)},
		{"answer-1000", request(s, 1, 1000)},
		{"malformed", []byte("short")},
		{"unknown-session", request(mustSession(t, "NOPE"), 1, 1)},
		{"out-of-range", request(s, 5000, 10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			allocs := testing.AllocsPerRun(200, func() {
				h.handle(monotime.Now(), tc.req, false, from)
				h.flush()
			})
			require.Zero(t, allocs)
		})
	}
	t.Run("ipv6-requester", func(t *testing.T) {
		from6 := netip.MustParseAddrPort("[fd77::2]:4000")
		req := request(s, 100, 100)
		require.Zero(t, testing.AllocsPerRun(200, func() {
			h.handle(monotime.Now(), req, false, from6)
			h.flush()
		}))
	})
	t.Run("multicast", func(t *testing.T) {
		before := multi.packets
		req := request(s, 100, 100)
		require.Zero(t, testing.AllocsPerRun(200, func() {
			h.handle(monotime.Now(), req, false, from)
			h.flush()
		}))
		require.Greater(t, multi.packets, before)
	})
	t.Run("unicast-first", func(t *testing.T) {
		h.cfg.unicastFirst = true
		defer func() { h.cfg.unicastFirst = false }()
		before := uni.packets
		req := request(s, 100, 100)
		require.Zero(t, testing.AllocsPerRun(200, func() {
			h.handle(monotime.Now(), req, false, from)
			h.flush()
		}))
		require.Greater(t, uni.packets, before)
	})
}

// FuzzHandler feeds arbitrary datagrams from arbitrary sources to the
// request handler: it must not panic, must answer only valid requests,
// only to the source or the repair group, with packets that parse, carry
// only the range asked for and stay within the per-request caps.
func FuzzHandler(f *testing.F) {
	s := mustSession(f, "FUZZ")
	for _, seed := range [][]byte{
		request(s, 1, 1),
		request(s, 100, 50),
		request(s, 1, wire.MaxCount),
		request(s, 0, 5),
		request(s, 5, 0),
		request(s, 5, 0xFFFF),
		request(s, 1<<64-2, 5),
		request(mustSession(f, "OTHER"), 1, 5),
		append(request(s, 1, 1), 0),
		request(s, 1, 1)[:19],
		{},
		bytes.Repeat([]byte{0xFF}, 20),
	} {
		f.Add(seed, byte(1), uint16(4000), false)
	}
	f.Add(request(s, 10, 10), byte(0), uint16(0), false)
	f.Add(request(s, 10, 10), byte(2), uint16(1), true)

	c := NewCache(CacheConfig{MaxMessages: 4000})
	fill(c, s, 1, 5001, 200) // holds [1001, 5001)
	const maxPerRequest, maxRequestBytes = 500, 16 << 10
	group := netip.MustParseAddrPort("239.9.9.9:7000")
	sources := []netip.Addr{
		netip.MustParseAddr("0.0.0.0"),
		netip.MustParseAddr("127.0.0.1"),
		netip.MustParseAddr("10.0.0.1"),
		netip.MustParseAddr("::ffff:127.0.0.7"),
		netip.MustParseAddr("fd77::2"),
		netip.MustParseAddr("239.1.1.1"),
		netip.MustParseAddr("255.255.255.255"),
		netip.MustParseAddr("::"),
	}
	h, uni, multi, st := testHandler(f, ServerConfig{
		Sources: []Source{c}, RepairGroup: group, MaxPerRequest: maxPerRequest,
		MaxRequestBytes: maxRequestBytes, RateBytes: 1e9, RequesterRateBytes: 1e8,
		Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("fd77::/16")},
	})
	f.Fuzz(func(t *testing.T, b []byte, src byte, port uint16, truncated bool) {
		from := netip.AddrPortFrom(sources[int(src)%len(sources)], port)
		uni.sent, multi.sent = uni.sent[:0], multi.sent[:0]
		before := st.snapshot()
		h.handle(monotime.Now(), b, truncated, from)
		h.flush()
		after := st.snapshot()
		require.Equal(t, before.Requests+1, after.Requests)
		answered := after.Answered - before.Answered
		refused := after.Refused.Total() - before.Refused.Total()
		held := after.Deferred - before.Deferred
		coalesced := after.Coalesced - before.Coalesced
		told := after.ToldLater - before.ToldLater
		require.Equal(t, uint64(1), answered+refused+held+coalesced+told, "each request is answered, refused, held, coalesced or told later")
		if told == 1 {
			// Nothing but its confirm "later".
			require.Len(t, append(uni.sent, multi.sent...), 1)
		}

		req, err := wire.ParseRequest(b)
		if err == nil {
			require.Equal(t, b, wire.AppendRequest(nil, req), "round trip")
		}
		var sent []sentPacket
		for _, p := range append(uni.sent, multi.sent...) {
			if cf, err := wire.ParseConfirm(p.pkt); err == nil {
				// A confirm: of the request, to its requester or the group.
				require.True(t, p.to == from || p.to == group, "confirm to %v", p.to)
				require.Equal(t, req.Session, cf.Session)
				continue
			}
			sent = append(sent, p)
		}
		if len(sent) == 0 {
			return
		}
		require.NoError(t, err, "answered a malformed request")
		require.False(t, truncated)
		require.True(t, validSource(from.Addr().Unmap(), from.Port()))
		total := 0
		next := req.Seq
		for _, p := range sent {
			require.True(t, p.to == from || p.to == group, "answer to %v", p.to)
			require.LessOrEqual(t, len(p.pkt), wire.DefaultPayloadSizeIPv6+20)
			pkt, err := wire.ParsePacket(p.pkt)
			require.NoError(t, err)
			require.Equal(t, req.Session, pkt.Session)
			require.GreaterOrEqual(t, pkt.Seq, next)
			next = pkt.Next()
			total += len(p.pkt)
		}
		require.LessOrEqual(t, next-req.Seq, wire.Seq(min(int(req.Count), maxPerRequest)))
		require.LessOrEqual(t, total, maxRequestBytes)
		require.GreaterOrEqual(t, h.global.Tokens(), 0.0)
	})
}

func TestRequesterTableBounded(t *testing.T) {
	tab := newRequesterTable(64, 1000, 100)
	now := monotime.Time(1)
	a := netip.MustParseAddr("10.0.0.1")
	ba := tab.get(now, a)
	ba.Take(100)
	require.Same(t, ba, tab.get(now, a))
	for i := range 10000 { // a flood of new addresses
		var ip [4]byte
		binary.BigEndian.PutUint32(ip[:], uint32(0x0b000000+i))
		tab.get(now+monotime.Time(i), netip.AddrFrom4(ip))
	}
	require.Len(t, tab.slots, 64)
	// a lost its slot: it gets a fresh bucket, never an unbounded one.
	require.LessOrEqual(t, tab.get(now+20000, a).Tokens(), 100.0)
}

func TestRequesterKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"127.0.0.1", "127.0.0.1"},
		{"fd77::2", "fd77::"},
		{"fd77::1:2:3:4", "fd77::"},
		{"2001:db8:1:2:aaaa::1", "2001:db8:1:2::"},
		{"fe80::1%lo", "fe80::"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			require.Equal(t, netip.MustParseAddr(tc.want), requesterKey(netip.MustParseAddr(tc.in)))
		})
	}
}

func BenchmarkHandle(b *testing.B) {
	s := mustSession(b, "BENCH")
	c := NewCache(CacheConfig{})
	msg := make([]byte, 100)
	for q := wire.Seq(1); q <= 10000; q++ {
		c.Add(s, q, msg)
	}
	from := netip.MustParseAddrPort("127.0.0.1:4000")
	for _, tc := range []struct {
		name string
		req  []byte
	}{
		{"answer-10", request(s, 500, 10)},
		{"answer-1024", request(s, 500, 1024)},
		{"malformed", []byte("bogus")},
		{"unknown-session", request(mustSession(b, "NOPE"), 1, 1)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h, uni, _, st := testHandler(b, ServerConfig{Sources: []Source{c}, CoalesceWindow: -1, RateBytes: 1e15, RequesterRateBytes: 1e15})
			uni.keep = false
			b.ReportAllocs()
			for b.Loop() {
				h.handle(monotime.Now(), tc.req, false, from)
				h.flush()
			}
			if n := st.msgs.Load(); n > 0 {
				b.SetBytes(int64(uni.bytes) / int64(st.requests.Load()))
			}
		})
	}
}
