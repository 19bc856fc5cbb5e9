package subscriber

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// These tests drive the recovery logic of the core with a fake clock: the
// harness plays the timer goroutine (poll at the times the detectors ask
// for) and the repair socket (feedRepair).

// testNAK is a deterministic NAK timing: first NAK 1 ms after the gap,
// retries after 10 ms then 20 ms, lost after 100 ms.
func testNAK() nak.Config {
	return nak.Config{Generator: nak.FixedDelay(time.Millisecond), Retry: 10 * time.Millisecond,
		MaxRetry: 20 * time.Millisecond, Deadline: 100 * time.Millisecond}
}

func req(s wire.Session, seq wire.Seq, n uint16) wire.Request {
	return wire.Request{Session: s, Seq: seq, Count: n}
}

func TestNAKRecoversGap(t *testing.T) {
	h := newHarness(t, Config{Recovery: Recovery{Retransmitter: repairer, NAK: testNAK()}})
	id := StreamID{Source: srcA, Session: sessA, Incarnation: 1}
	h.feed(srcA, pkt(sessA, 1, 2))
	h.feed(srcA, pkt(sessA, 5, 2))
	require.Equal(t, []Gap{{id, 3, 5}}, h.gaps)
	found := h.now
	require.Empty(t, h.poll(), "not due before the delay")
	require.Equal(t, []wire.Request{req(sessA, 3, 2)}, h.runUntil(found.Add(time.Millisecond)))
	h.now = found.Add(1500 * time.Microsecond)
	h.feedRepair(pkt(sessA, 3, 2)) // fills the reorder buffer's hole
	require.Equal(t, seqRange(1, 7), h.seqs(srcA, sessA))
	require.Empty(t, h.runUntil(h.now.Add(time.Second)), "nothing left to ask")
	require.Empty(t, h.losses)

	st := h.stats()
	require.EqualValues(t, 1, st.NAKs)
	require.EqualValues(t, 2, st.NAKMessages)
	require.EqualValues(t, 1, st.Repairs)
	require.EqualValues(t, 2, st.Recovered)
	require.Zero(t, st.LostRanges)
	require.Zero(t, st.Suppressed)
	require.EqualValues(t, 4, st.FeedMessages[FeedPrimary])
	require.EqualValues(t, 2, st.FeedMessages[FeedRepair])
	require.EqualValues(t, 1, st.FeedDatagrams[FeedRepair])
	require.InDelta(t, float64(1501*time.Microsecond), float64(st.RecoveryP50), float64(5*time.Microsecond))
	require.Equal(t, st.RecoveryP50, st.RecoveryMax)
	// Asked at the 1 ms delay, answered 0.5 ms later.
	require.InDelta(t, float64(time.Millisecond), float64(st.AskedP50), float64(2*time.Microsecond))
	require.InDelta(t, float64(500*time.Microsecond), float64(st.AnsweredP50), float64(2*time.Microsecond))
	require.Equal(t, st.AskedP50, st.AskedP99)
	ss := h.stream(srcA, sessA)
	require.EqualValues(t, 1, ss.NAKs)
	require.EqualValues(t, 1, ss.Repairs)
	require.EqualValues(t, 2, ss.Recovered)
	require.Zero(t, ss.Missing)
	require.Equal(t, st.RecoveryP99, ss.RecoveryP99)
	require.EqualValues(t, 1, ss.Detector.NAKs)
	hist := h.c.recoveryHistogram()
	require.EqualValues(t, 1, hist.TotalCount())
	onlyDrops(t, st, nil)
}

func TestNAKRetriesThenLoss(t *testing.T) {
	h := newHarness(t, Config{Recovery: Recovery{Retransmitter: repairer, NAK: testNAK()}})
	id := StreamID{Source: srcA, Session: sessA, Incarnation: 1}
	h.feed(srcA, pkt(sessA, 1, 2))
	h.feed(srcA, pkt(sessA, 5, 2))
	found := h.now
	var at []time.Duration
	for range 20 {
		due, ok := h.due()
		if !ok {
			break
		}
		h.now = due
		if reqs := h.poll(); len(reqs) > 0 {
			require.Equal(t, []wire.Request{req(sessA, 3, 2)}, reqs)
			at = append(at, h.now.Sub(found))
		}
	}
	ms := time.Millisecond
	require.Equal(t, []time.Duration{1 * ms, 11 * ms, 31 * ms, 51 * ms, 71 * ms, 91 * ms}, at, "delay, then backoff capped at MaxRetry")
	require.Equal(t, []Loss{{id, 3, 5}}, h.losses)
	require.Equal(t, found.Add(100*ms), h.now, "lost at the deadline")
	require.Equal(t, []wire.Seq{1, 2, 5, 6}, h.seqs(srcA, sessA), "delivery continues after the loss")
	h.feedRepair(pkt(sessA, 3, 2)) // too late
	st := h.stats()
	require.EqualValues(t, 6, st.NAKs)
	require.EqualValues(t, 1, st.LostRanges)
	require.EqualValues(t, 2, st.LostMessages)
	require.Zero(t, st.Recovered)
	onlyDrops(t, st, map[DropReason]uint64{DropDuplicate: 1})
	ss := h.stream(srcA, sessA)
	require.EqualValues(t, 1, ss.LostRanges)
	require.Equal(t, wire.Seq(7), ss.Next)
}

// TestLossExactRange: a range given up is reported without the parts that
// arrived after it was given up, which are delivered in order.
func TestLossExactRange(t *testing.T) {
	cfg := testNAK()
	cfg.MaxPending = 3
	h := newHarness(t, Config{Recovery: Recovery{Retransmitter: repairer, NAK: cfg}})
	id := StreamID{Source: srcA, Session: sessA, Incarnation: 1}
	h.feed(srcA, pkt(sessA, 1, 1))
	h.feed(srcA, pkt(sessA, 3, 1))  // gap [2,3): tracked
	h.feed(srcA, pkt(sessA, 10, 1)) // gap [4,10): 6 more than MaxPending allows: lost at once
	require.Empty(t, h.poll())
	require.Empty(t, h.losses, "reported only when next reaches it")
	require.EqualValues(t, 1, h.stream(srcA, sessA).Detector.Overflows)
	h.feed(srcA, pkt(sessA, 5, 2)) // late, after [4,10) was given up
	h.feedRepair(pkt(sessA, 2, 1))
	require.Equal(t, []Loss{{id, 4, 5}, {id, 7, 10}}, h.losses)
	require.Equal(t, []wire.Seq{1, 2, 3, 5, 6, 10}, h.seqs(srcA, sessA))
	st := h.stats()
	require.EqualValues(t, 2, st.LostRanges)
	require.EqualValues(t, 4, st.LostMessages)
	require.Zero(t, st.Held)
}

func TestLossStop(t *testing.T) {
	h := newHarness(t, Config{Recovery: Recovery{Retransmitter: repairer, NAK: testNAK(), LossPolicy: LossStop}})
	id := StreamID{Source: srcA, Session: sessA, Incarnation: 1}
	h.feed(srcA, pkt(sessA, 1, 1))
	h.feed(srcA, pkt(sessA, 3, 2))
	h.runUntil(h.now.Add(time.Second))
	require.Equal(t, []Loss{{id, 2, 3}}, h.losses)
	require.Equal(t, []wire.Seq{1}, h.seqs(srcA, sessA), "nothing after the loss")
	h.feed(srcA, pkt(sessA, 5, 1))
	h.feed(srcA, hb(sessA, 9))
	h.feed(srcA, eos(sessA, 9))
	require.Empty(t, h.ends)
	require.Empty(t, h.runUntil(h.now.Add(time.Second)), "a stopped stream asks for nothing")
	st := h.stats()
	require.EqualValues(t, 1, st.StreamsStopped)
	require.Zero(t, st.Held)
	onlyDrops(t, st, map[DropReason]uint64{DropStopped: 3})
	ss := h.stream(srcA, sessA)
	require.True(t, ss.Stopped)
	require.False(t, ss.Ended)
	// A stopped stream can make room for a new one.
	h2 := newHarness(t, Config{Limits: Limits{MaxStreams: 1}, Recovery: Recovery{NAK: testNAK(), LossPolicy: LossStop}})
	h2.feed(srcA, pkt(sessA, 1, 1))
	h2.feed(srcA, pkt(sessA, 3, 1))
	h2.runUntil(h2.now.Add(time.Second))
	h2.feed(srcB, pkt(sessB, 1, 1))
	require.EqualValues(t, 1, h2.stats().StreamsEvicted)
}

func TestTailLossHeartbeat(t *testing.T) {
	h := newHarness(t, Config{Recovery: Recovery{Retransmitter: repairer, NAK: testNAK()}})
	h.feed(srcA, pkt(sessA, 1, 3))
	h.feed(srcA, hb(sessA, 7)) // 4..6 never came
	require.Equal(t, []wire.Request{req(sessA, 4, 3)}, h.runUntil(h.now.Add(time.Millisecond)))
	h.feedRepair(pkt(sessA, 4, 3))
	h.feed(srcA, hb(sessA, 7))
	require.Equal(t, seqRange(1, 7), h.seqs(srcA, sessA))
	require.Len(t, h.gaps, 1)
	require.EqualValues(t, 3, h.stats().Recovered)
}

func TestEndOfSessionAfterLoss(t *testing.T) {
	h := newHarness(t, Config{Recovery: Recovery{NAK: testNAK()}}) // no retransmitter
	id := StreamID{Source: srcA, Session: sessA, Incarnation: 1}
	h.feed(srcA, pkt(sessA, 1, 2))
	h.feed(srcA, eos(sessA, 6)) // 3..5 lost at the tail
	h.runUntil(h.now.Add(time.Second))
	require.Equal(t, []Loss{{id, 3, 6}}, h.losses)
	require.Equal(t, []ended{{id, 6}}, h.ends)
}

func TestNoRetransmitterDeclaresLoss(t *testing.T) {
	h := newHarness(t, Config{Recovery: Recovery{NAK: nak.Config{Deadline: 50 * time.Millisecond}}})
	id := StreamID{Source: srcA, Session: sessA, Incarnation: 1}
	h.feed(srcA, pkt(sessA, 1, 1))
	h.feed(srcA, pkt(sessA, 3, 1))
	found := h.now
	require.Empty(t, h.runUntil(found.Add(50*time.Millisecond-1)))
	require.Empty(t, h.losses)
	require.Empty(t, h.runUntil(found.Add(50*time.Millisecond)))
	require.Equal(t, []Loss{{id, 2, 3}}, h.losses)
	require.Equal(t, []wire.Seq{1, 3}, h.seqs(srcA, sessA))
	require.Zero(t, h.stats().NAKs)
}

// TestBoundedGap: a header far ahead never turns into a huge request.
func TestBoundedGap(t *testing.T) {
	far := wire.Seq(2 + 1<<40)
	t.Run("beyond-MaxGap-dropped", func(t *testing.T) {
		h := newHarness(t, Config{Recovery: Recovery{Retransmitter: repairer, NAK: testNAK()}})
		h.feed(srcA, pkt(sessA, 1, 1))
		h.feed(srcA, hb(sessA, far))
		require.Empty(t, h.gaps)
		require.Empty(t, h.runUntil(h.now.Add(time.Second)))
		require.Empty(t, h.losses)
		onlyDrops(t, h.stats(), map[DropReason]uint64{DropSeqJump: 1})
	})
	t.Run("beyond-MaxPending-lost-at-once", func(t *testing.T) {
		h := newHarness(t, Config{Recovery: Recovery{Retransmitter: repairer, NAK: testNAK()}, Limits: Limits{MaxGap: 1 << 41}})
		id := StreamID{Source: srcA, Session: sessA, Incarnation: 1}
		h.feed(srcA, pkt(sessA, 1, 1))
		h.feed(srcA, hb(sessA, far))
		require.Equal(t, []Gap{{id, 2, far}}, h.gaps)
		require.Empty(t, h.poll(), "never requested")
		require.Equal(t, []Loss{{id, 2, far}}, h.losses, "declared lost at once")
		h.feed(srcA, pkt(sessA, far, 1))
		h.feed(srcA, hb(sessA, far+11)) // a plausible gap after it is tracked as usual
		require.Equal(t, []wire.Request{req(sessA, far+1, 10)}, h.runUntil(h.now.Add(time.Millisecond)))
		require.Equal(t, []wire.Seq{1, far}, h.seqs(srcA, sessA))
	})
	t.Run("within-MaxPending-split", func(t *testing.T) {
		h := newHarness(t, Config{Recovery: Recovery{Retransmitter: repairer, NAK: testNAK()}})
		h.feed(srcA, pkt(sessA, 1, 1))
		h.feed(srcA, hb(sessA, 60002))
		reqs := h.runUntil(h.now.Add(time.Millisecond))
		// One-packet requests (a message and its length fill one answer
		// packet), a window of them in flight: nobody answers here.
		require.Len(t, reqs, nak.DefaultWindow)
		next := wire.Seq(2)
		for _, r := range reqs {
			require.Equal(t, next, r.Seq)
			require.LessOrEqual(t, r.Count, uint16(nak.DefaultMaxRequest))
			next += wire.Seq(r.Count)
		}
		require.Less(t, next, wire.Seq(60002), "the window's worth, from the gap's start")
	})
}

// abHarness adds a secondary feed reader to a harness.
func abHarness(t *testing.T, cfg Config) (*harness, func(src netip.AddrPort, b []byte)) {
	cfg.Secondary = netip.MustParseAddrPort("239.7.7.9:31000")
	h := newHarness(t, cfg)
	r2 := &reader{c: h.c, batch: sock.NewBatch(1, 0), group: cfg.Secondary.Addr(), feed: FeedSecondary}
	return h, func(src netip.AddrPort, b []byte) {
		h.now += 1000
		r2.batch.Msgs[0] = sock.Message{Buf: b, Addr: src, Dst: cfg.Secondary.Addr()}
		h.c.mu.Lock()
		r2.handleLocked(r2.batch, 1, h.now)
		h.c.mu.Unlock()
	}
}

func TestABCore(t *testing.T) {
	h, feedB := abHarness(t, Config{Recovery: Recovery{Retransmitter: repairer, NAK: testNAK()}})
	id := StreamID{Session: sessA, Incarnation: 1}
	h.feed(srcA, pkt(sessA, 1, 2))
	feedB(srcB, pkt(sessA, 1, 2))  // the B copy: a duplicate
	h.feed(srcA, pkt(sessA, 5, 1)) // A lost 3..4
	require.Equal(t, []Gap{{id, 3, 5}}, h.gaps)
	feedB(srcB, pkt(sessA, 3, 2)) // B has them, before the NAK is due
	feedB(srcB, pkt(sessA, 5, 1))
	require.Empty(t, h.runUntil(h.now.Add(time.Second)), "B filled the gap: no NAK")
	require.Equal(t, seqRange(1, 6), h.seqs(netip.AddrPort{}, sessA))
	h.feed(srcA, pkt(sessB, 1, 1)) // another session: another stream, superseding nothing
	st := h.stats()
	require.Equal(t, 2, st.Streams)
	require.Zero(t, st.SessionChanges)
	require.EqualValues(t, 2, st.Suppressed)
	require.EqualValues(t, 2, st.Recovered)
	require.Zero(t, st.Repairs)
	require.Zero(t, st.NAKs)
	require.EqualValues(t, 4, st.FeedMessages[FeedPrimary])
	require.EqualValues(t, 2, st.FeedMessages[FeedSecondary])
	require.EqualValues(t, 3, st.FeedDatagrams[FeedSecondary])
	require.EqualValues(t, 2+1, st.Duplicates) // B's 1..2, and its 5 while A's was held
	for _, ss := range h.c.streamStats() {
		require.False(t, ss.Superseded)
		require.Equal(t, netip.AddrPort{}, ss.ID.Source)
	}
	// A repair matches the session's stream too.
	h.feed(srcA, pkt(sessA, 7, 1))
	h.feedRepair(pkt(sessA, 6, 1))
	require.Equal(t, seqRange(1, 8), h.seqs(netip.AddrPort{}, sessA))
}

// TestNAKSeedReplay: a non-zero NAK.Seed replays the same delays; each
// stream draws its own.
func TestNAKSeedReplay(t *testing.T) {
	run := func(seed uint64) []time.Duration {
		// The uniform back-off (NAK.Delay set): the group back-off waits
		// not at all for a group of one.
		h := newHarness(t, Config{Recovery: Recovery{Retransmitter: repairer, NAK: nak.Config{Seed: seed, Delay: nak.DefaultDelay}}})
		start := h.now
		for i, src := range []netip.AddrPort{srcA, srcB} {
			sess := []wire.Session{sessA, sessB}[i] // one session from two sources: only the current one asks
			h.feed(src, pkt(sess, 1, 1))
			h.feed(src, pkt(sess, 3, 1))
		}
		var at []time.Duration
		for range 10 {
			due, ok := h.due()
			if !ok || due > start.Add(5*time.Millisecond) {
				break
			}
			h.now = due
			for range h.poll() {
				at = append(at, h.now.Sub(start))
			}
		}
		require.Len(t, at, 2)
		return at
	}
	a := run(42)
	require.Equal(t, a, run(42))
	require.NotEqual(t, a[0], a[1], "streams draw different delays")
	require.NotEqual(t, a, run(43))
}

// recoveryFeed runs rounds of the recovery path on a core: four packets
// of a round arrive from the feed with the third missing (a gap), the
// timer polls (one request), and a repair fills it.
type recoveryFeed struct {
	c         *core
	feed, fix *reader
	dgs       [5][]byte
	next      wire.Seq
	now       monotime.Time
	reqs      []wire.Request
}

const recoveryMsgs = 5 // messages per packet

func newRecoveryFeed(tb testing.TB, onMessage func(Message)) *recoveryFeed {
	cfg, err := Config{Group: testGroup, Recovery: Recovery{Retransmitter: repairer, NAK: nak.Config{Generator: nak.FixedDelay(0)}}, OnMessage: onMessage}.withDefaults()
	require.NoError(tb, err)
	f := &recoveryFeed{c: newCore(cfg.core()), next: 1, reqs: make([]wire.Request, 0, 8)}
	f.feed = &reader{c: f.c, batch: sock.NewBatch(4, 0), group: testGroup.Addr()}
	f.fix = &reader{c: f.c, batch: sock.NewBatch(1, 0), repair: true, feed: FeedRepair}
	for i := range f.dgs {
		f.dgs[i] = pkt(sessA, 1, recoveryMsgs)
	}
	return f
}

func (f *recoveryFeed) round() {
	for i, o := range []int{0, 1, 3, 4} { // packet 2 is lost
		setSeq(f.dgs[i], f.next+wire.Seq(o*recoveryMsgs))
		f.feed.batch.Msgs[i] = sock.Message{Buf: f.dgs[i], Addr: srcA, Dst: testGroup.Addr()}
	}
	setSeq(f.dgs[4], f.next+2*recoveryMsgs)
	f.fix.batch.Msgs[0] = sock.Message{Buf: f.dgs[4], Addr: repairer}
	f.next += 5 * recoveryMsgs
	f.now += 1000
	f.c.mu.Lock()
	f.feed.handleLocked(f.feed.batch, 4, f.now)
	f.reqs, _, _ = f.c.poll(f.now, f.reqs[:0])
	f.c.mu.Unlock()
	if len(f.reqs) != 1 {
		panic(fmt.Sprint("requests: ", f.reqs))
	}
	f.now += 1000
	f.c.mu.Lock()
	f.fix.handleLocked(f.fix.batch, 1, f.now)
	f.c.mu.Unlock()
}

// TestRecoveryAllocs pins zero allocations on the recovery path once warm:
// a gap found, the timer's poll producing a request, a repair filling it.
func TestRecoveryAllocs(t *testing.T) {
	var s sink
	f := newRecoveryFeed(t, s.onMessage)
	f.round()
	f.round()
	allocs := testing.AllocsPerRun(1000, f.round)
	require.Zero(t, allocs)
	st := f.c.stats()
	require.EqualValues(t, 1003, st.NAKs)
	require.EqualValues(t, 1003, st.Repairs)
	require.EqualValues(t, 1003*recoveryMsgs, st.Recovered)
	require.EqualValues(t, 1003*5*recoveryMsgs, st.Messages)
	require.Zero(t, st.Dropped)
}

// BenchmarkRecovery measures one round of the recovery path (five packets
// of five messages, one of them found missing, asked for and repaired).
func BenchmarkRecovery(b *testing.B) {
	var s sink
	f := newRecoveryFeed(b, s.onMessage)
	f.round()
	b.SetBytes(int64(5 * len(f.dgs[0])))
	b.ReportAllocs()
	for b.Loop() {
		f.round()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(s.n), "ns/msg")
}

func setSeq(b []byte, seq wire.Seq) {
	h, _ := wire.ParseHeader(b)
	h.Seq = seq
	wire.AppendHeader(b[:0], h)
}

// TestRandomizedRecovery plays a lossy, reordering, duplicating network and
// a lossy retransmitter that lacks a few packets, on a fake clock, with
// several streams. Every sequence must be delivered once, in order, except
// exactly the packets that the network lost and the retransmitter never
// had, which must be reported lost, each in order; every stream must end.
func TestRandomizedRecovery(t *testing.T) {
	// Repairs are matched by session, so each stream has its own.
	ids := []StreamID{{Source: srcA, Session: sessA, Incarnation: 1}, {Source: srcB, Session: sessB, Incarnation: 1}, {Source: netip.MustParseAddrPort("127.0.0.3:40003"), Session: mustSession("SESSC"), Incarnation: 1}}
	type packet struct {
		id      StreamID
		seq     wire.Seq
		n       int // 0: end of session
		inCache bool
	}
	type event struct {
		at     monotime.Time
		p      *packet
		repair bool
	}
	for seed := range uint64(12) {
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			h := newHarness(t, Config{StartSeq: 1, Recovery: Recovery{
				Retransmitter: repairer,
				NAK: nak.Config{
					Seed: seed + 1, Delay: 2 * time.Millisecond, Retry: 5 * time.Millisecond,
					MaxRetry: 20 * time.Millisecond, Deadline: 200 * time.Millisecond, MaxRequest: 7},
			}})
			var events []event
			schedule := func(e event) {
				i, _ := slices.BinarySearchFunc(events, e.at, func(x event, at monotime.Time) int {
					if x.at <= at {
						return -1
					}
					return 1
				})
				events = slices.Insert(events, i, e)
			}
			// Each stream's packets in order, the streams interleaved at
			// random, one sent every 5 µs.
			queues := map[StreamID][]*packet{}
			for _, id := range ids {
				seq := wire.Seq(1)
				for range 200 {
					p := &packet{id: id, seq: seq, n: 1 + rng.IntN(4), inCache: rng.IntN(50) != 0}
					queues[id] = append(queues[id], p)
					seq += wire.Seq(p.n)
				}
				queues[id] = append(queues[id], &packet{id: id, seq: seq, inCache: true})
			}
			var all []*packet
			lostSeqs := map[StreamID][]wire.Seq{}
			at := monotime.Time(0)
			for len(all) < len(ids)*201 {
				id := ids[rng.IntN(len(ids))]
				if len(queues[id]) == 0 {
					continue
				}
				p := queues[id][0]
				queues[id] = queues[id][1:]
				all = append(all, p)
				at += monotime.Time(5 * time.Microsecond)
				if p.n == 0 { // the end of session: sent three times, the last always arrives
					for k := range 3 {
						if k == 2 || rng.IntN(10) != 0 {
							schedule(event{at: at + monotime.Time(k)*monotime.Time(5*time.Millisecond), p: p})
						}
					}
					continue
				}
				copies := 0
				for k := range 1 + b2i(rng.IntN(20) == 0) { // 5% duplicated
					if rng.IntN(10) != 0 { // 10% lost
						schedule(event{at: at + monotime.Time(k)*1000 + monotime.Time(rng.IntN(300_000)), p: p})
						copies++
					}
				}
				if copies == 0 && !p.inCache {
					lostSeqs[id] = append(lostSeqs[id], seqRange(p.seq, p.seq+wire.Seq(p.n))...)
				}
			}
			byKey := map[StreamID][]*packet{}
			for _, p := range all {
				if p.n > 0 {
					byKey[p.id] = append(byKey[p.id], p)
				}
			}
			// The retransmitter answers each request 0.1 to 2 ms later with
			// the packets it holds that overlap it; 20% of answers are lost.
			answer := func(r wire.Request) {
				for _, id := range ids {
					if id.Session != r.Session {
						continue
					}
					for _, p := range byKey[id] {
						if p.inCache && p.seq < r.Seq+wire.Seq(r.Count) && r.Seq < p.seq+wire.Seq(p.n) && rng.IntN(5) != 0 {
							schedule(event{at: h.now + monotime.Time(100_000+rng.IntN(1_900_000)), p: p, repair: true})
						}
					}
				}
			}
			for step := 0; step < 1_000_000; step++ {
				due, dueOK := h.due()
				if len(events) == 0 && !dueOK {
					break
				}
				if dueOK && (len(events) == 0 || due <= events[0].at) {
					h.now = max(h.now, due)
					for _, r := range h.poll() {
						answer(r)
					}
					continue
				}
				e := events[0]
				events = events[1:]
				h.now = max(h.now, e.at)
				var b []byte
				if e.p.n == 0 {
					b = eos(e.p.id.Session, e.p.seq)
				} else {
					b = pkt(e.p.id.Session, e.p.seq, e.p.n)
				}
				if e.repair {
					h.feedRepair(b)
				} else {
					h.feed(e.p.id.Source, b)
				}
			}
			require.Len(t, h.ends, len(ids), "every stream ended")
			for _, id := range ids {
				var lost []wire.Seq
				for _, l := range h.losses {
					if l.Stream == id {
						lost = append(lost, seqRange(l.From, l.To)...)
					}
				}
				got := append(slices.Clone(h.seqs(id.Source, id.Session)), lost...)
				slices.Sort(got)
				ss := h.stream(id.Source, id.Session)
				require.Equal(t, seqRange(1, ss.End), got, "%v: delivered and lost cover the session once", id)
				require.Equal(t, lostSeqs[id], lost, "%v: lost exactly what nobody had", id)
			}
			st := h.stats()
			t.Logf("%d NAKs (%d msgs), %d repairs, %d recovered, %d suppressed, %d lost ranges, recovery p50 %v p99 %v",
				st.NAKs, st.NAKMessages, st.Repairs, st.Recovered, st.Suppressed, st.LostRanges, st.RecoveryP50, st.RecoveryP99)
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
