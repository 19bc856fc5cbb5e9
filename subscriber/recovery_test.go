package subscriber_test

// Recovery over real sockets, in the lab (TestMain in helpers_test.go):
// publishers are raw sockets with the wire encoder, repairs come from a
// retransmit.Server over a retransmit.Cache fed with every packet sent
// (including the ones the test "loses"). This is an external test package
// because retransmit imports subscriber (the rewinder).

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/packetconn/impair"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

const wait = 10 * time.Second

var (
	quiet = slog.New(slog.DiscardHandler)
	sess1 = mustSess("RECOV1")
	lo4   = netip.MustParseAddr("127.0.0.1")
)

func mustSess(s string) wire.Session {
	sess, err := wire.ParseSession(s)
	if err != nil {
		panic(err)
	}
	return sess
}

// content is the payload of message seq: its sequence and seq%5 filler
// bytes.
func content(seq wire.Seq) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(seq))
	for range int(seq % 5) {
		b = append(b, byte(seq))
	}
	return b
}

// feed publishes one session on a group with a raw socket, giving every
// packet it encodes to its cache (when set), whether or not it sends it.
type feed struct {
	t     testing.TB
	conn  *sock.Conn
	group netip.AddrPort
	sess  wire.Session
	next  wire.Seq
	cache *retransmit.Cache
}

func newFeed(t testing.TB, group netip.AddrPort, ifname string, src netip.Addr, sess wire.Session, cache *retransmit.Cache) *feed {
	t.Helper()
	ifi, err := net.InterfaceByName(ifname)
	require.NoError(t, err)
	conn, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(src, 0), Interface: ifi, Loopback: true, WriteBuffer: 1 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return &feed{t: t, conn: conn, group: group, sess: sess, next: 1, cache: cache}
}

// packets encodes the next n messages, per to a packet, and caches them.
func (f *feed) packets(n, per int) [][]byte {
	var out [][]byte
	for n > 0 {
		k := min(n, per)
		var e wire.Encoder
		e.Reset(nil, f.sess, f.next, wire.MaxPayloadSize)
		for i := range k {
			require.NoError(f.t, e.Add(content(f.next+wire.Seq(i))))
		}
		out = append(out, e.Bytes())
		if f.cache != nil {
			f.cache.SentPacket(e.Bytes())
		}
		f.next += wire.Seq(k)
		n -= k
	}
	return out
}

// send sends dgs but those lose says are lost; every 16 sent it calls
// pace (when set) with the number sent so far, so receivers keep up.
func (f *feed) send(dgs [][]byte, lose func(i int) bool, pace func(sent int)) {
	f.t.Helper()
	sent := 0
	for i, d := range dgs {
		if lose != nil && lose(i) {
			continue
		}
		require.NoError(f.t, f.conn.WriteTo(d, f.group))
		sent++
		if pace != nil && (sent%16 == 0 || i == len(dgs)-1) {
			pace(sent)
		}
	}
}

func (f *feed) heartbeat() {
	require.NoError(f.t, f.conn.WriteTo(wire.AppendHeartbeat(nil, f.sess, f.next), f.group))
}
func (f *feed) end() {
	require.NoError(f.t, f.conn.WriteTo(wire.AppendEndOfSession(nil, f.sess, f.next), f.group))
}
func (f *feed) id() subscriber.StreamID {
	return subscriber.StreamID{Source: f.conn.LocalAddr(), Session: f.sess, Incarnation: 1}
}

// sink records a subscriber's callbacks, checking order and content.
type sink struct {
	mu     sync.Mutex
	seqs   map[subscriber.StreamID][]wire.Seq
	gaps   []subscriber.Gap
	losses []subscriber.Loss
	gapAt  []time.Time
	lossAt []time.Time
	ends   map[subscriber.StreamID]wire.Seq
	bad    []string
	last   map[subscriber.StreamID]wire.Seq
}

func newSink() *sink {
	return &sink{seqs: map[subscriber.StreamID][]wire.Seq{}, ends: map[subscriber.StreamID]wire.Seq{}, last: map[subscriber.StreamID]wire.Seq{}}
}

func (k *sink) config(cfg subscriber.Config) subscriber.Config {
	cfg.OnMessage = func(m subscriber.Message) {
		k.mu.Lock()
		defer k.mu.Unlock()
		if last, ok := k.last[m.Stream]; ok && last+1 != m.Seq {
			k.bad = append(k.bad, fmt.Sprintf("%v: %d after %d", m.Stream, m.Seq, last))
		}
		if !bytes.Equal(m.Data, content(m.Seq)) {
			k.bad = append(k.bad, fmt.Sprintf("%v: bad payload at %d", m.Stream, m.Seq))
		}
		k.last[m.Stream] = m.Seq
		k.seqs[m.Stream] = append(k.seqs[m.Stream], m.Seq)
	}
	cfg.OnGap = func(g subscriber.Gap) {
		k.mu.Lock()
		k.gaps = append(k.gaps, g)
		k.gapAt = append(k.gapAt, time.Now())
		k.mu.Unlock()
	}
	cfg.OnLoss = func(l subscriber.Loss) {
		k.mu.Lock()
		defer k.mu.Unlock()
		if last, ok := k.last[l.Stream]; ok && last+1 != l.From {
			k.bad = append(k.bad, fmt.Sprintf("%v: loss %d..%d after %d", l.Stream, l.From, l.To, last))
		}
		k.last[l.Stream] = l.To - 1
		k.losses = append(k.losses, l)
		k.lossAt = append(k.lossAt, time.Now())
	}
	cfg.OnEnd = func(id subscriber.StreamID, next wire.Seq) {
		k.mu.Lock()
		k.ends[id] = next
		k.mu.Unlock()
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	return cfg
}

func (k *sink) count(id subscriber.StreamID) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.seqs[id])
}

func (k *sink) delivered(id subscriber.StreamID) []wire.Seq {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.seqs[id])
}

func (k *sink) lost() []subscriber.Loss {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.losses)
}

func (k *sink) check(t testing.TB) {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	require.Empty(t, k.bad)
}

func subscribe(t testing.TB, cfg subscriber.Config) (*subscriber.Subscriber, *sink) {
	t.Helper()
	k := newSink()
	s, err := subscriber.New(k.config(cfg))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, k
}

func server(t testing.TB, cfg retransmit.ServerConfig) *retransmit.Server {
	t.Helper()
	if !cfg.Listen.IsValid() {
		cfg.Listen = netip.MustParseAddrPort("127.0.0.1:0")
	}
	srv, err := retransmit.NewServer(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	return srv
}

// datagramsRead paces a sender on what s has read (no impairment).
func datagramsRead(t testing.TB, s *subscriber.Subscriber) func(int) {
	base := s.Stats().Datagrams
	return func(sent int) {
		require.Eventually(t, func() bool { return s.Stats().Datagrams >= base+uint64(sent) }, wait, time.Millisecond)
	}
}

func seqs(from, to wire.Seq) []wire.Seq {
	var out []wire.Seq
	for s := from; s < to; s++ {
		out = append(out, s)
	}
	return out
}

func eventually(t testing.TB, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, wait, time.Millisecond, msg)
}

// slowRetry keeps retries out of tests that count NAKs exactly.
var slowRetry = nak.Config{Seed: 1, Retry: 2 * time.Second, Deadline: 20 * time.Second}

func TestRecoverSingleLossUnicast(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.7.3.1:31030")
	cache := retransmit.NewCache(retransmit.CacheConfig{})
	srv := server(t, retransmit.ServerConfig{Sources: []retransmit.Source{cache}})
	s, k := subscribe(t, subscriber.Config{Group: group, Recovery: subscriber.Recovery{Retransmitter: srv.Addr(), NAK: slowRetry}})
	require.True(t, s.RepairAddr().IsValid())
	require.NotEqual(t, group.Port(), s.RepairAddr().Port())
	pub := newFeed(t, group, "lo", lo4, sess1, cache)
	pub.send(pub.packets(500, 5), func(i int) bool { return i == 10 }, datagramsRead(t, s))
	id := pub.id()
	eventually(t, func() bool { return k.count(id) == 500 }, "all delivered")
	k.check(t)
	require.Equal(t, seqs(1, 501), k.delivered(id))
	require.Empty(t, k.lost())

	st := s.Stats()
	require.EqualValues(t, 1, st.Gaps)
	require.EqualValues(t, 1, st.NAKs)
	require.EqualValues(t, 5, st.NAKMessages)
	require.EqualValues(t, 1, st.Repairs)
	require.EqualValues(t, 5, st.Recovered)
	require.EqualValues(t, 1, st.FeedDatagrams[subscriber.FeedRepair])
	require.EqualValues(t, 5, st.FeedMessages[subscriber.FeedRepair])
	require.Zero(t, st.LostRanges)
	require.Zero(t, st.NAKErrors)
	require.Positive(t, st.RecoveryP50)
	require.LessOrEqual(t, st.RecoveryP50, st.RecoveryMax)
	require.EqualValues(t, 1, s.RecoveryHistogram().TotalCount())
	ss := s.Streams()
	require.Len(t, ss, 1)
	require.EqualValues(t, 1, ss[0].NAKs)
	require.EqualValues(t, 5, ss[0].Recovered)
	sst := srv.Stats()
	require.EqualValues(t, 1, sst.Requests)
	require.EqualValues(t, 1, sst.Answered)
	// The server counts a packet once its send returns, which can be
	// after the subscriber has handled it (on lo, delivery happens
	// inside the send).
	eventually(t, func() bool { return srv.Stats().UnicastPackets == 1 }, "the answer counted as sent")
	t.Logf("recovered in %v", st.RecoveryMax)
}

// TestRecoverIPv6: the same over IPv6 on the veth pair, with the
// retransmitter on the other end.
func TestRecoverIPv6(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("[ff15::7:31]:31031")
	cache := retransmit.NewCache(retransmit.CacheConfig{})
	srv := server(t, retransmit.ServerConfig{Listen: netip.AddrPortFrom(netip.MustParseAddr(netlab.IPv6B), 0), Sources: []retransmit.Source{cache}})
	s, k := subscribe(t, subscriber.Config{Group: group, Interface: netlab.VethA, Recovery: subscriber.Recovery{Retransmitter: srv.Addr(), NAK: slowRetry}})
	require.True(t, s.RepairAddr().Addr().Is6())
	pub := newFeed(t, group, netlab.VethA, netip.MustParseAddr(netlab.IPv6A), sess1, cache)
	pub.send(pub.packets(100, 4), func(i int) bool { return i == 3 || i == 4 }, datagramsRead(t, s))
	eventually(t, func() bool { return k.count(pub.id()) == 100 }, "all delivered")
	k.check(t)
	require.EqualValues(t, 8, s.Stats().Recovered)
}

// TestUnicastRepairsReachTheirSubscriber: two subscribers share the feed's
// port (SO_REUSEPORT) and lose different packets; each one's repairs
// arrive on its own repair socket, not on a random sibling.
func TestUnicastRepairsReachTheirSubscriber(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.7.3.2:31032")
	cache := retransmit.NewCache(retransmit.CacheConfig{})
	srv := server(t, retransmit.ServerConfig{Sources: []retransmit.Source{cache}})
	var subs []*subscriber.Subscriber
	var sinks []*sink
	for _, lose := range [][]wire.Seq{{11, 12}, {31, 50, 77}} {
		s, k := subscribe(t, subscriber.Config{Group: group, Recovery: subscriber.Recovery{Retransmitter: srv.Addr(), NAK: slowRetry},
			Wrap: impair.Receiver(impair.Config{Drop: impair.DropSeqs(lose...)})})
		subs, sinks = append(subs, s), append(sinks, k)
	}
	require.NotEqual(t, subs[0].RepairAddr(), subs[1].RepairAddr())
	pub := newFeed(t, group, "lo", lo4, sess1, cache)
	w0, w1 := datagramsRead(t, subs[0]), datagramsRead(t, subs[1])
	pub.send(pub.packets(400, 4), nil, func(n int) { w0(n - 1); w1(n - 3) }) // minus what each loses
	for i, k := range sinks {
		eventually(t, func() bool { return k.count(pub.id()) == 400 }, fmt.Sprint("subscriber ", i))
		k.check(t)
		st := subs[i].Stats()
		require.Zero(t, st.LostMessages)
		require.Equal(t, st.Gaps, st.Repairs, "subscriber %d: each gap repaired, on its own socket", i)
		require.Equal(t, st.FeedDatagrams[subscriber.FeedRepair], st.Repairs)
	}
	require.EqualValues(t, 1, subs[0].Stats().Gaps)
	require.EqualValues(t, 3, subs[1].Stats().Gaps)
}

// TestRecoverImpaired: 5% loss, 1% reordering, 1% duplication on the
// subscriber's socket (heartbeats included), 20k messages: everything is
// delivered, in order, once.
func TestRecoverImpaired(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.7.3.3:31033")
	cache := retransmit.NewCache(retransmit.CacheConfig{})
	srv := server(t, retransmit.ServerConfig{Sources: []retransmit.Source{cache}})
	var rx *impair.Conn
	s, k := subscribe(t, subscriber.Config{Group: group, Recovery: subscriber.Recovery{Retransmitter: srv.Addr(), NAK: nak.Config{Seed: 3}},
		Wrap: impair.Receiver(impair.Config{Loss: 0.05, Reorder: 0.01, Duplicate: 0.01, Seed: 7,
			OnWrap: func(c *impair.Conn) { rx = c }})})
	pub := newFeed(t, group, "lo", lo4, sess1, cache)
	const n = 20000
	pub.send(pub.packets(n, 10), nil, func(sent int) {
		eventually(t, func() bool { return rx.Stats().Seen >= uint64(sent) }, "pacing")
	})
	id := pub.id()
	// Tail loss: heartbeats (also impaired) reveal it, one per 20 ms as
	// a publisher's idle stream sends them.
	heartbeats := time.NewTicker(20 * time.Millisecond)
	defer heartbeats.Stop()
	for deadline := time.Now().Add(wait); k.count(id) < n && time.Now().Before(deadline); <-heartbeats.C {
		pub.heartbeat()
	}
	require.Equal(t, n, k.count(id))
	k.check(t)
	require.Equal(t, seqs(1, n+1), k.delivered(id))
	st, imp := s.Stats(), rx.Stats()
	require.Zero(t, st.LostMessages)
	require.Positive(t, st.NAKs)
	require.Positive(t, st.Recovered)
	require.Positive(t, imp.Dropped)
	t.Logf("impairment: %d seen, %d dropped, %d duplicated, %d reordered", imp.Seen, imp.Dropped, imp.Duplicated, imp.Reordered)
	t.Logf("subscriber: %d gaps, %d NAKs (%d msgs), %d repairs, %d recovered, %d suppressed, %d dups; recovery p50 %v p99 %v max %v",
		st.Gaps, st.NAKs, st.NAKMessages, st.Repairs, st.Recovered, st.Suppressed, st.Duplicates, st.RecoveryP50, st.RecoveryP99, st.RecoveryMax)
	t.Logf("server: %+v", srv.Stats())
}

func TestTailLossRecovered(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.7.3.4:31034")
	cache := retransmit.NewCache(retransmit.CacheConfig{})
	srv := server(t, retransmit.ServerConfig{Sources: []retransmit.Source{cache}})
	s, k := subscribe(t, subscriber.Config{Group: group, Recovery: subscriber.Recovery{Retransmitter: srv.Addr(), NAK: slowRetry}})
	pub := newFeed(t, group, "lo", lo4, sess1, cache)
	dgs := pub.packets(100, 5)
	pub.send(dgs, func(i int) bool { return i >= len(dgs)-3 }, datagramsRead(t, s))
	id := pub.id()
	eventually(t, func() bool { return k.count(id) == 85 }, "the head")
	require.Zero(t, s.Stats().Gaps, "nothing shows the tail is missing")
	pub.heartbeat()
	eventually(t, func() bool { return k.count(id) == 100 }, "the tail, after the heartbeat")
	k.check(t)
	k.mu.Lock()
	require.Equal(t, []subscriber.Gap{{Stream: id, From: 86, To: 101}}, k.gaps)
	k.mu.Unlock()
	st := s.Stats()
	require.EqualValues(t, 1, st.NAKs)
	require.EqualValues(t, 15, st.Recovered)
}

// lossDeadline is the fixture's NAK deadline: long enough for the timer
// goroutine to run more than once before it on a host whose CPUs are
// busy (-race with a CPU hog: at 150 ms it once asked only once).
const lossDeadline = time.Second

// lossFixture publishes 200 messages, 5 a packet, losing the packet of
// 51..55, with a cache of only the last 20 messages: the gap is older than
// the cache and cannot be repaired.
func lossFixture(t *testing.T, group netip.AddrPort, policy subscriber.LossPolicy) (*subscriber.Subscriber, *sink, *feed, *retransmit.Server) {
	cache := retransmit.NewCache(retransmit.CacheConfig{MaxMessages: 20})
	srv := server(t, retransmit.ServerConfig{Sources: []retransmit.Source{cache}})
	s, k := subscribe(t, subscriber.Config{Group: group, Recovery: subscriber.Recovery{Retransmitter: srv.Addr(), LossPolicy: policy, NAK: nak.Config{Seed: 5, Retry: 10 * time.Millisecond, Deadline: lossDeadline}}})
	pub := newFeed(t, group, "lo", lo4, sess1, cache)
	dgs := pub.packets(200, 5) // cached before sending: the cache holds 181..200 only
	pub.send(dgs, func(i int) bool { return i == 10 }, datagramsRead(t, s))
	return s, k, pub, srv
}

func TestLossOlderThanCache(t *testing.T) {
	netlab.Require(t)
	s, k, pub, srv := lossFixture(t, netip.MustParseAddrPort("239.7.3.5:31035"), subscriber.LossContinue)
	id := pub.id()
	eventually(t, func() bool { return k.count(id) == 195 }, "delivery continues after the loss")
	k.check(t)
	require.Equal(t, []subscriber.Loss{{Stream: id, From: 51, To: 56}}, k.lost())
	require.Equal(t, append(seqs(1, 51), seqs(56, 201)...), k.delivered(id))
	k.mu.Lock()
	took := k.lossAt[0].Sub(k.gapAt[0])
	k.mu.Unlock()
	// The detector's clock is read once per batch, before OnGap runs: allow
	// for the batch's processing time (long under -race).
	require.GreaterOrEqual(t, took, lossDeadline-30*time.Millisecond, "not before the deadline")
	require.Less(t, took, lossDeadline+time.Second, "soon after it")
	st := s.Stats()
	require.EqualValues(t, 1, st.LostRanges)
	require.EqualValues(t, 5, st.LostMessages)
	require.Greater(t, st.NAKs, uint64(1), "retried before giving up")
	require.Positive(t, srv.Stats().Refused.OutOfRange)
	t.Logf("lost %v after %v and %d NAKs", k.lost()[0], took, st.NAKs)
	pub.send(pub.packets(10, 5), nil, datagramsRead(t, s))
	eventually(t, func() bool { return k.count(id) == 205 }, "later packets")
}

func TestLossStop(t *testing.T) {
	netlab.Require(t)
	s, k, pub, _ := lossFixture(t, netip.MustParseAddrPort("239.7.3.6:31036"), subscriber.LossStop)
	id := pub.id()
	eventually(t, func() bool { return len(k.lost()) == 1 }, "the loss")
	require.Equal(t, []subscriber.Loss{{Stream: id, From: 51, To: 56}}, k.lost())
	require.Equal(t, seqs(1, 51), k.delivered(id), "nothing after the loss")
	pub.send(pub.packets(10, 5), nil, datagramsRead(t, s))
	pub.end()
	eventually(t, func() bool { return s.Stats().Drops[subscriber.DropStopped] == 3 }, "later packets dropped")
	st := s.Stats()
	require.EqualValues(t, 1, st.StreamsStopped)
	require.Zero(t, st.Held)
	require.Equal(t, seqs(1, 51), k.delivered(id))
	k.mu.Lock()
	require.Empty(t, k.ends)
	k.mu.Unlock()
	require.True(t, s.Streams()[0].Stopped)
}

// TestRepairGroupSuppression: two subscribers miss the same packet. The
// first asks at once; the retransmitter answers on the repair group; the
// second, whose NAK was to wait 2 s, hears the repair first and never
// asks. Both have read the packets before the loss when it happens: a
// repair of a stream a subscriber has not seen yet is dropped
// (DropUnknownRepair; nothing says which source it belongs to), so a
// patient subscriber whose feed reader a loaded machine kept off the CPU
// until the eager one's repair had come and gone asked after all (2 of
// 20 runs at a load of 7). The long wait costs nothing: the test ends
// when both delivered everything and nothing is missing any more, after
// which no NAK can fall due.
func TestRepairGroupSuppression(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.7.3.7:31037")
	repairs := netip.MustParseAddrPort("239.7.3.8:31038")
	cache := retransmit.NewCache(retransmit.CacheConfig{})
	srv := server(t, retransmit.ServerConfig{Sources: []retransmit.Source{cache}, RepairGroup: repairs, AlwaysMulticast: true})
	eager, ke := subscribe(t, subscriber.Config{Group: group, Recovery: subscriber.Recovery{Retransmitter: srv.Addr(), RepairGroup: repairs, NAK: nak.Config{Generator: nak.FixedDelay(0), Retry: 2 * time.Second, Deadline: 20 * time.Second}}})
	patient, kp := subscribe(t, subscriber.Config{Group: group, Recovery: subscriber.Recovery{Retransmitter: srv.Addr(), RepairGroup: repairs, NAK: nak.Config{Generator: nak.FixedDelay(2 * time.Second), Retry: 2 * time.Second, Deadline: 20 * time.Second}}})
	pub := newFeed(t, group, "lo", lo4, sess1, cache)
	both := func() func(int) {
		we, wp := datagramsRead(t, eager), datagramsRead(t, patient)
		return func(n int) { we(n); wp(n) }
	}
	dgs := pub.packets(100, 5)
	pub.send(dgs[:7], nil, both())
	pub.send(dgs[7:], func(i int) bool { return i == 0 }, both())
	for _, k := range []*sink{ke, kp} {
		eventually(t, func() bool { return k.count(pub.id()) == 100 }, "all delivered")
		k.check(t)
	}
	for _, st := range patient.Streams() {
		require.Zero(t, st.Missing, "nothing left for a NAK to ask")
	}
	se, sp := eager.Stats(), patient.Stats()
	require.EqualValues(t, 1, se.NAKs)
	require.Zero(t, sp.NAKs, "the repair group's repair cancelled the pending NAK")
	// Packet 7's five messages came from the repair group. Its feed and
	// repair-group sockets are read by two goroutines, so under load the
	// patient one may have seen more missing (the repair handled before
	// the feed packets ahead of it, which count as missing until the feed
	// reader catches up), or none (the repair handled before the packet
	// after it revealed the gap: then there was nothing to ask for). Either
	// way every missing message was filled before its NAK fell due.
	require.EqualValues(t, 5, sp.FeedMessages[subscriber.FeedRepairGroup])
	require.Equal(t, sp.GapMessages, sp.Suppressed)
	require.Positive(t, sp.FeedDatagrams[subscriber.FeedRepairGroup])
	require.Zero(t, sp.FeedDatagrams[subscriber.FeedRepair])
	require.EqualValues(t, 1, srv.Stats().Requests)
	// Counted once the send returns, maybe after the repair was handled.
	eventually(t, func() bool { return srv.Stats().MulticastPackets > 0 }, "the repair counted as multicast")
}

// fakeRetransmitter is a socket that only counts what reaches it.
type fakeRetransmitter struct {
	t    testing.TB
	conn *sock.Conn
	b    *sock.Batch
}

func newFakeRetransmitter(t testing.TB) *fakeRetransmitter {
	conn, err := sock.Open(sock.Config{Local: netip.MustParseAddrPort("127.0.0.1:0")})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return &fakeRetransmitter{t: t, conn: conn, b: sock.NewBatch(64, 128)}
}

// collect reads for d and returns the requests and bytes received.
func (f *fakeRetransmitter) collect(d time.Duration) (reqs []wire.Request, nbytes int) {
	require.NoError(f.t, f.conn.SetReadDeadline(time.Now().Add(d)))
	for {
		n, err := f.conn.ReadBatch(f.b)
		if sock.IsTimeout(err) {
			return reqs, nbytes
		}
		require.NoError(f.t, err)
		for _, m := range f.b.Msgs[:n] {
			nbytes += len(m.Buf)
			r, err := wire.ParseRequest(m.Buf)
			require.NoError(f.t, err)
			reqs = append(reqs, r)
		}
	}
}

// TestHeartbeatFarAhead: a heartbeat claiming a sequence far ahead never
// makes a subscriber ask for more than its bounds allow.
func TestHeartbeatFarAhead(t *testing.T) {
	netlab.Require(t)
	far := wire.Seq(2 + 1<<40)
	for i, tc := range []struct {
		name     string
		maxGap   uint64
		next     wire.Seq
		reqs     int
		lost     []subscriber.Loss
		seqJumps uint64
	}{
		{"2^40-beyond-MaxGap", 0, far, 0, nil, 1},
		{"2^40-beyond-MaxPending", 1 << 41, far, 0, []subscriber.Loss{{From: 2, To: far}}, 0},
		// One-packet requests, a window of them in flight (the fake
		// retransmitter answers nothing, so no more follow).
		{"60000-within-MaxPending", 0, 60002, nak.DefaultWindow, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := netip.AddrPortFrom(netip.MustParseAddr("239.7.3.9"), uint16(31040+i))
			fake := newFakeRetransmitter(t)
			s, k := subscribe(t, subscriber.Config{Group: group, Recovery: subscriber.Recovery{Retransmitter: fake.conn.LocalAddr(), NAK: nak.Config{Seed: 9, Retry: 10 * time.Second, Deadline: 20 * time.Second}}, Limits: subscriber.Limits{MaxGap: tc.maxGap}})
			pub := newFeed(t, group, "lo", lo4, sess1, nil)
			pub.send(pub.packets(1, 1), nil, datagramsRead(t, s))
			require.NoError(t, pub.conn.WriteTo(wire.AppendHeartbeat(nil, sess1, tc.next), group))
			eventually(t, func() bool { return s.Stats().Heartbeats == 1 }, "the heartbeat")
			reqs, nbytes := fake.collect(300 * time.Millisecond)
			require.Len(t, reqs, tc.reqs)
			require.Equal(t, tc.reqs*wire.RequestLen, nbytes)
			asked := uint64(0)
			for _, r := range reqs {
				require.LessOrEqual(t, r.Count, uint16(nak.DefaultMaxRequest))
				asked += uint64(r.Count)
			}
			if tc.reqs > 0 {
				// The window's worth of the gap, from its start, once.
				require.LessOrEqual(t, asked, uint64(tc.next-2), "the gap, asked for once, in bounded pieces")
				require.EqualValues(t, reqs[0].Seq, 2)
			}
			for i := range tc.lost {
				tc.lost[i].Stream = pub.id()
			}
			require.Equal(t, tc.lost, k.lost())
			require.Equal(t, tc.seqJumps, s.Stats().Drops[subscriber.DropSeqJump])
			require.EqualValues(t, tc.reqs, s.Stats().NAKs)
		})
	}
}

// recorder wraps a feed socket and records the sequences of the data
// packets it hands to the subscriber, i.e. what that feed carried.
type recorder struct {
	sock.PacketConn
	mu   *sync.Mutex
	seen map[wire.Seq]bool
}

func (r *recorder) ReadBatch(b *sock.Batch) (int, error) {
	n, err := r.PacketConn.ReadBatch(b)
	r.mu.Lock()
	for _, m := range b.Msgs[:n] {
		if p, err := wire.ParsePacket(m.Buf); err == nil && !p.IsHeartbeat() && !p.IsEndOfSession() {
			for s := p.Seq; s < p.Next(); s++ {
				r.seen[s] = true
			}
		}
	}
	r.mu.Unlock()
	return n, err
}

// TestABFeeds: two groups carry the same session, each with its own
// seeded loss, reordering and duplication, and there is no retransmitter.
// The subscriber delivers every sequence either feed carried, once, in
// order, and reports exactly the rest lost.
func TestABFeeds(t *testing.T) {
	netlab.Require(t)
	ga := netip.MustParseAddrPort("239.7.3.20:31050")
	gb := netip.MustParseAddrPort("239.7.3.21:31051")
	var mu sync.Mutex
	carried := map[wire.Seq]bool{}
	var rxA, rxB *impair.Conn
	wrap := func(seed uint64, rx **impair.Conn) func(sock.PacketConn) sock.PacketConn {
		imp := impair.Receiver(impair.Config{Loss: 0.1, Reorder: 0.01, Duplicate: 0.01, Seed: seed, OnlyData: true,
			OnWrap: func(c *impair.Conn) { *rx = c }})
		return func(pc sock.PacketConn) sock.PacketConn {
			return &recorder{PacketConn: imp(pc), mu: &mu, seen: carried}
		}
	}
	s, k := subscribe(t, subscriber.Config{Group: ga, Secondary: gb, SecondarySource: netip.MustParseAddr("127.0.0.2"),
		StartSeq: 1, // the first packet may be lost on one feed
		Recovery: subscriber.Recovery{
			NAK: nak.Config{Deadline: 300 * time.Millisecond},
		},
		Wrap: wrap(11, &rxA), WrapSecondary: wrap(12, &rxB)})
	pa := newFeed(t, ga, "lo", lo4, sess1, nil)
	pb := newFeed(t, gb, "lo", netip.MustParseAddr("127.0.0.2"), sess1, nil)
	const n = 5000
	dgs := pa.packets(n, 5)
	pb.next = pa.next
	for i := 0; i < len(dgs); i += 16 {
		chunk := dgs[i:min(i+16, len(dgs))]
		pa.send(chunk, nil, nil)
		pb.send(chunk, nil, nil)
		eventually(t, func() bool {
			return rxA.Stats().Seen >= uint64(i+len(chunk)) && rxB.Stats().Seen >= uint64(i+len(chunk))
		}, "pacing")
	}
	pa.end()
	pb.end()
	id := subscriber.StreamID{Session: sess1, Incarnation: 1}
	eventually(t, func() bool { k.mu.Lock(); defer k.mu.Unlock(); return k.ends[id] == n+1 }, "the end of session, after the losses")
	k.check(t)
	mu.Lock()
	var want, wantLost []wire.Seq
	for s := wire.Seq(1); s <= n; s++ {
		if carried[s] {
			want = append(want, s)
		} else {
			wantLost = append(wantLost, s)
		}
	}
	mu.Unlock()
	require.Equal(t, want, k.delivered(id), "every sequence either feed carried, once, in order")
	var lost []wire.Seq
	for _, l := range k.lost() {
		lost = append(lost, seqs(l.From, l.To)...)
	}
	require.Equal(t, wantLost, lost, "exactly what both feeds missed is lost")
	require.NotEmpty(t, wantLost, "with 10% loss on each feed some packets are lost on both")
	st := s.Stats()
	require.Positive(t, st.FeedMessages[subscriber.FeedSecondary])
	require.Positive(t, st.FeedMessages[subscriber.FeedPrimary])
	require.Equal(t, uint64(len(want)), st.Messages)
	require.Zero(t, st.NAKs)
	require.Len(t, s.Streams(), 1)
	t.Logf("A: %+v", rxA.Stats())
	t.Logf("B: %+v", rxB.Stats())
	t.Logf("delivered %d (%d first from A, %d from B), lost %d in %d ranges, %d gaps, %d recovered from the other feed",
		st.Messages, st.FeedMessages[subscriber.FeedPrimary], st.FeedMessages[subscriber.FeedSecondary],
		st.LostMessages, st.LostRanges, st.Gaps, st.Recovered)
}

// TestAllSocketsClose: a subscriber with all four sockets closes cleanly
// (goleak runs after the tests) and only once.
func TestAllSocketsClose(t *testing.T) {
	netlab.Require(t)
	s, err := subscriber.New(subscriber.Config{
		Group:     netip.MustParseAddrPort("239.7.3.30:31060"),
		Secondary: netip.MustParseAddrPort("239.7.3.31:31061"),
		Recovery: subscriber.Recovery{
			RepairGroup:   netip.MustParseAddrPort("239.7.3.32:31062"),
			Retransmitter: netip.MustParseAddrPort("127.0.0.1:9"),
		},
		Logger: quiet,
	})
	require.NoError(t, err)
	require.True(t, s.RepairAddr().IsValid())
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Close(), subscriber.ErrClosed)
}
