package subscriber_test

import (
	"context"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// TestFailoverToBackup: the Retransmitter is down (a socket that never
// answers), the backup is a real server. The gap is asked of the first,
// then, after Failover without an answer, of the backup, which repairs
// it; later gaps go straight to the backup.
func TestFailoverToBackup(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.7.3.40:31070")
	cache := retransmit.NewCache(retransmit.CacheConfig{})
	srv := server(t, retransmit.ServerConfig{Sources: []retransmit.Source{cache}})
	dead := newFakeRetransmitter(t)
	// Retries at 10, 30, 70, 150, 310, 630, 1270 ms: the last is past
	// Failover and goes to the backup. Failover is long because answers
	// come late under -race on a loaded machine (GOMAXPROCS=1 with a
	// busy second core: repairs took up to 850 ms), and an answer later
	// than Failover leaves the backup too.
	s, k := subscribe(t, subscriber.Config{
		Group: group, Recovery: subscriber.Recovery{Retransmitter: dead.conn.LocalAddr(), Backups: []netip.AddrPort{srv.Addr()}, Failover: time.Second, NAK: nak.Config{Seed: 1, Retry: 10 * time.Millisecond, MaxRetry: 5 * time.Second, Deadline: 20 * time.Second}},
	})
	require.Equal(t, dead.conn.LocalAddr(), s.Stats().Asking)
	pub := newFeed(t, group, "lo", lo4, sess1, cache)
	id := pub.id()
	pub.send(pub.packets(500, 5), func(i int) bool { return i == 10 }, datagramsRead(t, s))
	eventually(t, func() bool { return k.count(id) == 500 }, "all delivered through the backup")
	k.check(t)
	require.Equal(t, seqs(1, 501), k.delivered(id))
	require.Empty(t, k.lost())
	st := s.Stats()
	require.EqualValues(t, 1, st.Failovers)
	require.Equal(t, srv.Addr(), st.Asking)
	require.EqualValues(t, 5, st.Recovered)
	reqs, _ := dead.collect(50 * time.Millisecond)
	require.GreaterOrEqual(t, len(reqs), 3, "asked the first retransmitter, then again, before leaving it (7 on time)")
	for _, r := range reqs {
		require.Equal(t, wire.Request{Session: sess1, Seq: 51, Count: 5}, r)
	}
	require.Positive(t, srv.Stats().Answered)

	// The backup answers: the next gap is asked of it alone.
	pub.send(pub.packets(500, 5), func(i int) bool { return i == 20 }, datagramsRead(t, s))
	eventually(t, func() bool { return k.count(id) == 1000 }, "the second gap repaired")
	k.check(t)
	require.Empty(t, k.lost())
	require.EqualValues(t, 1, s.Stats().Failovers)
	reqs, _ = dead.collect(50 * time.Millisecond)
	require.Empty(t, reqs, "the retransmitter left is not asked while the backup answers")
}

// TestFailoverRoundRobin: neither retransmitter answers; the gap is asked
// of each in turn, back to the first, until its deadline.
func TestFailoverRoundRobin(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.7.3.41:31071")
	one, two := newFakeRetransmitter(t), newFakeRetransmitter(t)
	var logged logCount
	s, k := subscribe(t, subscriber.Config{
		Group: group, Recovery: subscriber.Recovery{Retransmitter: one.conn.LocalAddr(), Backups: []netip.AddrPort{two.conn.LocalAddr()}, Failover: 30 * time.Millisecond, NAK: nak.Config{Seed: 1, Retry: 10 * time.Millisecond, MaxRetry: 20 * time.Millisecond, Deadline: 400 * time.Millisecond}},
		Logger: slog.New(&logged),
	})
	pub := newFeed(t, group, "lo", lo4, sess1, nil)
	pub.send(pub.packets(100, 5), func(i int) bool { return i == 3 }, datagramsRead(t, s))
	eventually(t, func() bool { return len(k.lost()) == 1 }, "the gap given up at its deadline")
	require.Equal(t, []subscriber.Loss{{Stream: pub.id(), From: 16, To: 21}}, k.lost())
	st := s.Stats()
	require.GreaterOrEqual(t, st.Failovers, uint64(2), "to the backup and back")
	// Read until every re-request counted is in: a fixed read window
	// closes early on a host that keeps the test off the CPU past it
	// (-race with a CPU hog read none of the backup's once).
	var r1, r2 []wire.Request
	eventually(t, func() bool {
		a, _ := one.collect(time.Millisecond)
		b, _ := two.collect(time.Millisecond)
		r1, r2 = append(r1, a...), append(r2, b...)
		return uint64(len(r1)+len(r2)) >= st.NAKs
	}, "every re-request read")
	t.Logf("failovers %d; requests %d to the first, %d to the backup", st.Failovers, len(r1), len(r2))
	require.GreaterOrEqual(t, len(r1), 2)
	require.NotEmpty(t, r2)
	require.EqualValues(t, len(r1)+len(r2), st.NAKs, "every re-request went to one of the two")
	require.EqualValues(t, 1, logged.n.Load(), "one warning a second, not one per failover")
}

// logCount is a slog.Handler counting warnings.
type logCount struct{ n atomic.Int64 }

func (l *logCount) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCount) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		l.n.Add(1)
	}
	return nil
}
func (l *logCount) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCount) WithGroup(string) slog.Handler      { return l }

// TestFailoverStaysWhileAnswered: a retransmitter that answers is never
// left, and the backup never asked.
func TestFailoverStaysWhileAnswered(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.7.3.42:31072")
	cache := retransmit.NewCache(retransmit.CacheConfig{})
	srv := server(t, retransmit.ServerConfig{Sources: []retransmit.Source{cache}})
	backup := newFakeRetransmitter(t)
	s, k := subscribe(t, subscriber.Config{
		Group: group, Recovery: subscriber.Recovery{Retransmitter: srv.Addr(), Backups: []netip.AddrPort{backup.conn.LocalAddr()}, Failover: 2 * time.Second, NAK: nak.Config{Seed: 1, Deadline: 10 * time.Second}},
	})
	pub := newFeed(t, group, "lo", lo4, sess1, cache)
	pub.send(pub.packets(1000, 5), func(i int) bool { return i%10 == 7 }, datagramsRead(t, s))
	eventually(t, func() bool { return k.count(pub.id()) == 1000 }, "all delivered")
	k.check(t)
	st := s.Stats()
	t.Logf("server %+v; NAKs %d, recovery p99 %v max %v", srv.Stats(), st.NAKs, st.RecoveryP99, st.RecoveryMax)
	require.Zero(t, st.Failovers)
	require.Equal(t, srv.Addr(), st.Asking)
	require.EqualValues(t, 20, st.Gaps)
	reqs, _ := backup.collect(50 * time.Millisecond)
	require.Empty(t, reqs)
}

// TestBackupRepairsTrusted: a repair from any listed retransmitter is
// used, the one asked or not; one from any other address or port is
// dropped as untrusted.
func TestBackupRepairsTrusted(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.7.3.43:31073")
	silent := newFakeRetransmitter(t)
	backup, stranger := newFakeRetransmitter(t), newFakeRetransmitter(t)
	s, k := subscribe(t, subscriber.Config{
		Group: group, Recovery: subscriber.Recovery{Retransmitter: silent.conn.LocalAddr(), Backups: []netip.AddrPort{backup.conn.LocalAddr()}, Failover: time.Minute, NAK: slowRetry},
	})
	pub := newFeed(t, group, "lo", lo4, sess1, nil)
	dgs := pub.packets(100, 5)
	pub.send(dgs, func(i int) bool { return i == 3 || i == 6 }, datagramsRead(t, s))
	id := pub.id()
	eventually(t, func() bool { return s.Stats().Gaps == 2 }, "two gaps")
	repairFrom := func(c *sock.Conn, d []byte) {
		t.Helper()
		require.NoError(t, c.WriteTo(d, s.RepairAddr()))
	}
	repairFrom(stranger.conn, dgs[3])
	eventually(t, func() bool { return s.Stats().Drops[subscriber.DropUntrustedRepair] == 1 }, "the stranger's repair dropped")
	require.Equal(t, 15, k.count(id))
	repairFrom(backup.conn, dgs[3])
	repairFrom(backup.conn, dgs[6])
	eventually(t, func() bool { return k.count(id) == 100 }, "the backup's repairs used though it was not asked")
	k.check(t)
	st := s.Stats()
	require.EqualValues(t, 10, st.Recovered)
	require.EqualValues(t, 1, st.Drops[subscriber.DropUntrustedRepair])
	require.Zero(t, st.Failovers)
	require.Equal(t, silent.conn.LocalAddr(), st.Asking)
}

// TestRetransmitPortPerSource: two publishers on one group, each with
// its own retransmitter at port P of its own address. With
// RetransmitPort P every stream's gaps are asked of its own source's
// retransmitter and repaired; an answer from the other source's
// retransmitter, or from another port, is dropped.
func TestRetransmitPortPerSource(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.7.3.44:31074")
	const port = 31075
	type host struct {
		feed  *feed
		srv   *retransmit.Server
		cache *retransmit.Cache
	}
	var hosts []host
	for i, a := range []string{"127.0.0.1", "127.0.0.2"} {
		cache := retransmit.NewCache(retransmit.CacheConfig{})
		srv := server(t, retransmit.ServerConfig{Listen: netip.AddrPortFrom(netip.MustParseAddr(a), port), Sources: []retransmit.Source{cache}})
		hosts = append(hosts, host{newFeed(t, group, "lo", netip.MustParseAddr(a), []wire.Session{sess1, mustSess("RECOV2")}[i], cache), srv, cache})
	}
	s, k := subscribe(t, subscriber.Config{Group: group, Recovery: subscriber.Recovery{RetransmitPort: port, NAK: slowRetry}})
	require.True(t, s.RepairAddr().IsValid())
	require.False(t, s.Stats().Asking.IsValid(), "no one retransmitter")
	for i, h := range hosts {
		h.feed.send(h.feed.packets(200, 5), func(j int) bool { return j == 10+i || j == 20+i }, datagramsRead(t, s))
	}
	for _, h := range hosts {
		eventually(t, func() bool { return k.count(h.feed.id()) == 200 }, "each stream repaired by its own source")
		require.Equal(t, seqs(1, 201), k.delivered(h.feed.id()))
	}
	k.check(t)
	st := s.Stats()
	require.EqualValues(t, 4, st.NAKs)
	require.EqualValues(t, 20, st.Recovered)
	for _, h := range hosts {
		ss := h.srv.Stats()
		require.EqualValues(t, 2, ss.Requests, "two requests to each, none to the other")
		require.EqualValues(t, 2, ss.Answered)
	}

	// Forgeries while both retransmitters are down: a packet for host
	// 0's next gap, with other payloads, sent from host 1's
	// retransmitter address and port (the servers are closed so a socket
	// can take it), and from host 0's address at another port. Both are
	// dropped; then host 0's retransmitter comes back and repairs the gap.
	require.NoError(t, hosts[0].srv.Close())
	require.NoError(t, hosts[1].srv.Close())
	h0 := hosts[0]
	dgs := h0.feed.packets(100, 5)
	h0.feed.send(dgs, func(j int) bool { return j == 3 }, datagramsRead(t, s))
	eventually(t, func() bool { return s.Stats().Gaps == 5 }, "a new gap")
	var e wire.Encoder
	e.Reset(nil, sess1, 216, wire.MaxPayloadSize)
	for range 5 {
		require.NoError(t, e.Add([]byte("FORGED")))
	}
	before := s.Stats().Drops[subscriber.DropUntrustedRepair]
	for i, from := range []netip.AddrPort{netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), port), netip.MustParseAddrPort("127.0.0.1:0")} {
		forger, err := sock.Open(sock.Config{Local: from})
		require.NoError(t, err)
		require.NoError(t, forger.WriteTo(e.Bytes(), s.RepairAddr()))
		eventually(t, func() bool { return s.Stats().Drops[subscriber.DropUntrustedRepair] == before+uint64(i)+1 }, "forgery dropped")
		require.NoError(t, forger.Close())
	}
	require.Equal(t, 215, k.count(h0.feed.id()), "the forged repairs were not used")
	server(t, retransmit.ServerConfig{Listen: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port), Sources: []retransmit.Source{h0.cache}})
	eventually(t, func() bool { return k.count(h0.feed.id()) == 300 }, "repaired by its own retransmitter at the next retry")
	k.check(t)
}
