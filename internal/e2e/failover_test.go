package e2e

import (
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/race"
	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/packetconn/impair"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/stretchr/testify/require"
)

// TestAcceptanceRetransmitterFailover: a publisher "host" on veth end A
// with its in-process cache and retransmit server, a rewinder of the same
// feed on end B as the backup, and a subscriber on end B losing 3% of
// what it receives. A third of the way through, the publisher's server
// dies (closed, as when its process exits, while the feed goes on from
// elsewhere); its re-requests go unanswered, the subscriber turns to the
// rewinder, and every message is delivered once, in order and
// byte-identical: nothing is lost. IPv6, as in the tail runs: both veth
// ends sit in one namespace, where IPv4 drops packets with a local source.
func TestAcceptanceRetransmitterFailover(t *testing.T) {
	netlab.Require(t)
	n := scale(300_000, 30_000)
	group := netip.MustParseAddrPort("[ff15::40:2]:32402")
	cache := retransmit.NewCache(retransmit.CacheConfig{})
	primary, err := retransmit.NewServer(retransmit.ServerConfig{
		Listen:  netip.AddrPortFrom(netip.MustParseAddr(netlab.IPv6A), 0),
		Sources: []retransmit.Source{cache},
	})
	require.NoError(t, err)
	var primaryClosed atomic.Bool
	closePrimary := func() {
		if primaryClosed.CompareAndSwap(false, true) {
			require.NoError(t, primary.Close())
		}
	}
	defer closePrimary()
	backup := miniRewinderOn(t, group, netlab.VethB, netip.AddrPortFrom(netip.MustParseAddr(netlab.IPv6B), 0))

	// Under the race detector, with other packages' tests in parallel,
	// answers can take hundreds of milliseconds: a longer failover and
	// deadline keep a slow backup from being taken for a dead one.
	var nc nak.Config
	failover := time.Duration(0)
	if race.Enabled {
		nc = nak.Config{Retry: 50 * time.Millisecond, MaxRetry: 500 * time.Millisecond, Deadline: 10 * time.Second}
		failover = time.Second
	}
	c := newChecker("failover", n)
	var lost atomic.Uint64
	sub, err := subscriber.New(subscriber.Config{
		Group: group, Interface: netlab.VethB, StartSeq: 1,
		Recovery:  subscriber.Recovery{Retransmitter: primary.Addr(), Backups: []netip.AddrPort{backup}, Failover: failover, NAK: nc},
		Receive:   subscriber.Receive{ReadBuffer: 32 << 20, ReorderPackets: 1 << 15},
		Wrap:      impair.Receiver(impair.Config{Loss: 0.03, Seed: 7}),
		OnMessage: c.onMessage,
		OnLoss:    func(l subscriber.Loss) { lost.Add(uint64(l.To - l.From)) },
	})
	require.NoError(t, err)
	defer sub.Close()
	pub, err := publisher.New(publisher.Config{
		Group: group, Interface: netlab.VethA, Source: netip.MustParseAddr(netlab.IPv6A), TTL: 1,
		RateMessages: 100_000, Sinks: []publisher.Sink{cache},
	})
	require.NoError(t, err)

	// The primary dies once a third of the messages have been delivered.
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for c.Delivered() < n/3 {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
		closePrimary()
	}()
	sum := publishRandom(t, pub, n, 77, 1, 200)
	require.NoError(t, pub.Close())
	select {
	case <-c.Done():
	case <-time.After(30 * time.Second):
	}
	close(stop)
	<-watched
	st := sub.Stats()
	t.Logf("%d messages: delivered %d, lost %d; gaps %d, NAKs %d, recovered %d, failovers %d, asking %v, recovery p99 %v; primary %+v",
		n, c.Delivered(), lost.Load(), st.Gaps, st.NAKs, st.Recovered, st.Failovers, st.Asking, st.RecoveryP99, primary.Stats())
	require.True(t, primaryClosed.Load(), "the primary died during the run")
	require.Zero(t, lost.Load(), "nothing lost")
	require.EqualValues(t, n, c.Delivered())
	c.verify(t, pub.Session(), sum, n, 1)
	require.Positive(t, st.Failovers)
	require.Equal(t, backup, st.Asking, "the dead primary was left for the backup")
	require.Positive(t, primary.Stats().Answered, "the primary repaired gaps before it died")
}

// TestAcceptanceEachSourcesRetransmitter: two publisher hosts on one
// bridge, each with its own retransmit server at port 32410 of its own
// address (as StatsD relays or "mdbus pub --retransmit" on every host
// run), and a subscriber host losing 3% of what it receives. With
// RetransmitPort every stream's gaps go to its own publisher's host:
// both streams are delivered whole, byte-identical, and each server
// answered only for its own session. With one Retransmitter, the other
// host's stream could not be repaired at all.
func TestAcceptanceEachSourcesRetransmitter(t *testing.T) {
	netlab.Require(t)
	const port = 32410
	hosts := labHosts(t, "pubA", "pubB", "sub")
	group := netip.MustParseAddrPort("239.192.94.10:32409")
	n := scale(100_000, 20_000)
	c := newChecker("sub", 2*n)
	var sub *subscriber.Subscriber
	in(t, hosts[2], func() {
		var err error
		sub, err = subscriber.New(subscriber.Config{Group: group, Interface: netlab.HostLink, StartSeq: 1,
			Recovery: subscriber.Recovery{RetransmitPort: port, NAK: nak.Config{Deadline: 10 * time.Second}}, Receive: subscriber.Receive{ReadBuffer: 32 << 20, ReorderPackets: 1 << 14},
			Wrap:      impair.Receiver(impair.Config{Loss: 0.03, Seed: 11}),
			OnMessage: c.onMessage})
		require.NoError(t, err)
	})
	defer sub.Close()
	type pubHost struct {
		pub *publisher.Publication
		srv *retransmit.Server
	}
	var ps []pubHost
	for _, h := range hosts[:2] {
		in(t, h, func() {
			cache := retransmit.NewCache(retransmit.CacheConfig{})
			srv, err := retransmit.NewServer(retransmit.ServerConfig{Listen: netip.AddrPortFrom(h.IPv4, port), Sources: []retransmit.Source{cache}})
			require.NoError(t, err)
			pub, err := publisher.New(publisher.Config{Group: group, Interface: netlab.HostLink, TTL: 1,
				RateMessages: 50_000, Sinks: []publisher.Sink{cache}, HeartbeatInterval: 20 * time.Millisecond})
			require.NoError(t, err)
			ps = append(ps, pubHost{pub, srv})
		})
	}
	defer func() {
		for _, p := range ps {
			p.pub.Close()
			p.srv.Close()
		}
	}()
	sums := make([][32]byte, len(ps))
	done := make(chan struct{})
	go func() {
		defer close(done)
		sums[1] = publishRandom(t, ps[1].pub, n, 52, 1, 300)
	}()
	sums[0] = publishRandom(t, ps[0].pub, n, 51, 1, 300)
	<-done
	waitAllSubs(t, 60*time.Second, []*subscriber.Subscriber{sub}, c)
	st := sub.Stats()
	t.Logf("2 x %d messages: gaps %d, NAKs %d, recovered %d, lost %d, untrusted %d, recovery p99 %v",
		n, st.Gaps, st.NAKs, st.Recovered, st.LostMessages, st.Drops[subscriber.DropUntrustedRepair], st.RecoveryP99)
	for i, p := range ps {
		c.verify(t, p.pub.Session(), sums[i], n, 1)
		ss := p.srv.Stats()
		t.Logf("host %d's server: %d requests, %d answered, %d refused", i, ss.Requests, ss.Answered, ss.Refused.Total())
		require.Positive(t, ss.Answered)
		require.Zero(t, ss.Refused.UnknownSession, "asked only for its own session")
	}
	require.Zero(t, st.LostMessages)
	require.Positive(t, st.Recovered)
}
