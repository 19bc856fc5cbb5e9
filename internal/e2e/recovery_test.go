package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/race"
	"github.com/mdbus/mdbus/internal/synth"
	"github.com/mdbus/mdbus/internal/verify"
	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/packetconn/impair"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// bus is a publisher with an in-process cache and retransmit server.
type bus struct {
	pub   *publisher.Publication
	cache *retransmit.Cache
	srv   *retransmit.Server
}

func newBus(t *testing.T, pcfg publisher.Config, ccfg retransmit.CacheConfig, scfg retransmit.ServerConfig) *bus {
	t.Helper()
	b := &bus{cache: retransmit.NewCache(ccfg)}
	if !scfg.Listen.IsValid() {
		scfg.Listen = netip.MustParseAddrPort("127.0.0.1:0")
	}
	scfg.Sources = []retransmit.Source{b.cache}
	if scfg.RequesterRateBytes == 0 {
		// Every subscriber of the lab asks from 127.0.0.1, which the
		// server's per-requester bucket counts as one host.
		scfg.RequesterRateBytes = 100e6
	}
	srv, err := retransmit.NewServer(scfg)
	require.NoError(t, err)
	b.srv = srv
	t.Cleanup(func() { srv.Close() })
	pcfg.Sinks = append(pcfg.Sinks, b.cache)
	pub, err := publisher.New(pcfg)
	require.NoError(t, err)
	b.pub = pub
	t.Cleanup(func() { pub.Close() })
	return b
}

// publishRandom publishes n seeded random-size messages and returns their digest.
func publishRandom(t *testing.T, pub *publisher.Publication, n int, seed uint64, minSize, maxSize int) [32]byte {
	t.Helper()
	gen := synth.NewRandomSizes(seed, minSize, maxSize)
	h := verify.NewHash()
	buf := make([]byte, 0, maxSize)
	for range n {
		buf = gen.Next(buf[:0])
		h.Add(buf)
		_, err := pub.Publish(buf)
		require.NoError(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, pub.Flush(ctx))
	return h.Sum()
}

func waitAll(t *testing.T, timeout time.Duration, cs ...*checker) {
	t.Helper()
	waitAllSubs(t, timeout, nil, cs...)
}

func waitAllSubs(t *testing.T, timeout time.Duration, subs []*subscriber.Subscriber, cs ...*checker) {
	t.Helper()
	deadline := time.After(timeout)
	for _, c := range cs {
		select {
		case <-c.Done():
		case <-deadline:
			var s []string
			for i, c := range cs {
				s = append(s, fmt.Sprintf("%s %d", c.name, c.Delivered()))
				if i < len(subs) {
					t.Logf("%s: %+v", c.name, subs[i].Stats())
				}
			}
			t.Fatalf("timed out after %v: delivered %v", timeout, s)
		}
	}
}

// waitRecovered waits until every checker has its stream, and fails at
// once when a subscriber declares a loss: the stream can then never be
// complete, and waiting out the timeout only hides why.
func waitRecovered(t *testing.T, timeout time.Duration, subs []*subscriber.Subscriber, cs ...*checker) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for _, c := range cs {
		for {
			select {
			case <-c.Done():
			case <-time.After(50 * time.Millisecond):
				lost := false
				for _, s := range subs {
					lost = lost || s.Stats().LostRanges > 0
				}
				if !lost && time.Now().Before(deadline) {
					continue
				}
				for i, c := range cs {
					t.Logf("%s: delivered %d: %+v", c.name, c.Delivered(), subs[i].Stats())
				}
				if lost {
					t.Fatalf("a subscriber declared a loss")
				}
				t.Fatalf("timed out after %v", timeout)
			}
			break
		}
	}
}

// Acceptance: four subscribers, each with 5% independent loss,
// 1% reordering and 1% duplication, deliver the exact stream; nothing is
// declared lost.
func TestAcceptanceRecoveryIndependentLoss(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.192.20.1:32001")
	n := scale(1_000_000, 20_000)
	if v := os.Getenv("MDBUS_E2E_N"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	// Default cache (256 MiB, 1M messages: 20 s of this stream) and
	// default NAK deadline (1 s). The reorder buffer holds more than a
	// NAK deadline of this feed (23k packets/s), so that a repair slowed
	// by a loaded machine is given up by the deadline, not by the bound:
	// with 8,192 packets (0.36 s) a loaded CI run gave up 6-7 ranges of
	// 4,750-4,900 messages on full reorder buffers (recovery p99 400 ms,
	// max 860 ms). The feed sockets get the fanout tests' buffer: the
	// impairment is the 5% loss, not kernel drops on top of it (2,500
	// per subscriber in that run).
	b := newBus(t, publisher.Config{Group: group, RateMessages: 50_000, HeartbeatInterval: 50 * time.Millisecond},
		retransmit.CacheConfig{}, retransmit.ServerConfig{})
	// Under the race detector (CI runs it with other packages' tests in
	// parallel) every step is 5-10x slower: a CI run's repairs took p50
	// 250 ms, p99 900 ms, and retries every 10-100 ms multiplied the
	// requests the slowed server had to answer (5 per gap), so a few
	// ranges passed the 1 s deadline. Stretch the timers there, as the
	// suppression test does; the full-size run without -race keeps the
	// defaults, which is what the acceptance asks.
	var nc nak.Config
	if race.Enabled {
		nc = nak.Config{Retry: 50 * time.Millisecond, MaxRetry: 500 * time.Millisecond, Deadline: 10 * time.Second}
	}
	var lost sync.Map
	var subs []*subscriber.Subscriber
	var cs []*checker
	for i := range 4 {
		c := newChecker(fmt.Sprintf("sub%d", i+1), n)
		nc.Seed = uint64(100 + i)
		s, err := subscriber.New(subscriber.Config{
			Group: group, StartSeq: 1, Recovery: subscriber.Recovery{Retransmitter: b.srv.Addr(), NAK: nc}, Receive: subscriber.Receive{ReadBuffer: fanoutReadBuffer, ReorderPackets: 32768, ReorderBytes: 64 << 20},

			Wrap:      impair.Receiver(impair.Config{Loss: 0.05, Reorder: 0.01, Duplicate: 0.01, Seed: 7, Stream: uint64(i)}),
			OnMessage: c.onMessage,
			OnLoss:    func(l subscriber.Loss) { lost.Store(c.name, l) },
		})
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		subs, cs = append(subs, s), append(cs, c)
	}
	start := time.Now()
	sum := publishRandom(t, b.pub, n, 3, 1, 1000)
	t.Cleanup(func() { t.Logf("server: %+v", b.srv.Stats()) })
	waitRecovered(t, 120*time.Second, subs, cs...)
	t.Logf("%d messages to 4 subscribers with 5%% loss, 1%% reorder, 1%% dup in %v", n, time.Since(start).Round(time.Millisecond))
	for i, c := range cs {
		c.verify(t, b.pub.Session(), sum, n, 1)
		st := subs[i].Stats()
		t.Logf("%s: NAKs %d, repairs %d, recovered %d, lost ranges %d, duplicates %d, kernel drops %d, recovery p50 %v p99 %v max %v",
			c.name, st.NAKs, st.Repairs, st.Recovered, st.LostRanges, st.Duplicates, st.KernelDrops, st.RecoveryP50, st.RecoveryP99, st.RecoveryMax)
		require.Zero(t, st.LostRanges)
		require.NotZero(t, st.Recovered)
	}
	lost.Range(func(k, v any) bool { t.Errorf("%v declared loss %+v", k, v); return true })
	ss := b.srv.Stats()
	t.Logf("server: %d requests, %d unicast packets, %d bytes", ss.Requests, ss.UnicastPackets, ss.Bytes())
}

// TestAcceptanceNAKSuppression: 2% correlated loss, eight subscribers in
// one process, the shipped defaults (a repair group configured): the
// retransmitter's confirms and the group back-off keep the server at about
// one request per lost packet. Without them (repairs unicast first,
// subscribers asking at once) every subscriber asks.
func TestAcceptanceNAKSuppression(t *testing.T) {
	netlab.Require(t)
	n := scale(200_000, 10_000)
	run := func(t *testing.T, suppress bool, port uint16) (naksPerLoss float64) {
		group := netip.AddrPortFrom(netip.MustParseAddr("239.192.21.1"), port)
		repair := netip.AddrPortFrom(netip.MustParseAddr("239.192.21.2"), port+1)
		var sendSide *impair.Conn
		scfg := retransmit.ServerConfig{RepairGroup: repair}
		ncfg := nak.Config{} // the shipped defaults
		if !suppress {
			// The old defaults: a range's first answer unicast, no wait.
			scfg.UnicastFirst = true
			ncfg = nak.Config{Generator: nak.FixedDelay(0)}
		}
		b := newBus(t, publisher.Config{Group: group, RateMessages: 50_000, HeartbeatInterval: 50 * time.Millisecond,
			Wrap: impair.Sender(impair.Config{Loss: 0.02, Seed: 11, OnlyData: true, OnWrap: func(c *impair.Conn) { sendSide = c }})},
			retransmit.CacheConfig{}, scfg)
		var cs []*checker
		var subs []*subscriber.Subscriber
		for i := range 8 {
			c := newChecker(fmt.Sprintf("sub%d", i+1), n)
			cfg := subscriber.Config{Group: group, StartSeq: 1, Recovery: subscriber.Recovery{Retransmitter: b.srv.Addr(), RepairGroup: repair, NAK: ncfg},
				OnMessage: c.onMessage}
			cfg.Recovery.NAK.Seed = uint64(1000*port) + uint64(i) + 1
			s, err := subscriber.New(cfg)
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })
			cs, subs = append(cs, c), append(subs, s)
		}
		sum := publishRandom(t, b.pub, n, 5, 16, 200)
		waitAll(t, 120*time.Second, cs...)
		var naks, confirmed uint64
		for i, c := range cs {
			c.verify(t, b.pub.Session(), sum, n, 1)
			st := subs[i].Stats()
			naks += st.NAKs
			confirmed += st.Confirmed
			require.Zero(t, st.LostMessages)
		}
		ss := b.srv.Stats()
		dropped := sendSide.Stats().Dropped
		require.NotZero(t, dropped)
		naksPerLoss = float64(ss.Requests) / float64(dropped)
		t.Logf("suppression %v: %d packets lost at the sender, server got %d requests (%.2f per lost packet; subscribers sent %d, %d messages not asked for thanks to confirms), repairs %d unicast + %d multicast packets (%d confirms), refused: %s",
			suppress, dropped, ss.Requests, naksPerLoss, naks, confirmed, ss.UnicastPackets, ss.MulticastPackets-ss.Confirms, ss.Confirms, ss.Refused)
		require.Zero(t, ss.Refused.Total())
		return naksPerLoss
	}
	var on, off float64
	t.Run("suppression-on", func(t *testing.T) { on = run(t, true, 32010) })
	t.Run("suppression-off", func(t *testing.T) { off = run(t, false, 32020) })
	t.Logf("NAKs per lost packet: %.2f with suppression, %.2f without", on, off)
	require.Greater(t, off, 4.0)
	if race.Enabled {
		// A few hundred losses under a 10x slower runtime, where every
		// wake-up is late: the figures are logged, not compared. Quiet
		// runs give 2-6 against 12-30, but with the other packages'
		// tests on both cores the suppressed run sometimes asks as
		// often as the other: CI saw 17.7 against 21.9 once, and 21.6
		// against 19.2 on 430a972; beside a busy loop on one core, 1 of
		// 12 runs came out inverted, on this build and on the one
		// before these figures were taken (1ad6c76) alike. Here the
		// race-enabled run checks what it is for (no data race, every
		// message once and in order, nothing lost or refused); the
		// bound is checked at full size without -race (CI runs both).
		return
	}
	require.LessOrEqual(t, on, 1.5)
}

// Acceptance: the last 3 packets before an idle period are
// dropped for everyone; subscribers find the loss through heartbeats and
// recover within two heartbeat intervals.
func TestAcceptanceTailLoss(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.192.22.1:32030")
	const hb = 100 * time.Millisecond
	const n = 200
	// 1000-byte messages: one per packet, so the last 3 packets are the
	// last 3 sequences.
	b := newBus(t, publisher.Config{Group: group, HeartbeatInterval: hb,
		Wrap: impair.Sender(impair.Config{Drop: impair.DropSeqs(n-2, n-1, n)})},
		retransmit.CacheConfig{}, retransmit.ServerConfig{})
	var cs []*checker
	for i := range 3 {
		c := newChecker(fmt.Sprintf("sub%d", i+1), n)
		s, err := subscriber.New(subscriber.Config{Group: group, StartSeq: 1, Recovery: subscriber.Recovery{Retransmitter: b.srv.Addr()}, OnMessage: c.onMessage})
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		cs = append(cs, c)
	}
	sum := publishRandom(t, b.pub, n, 9, 1000, 1000)
	sent := time.Now()
	waitAll(t, 10*time.Second, cs...)
	took := time.Since(sent)
	t.Logf("tail of 3 packets recovered %v after the last send (heartbeat interval %v)", took.Round(time.Millisecond), hb)
	for _, c := range cs {
		c.verify(t, b.pub.Session(), sum, n, 1)
	}
	require.Less(t, took, 2*hb)
}

// Acceptance: a gap older than the cache is declared lost
// within the NAK deadline with its exact range, and the stream continues.
func TestAcceptanceGapOlderThanCache(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.192.23.1:32040")
	const n = 4000
	const deadline = 300 * time.Millisecond
	b := newBus(t, publisher.Config{Group: group, RateMessages: 20_000, HeartbeatInterval: 50 * time.Millisecond},
		retransmit.CacheConfig{MaxMessages: 100}, retransmit.ServerConfig{})
	c := newChecker("sub", n-4)
	var mu sync.Mutex
	var losses []subscriber.Loss
	var lossAt time.Time
	s, err := subscriber.New(subscriber.Config{Group: group, StartSeq: 1, Recovery: subscriber.Recovery{Retransmitter: b.srv.Addr(), NAK: nak.Config{Delay: 50 * time.Millisecond, Deadline: deadline, Seed: 1}}, Receive: subscriber.Receive{ReorderPackets: 8192},
		Wrap:      impair.Receiver(impair.Config{Drop: impair.DropRange(50, 53)}),
		OnMessage: c.onMessage,
		OnLoss: func(l subscriber.Loss) {
			mu.Lock()
			defer mu.Unlock()
			losses = append(losses, l)
			lossAt = time.Now()
			c.Skip(l.Stream, uint64(l.From), uint64(l.To-l.From))
		},
	})
	require.NoError(t, err)
	defer s.Close()
	start := time.Now()
	publishRandom(t, b.pub, n, 13, 1000, 1000) // one message per packet
	waitAll(t, 30*time.Second, c)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, losses, 1)
	require.Equal(t, wire.Seq(50), losses[0].From)
	require.Equal(t, wire.Seq(54), losses[0].To)
	// Message 53 went out about 2.65 ms after start at 20k msgs/s; the
	// loss must be declared within the deadline of its detection.
	detectedBy := start.Add(time.Duration(53) * time.Second / 20_000)
	t.Logf("lost range [%d,%d) declared %v after detection (deadline %v)", losses[0].From, losses[0].To, lossAt.Sub(detectedBy).Round(time.Millisecond), deadline)
	require.Less(t, lossAt.Sub(detectedBy), deadline+200*time.Millisecond)
	st := s.Stats()
	require.Equal(t, uint64(1), st.LostRanges)
	require.Equal(t, uint64(4), st.LostMessages)
	streams := c.Streams()
	require.Len(t, streams, 1)
	for _, ss := range streams {
		require.Equal(t, n-4, ss.Delivered)
		require.Zero(t, ss.Duplicates)
		require.Zero(t, ss.OutOfOrder) // Skip marked the lost range
		require.Equal(t, uint64(n+1), ss.Next)
	}
}

// lossPattern drops a data packet when hash(seq, salt) % 10 == 0: 10%
// loss, decided per sequence so that a test knows exactly which sequences
// each feed lost (one message per packet).
func lossPattern(salt uint64) func(pkt []byte) bool {
	return func(pkt []byte) bool {
		if !impair.IsData(pkt) {
			return false
		}
		return lostBy(wire.Seq(binary.BigEndian.Uint64(pkt[wire.SeqOffset:])), salt)
	}
}

func lostBy(seq wire.Seq, salt uint64) bool {
	x := uint64(seq)*0x9e3779b97f4a7c15 ^ salt
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 29
	return x%10 == 0
}

// Acceptance: A/B feeds each with 10% independent loss and no
// retransmitter: the subscriber delivers every sequence that either feed
// carried, once, in order, and reports exactly the sequences both lost.
func TestAcceptanceABArbitration(t *testing.T) {
	netlab.Require(t)
	a := netip.MustParseAddrPort("239.192.24.1:32050")
	bGroup := netip.MustParseAddrPort("239.192.24.2:32051")
	n := scale(50_000, 10_000)
	const saltA, saltB = 1, 2
	var mu sync.Mutex
	var lostSeqs []wire.Seq
	var delivered []wire.Seq
	s, err := subscriber.New(subscriber.Config{Group: a, Secondary: bGroup, StartSeq: 1, Receive: subscriber.Receive{ReorderPackets: 8192},
		Recovery: subscriber.Recovery{
			// Long enough for the slower feed's copy to arrive when the
			// machine is busy (-race, other packages' tests): a gap is
			// declared lost only when neither feed can fill it any more.
			NAK: nak.Config{Deadline: time.Second},
		},
		Wrap:          impair.Receiver(impair.Config{Drop: lossPattern(saltA)}),
		WrapSecondary: impair.Receiver(impair.Config{Drop: lossPattern(saltB)}),
		OnMessage: func(m subscriber.Message) {
			mu.Lock()
			delivered = append(delivered, m.Seq)
			mu.Unlock()
		},
		OnLoss: func(l subscriber.Loss) {
			mu.Lock()
			for q := l.From; q < l.To; q++ {
				lostSeqs = append(lostSeqs, q)
			}
			mu.Unlock()
		},
	})
	require.NoError(t, err)
	defer s.Close()
	var pubs []*publisher.Publication
	for _, g := range []netip.AddrPort{a, bGroup} {
		p, err := publisher.New(publisher.Config{Group: g, Session: "ABFEED", RateMessages: 20_000, HeartbeatInterval: 20 * time.Millisecond})
		require.NoError(t, err)
		defer p.Close()
		pubs = append(pubs, p)
	}
	msg := make([]byte, 1000) // one message per packet
	for i := range n {
		binary.BigEndian.PutUint64(msg, uint64(i+1))
		for _, p := range pubs {
			_, err := p.Publish(msg)
			require.NoError(t, err)
		}
	}
	var wantLost []wire.Seq
	for q := wire.Seq(1); q <= wire.Seq(n); q++ {
		if lostBy(q, saltA) && lostBy(q, saltB) {
			wantLost = append(wantLost, q)
		}
	}
	poll(30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(delivered)+len(lostSeqs) >= n
	})
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, wantLost, lostSeqs, "exactly the sequences both feeds lost are reported lost")
	require.Len(t, delivered, n-len(wantLost))
	prev := wire.Seq(0)
	for _, q := range delivered {
		require.Greater(t, q, prev, "in order, once")
		prev = q
	}
	t.Logf("A/B: %d sequences, %d lost by both feeds (%.2f%%), all others delivered once in order",
		n, len(wantLost), 100*float64(len(wantLost))/float64(n))
}
