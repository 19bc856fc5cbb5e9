package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/packetconn/impair"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/recorder"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// TestRewinderOutlivesRestartsAndForgeries: 70
// publishers that crash (no end of session, each from its own port, each
// with its own session) and 100 forged heartbeats of 100 sessions reach
// a long-running rewinder; then a real publisher starts. The rewinder
// still caches its stream, and a subscriber with 5% loss recovers all of
// it from the rewinder: dead and forged streams must not fill its stream
// table and keep the live one out.
func TestRewinderOutlivesRestartsAndForgeries(t *testing.T) {
	netlab.Require(t)
	feed := netip.MustParseAddrPort("239.192.91.1:32911")
	rw, err := recorder.NewRewinder(recorder.RewinderConfig{
		Feed:   feed,
		Server: retransmit.ServerConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"), RequesterRateBytes: 100e6},
	})
	require.NoError(t, err)
	defer rw.Close()
	ifi, err := net.InterfaceByName("lo")
	require.NoError(t, err)

	send := func(c *sock.Conn, b []byte) { require.NoError(t, c.WriteTo(b, feed)) }
	open := func() *sock.Conn {
		c, err := sock.Open(sock.Config{Local: netip.MustParseAddrPort("0.0.0.0:0"), Interface: ifi, Loopback: true})
		require.NoError(t, err)
		return c
	}
	for i := range 70 { // crashed publishers: a few messages, then silence
		c := open()
		sess, _ := wire.ParseSession(fmt.Sprintf("CRASH%d", i))
		var e wire.Encoder
		e.Reset(nil, sess, 1, 1400)
		for range 5 {
			require.NoError(t, e.Add([]byte("crashed")))
		}
		send(c, e.Bytes())
		c.Close()
	}
	forger := open()
	for i := range 100 {
		sess, _ := wire.ParseSession(fmt.Sprintf("FORGE%d", i))
		send(forger, wire.AppendHeartbeat(nil, sess, wire.Seq(1+i)))
	}
	forger.Close()
	// Real time on purpose: the rewinder's stream table judges a stream
	// quiet by its own clock (subscriber's replaceQuiet, 1 s since the
	// stream's last datagram); 1.1 s passes it with 100 ms to spare.
	time.Sleep(1100 * time.Millisecond)

	n := scale(20_000, 5_000)
	c := newChecker("sub", n)
	s, err := subscriber.New(subscriber.Config{Group: feed, StartSeq: 1, Recovery: subscriber.Recovery{Retransmitter: rw.Addr()}, Receive: subscriber.Receive{ReorderPackets: 8192},
		Wrap:      impair.Receiver(impair.Config{Loss: 0.05, Seed: 4}),
		OnMessage: c.onMessage})
	require.NoError(t, err)
	defer s.Close()
	pub, err := publisher.New(publisher.Config{Group: feed, Session: "REAL", RateMessages: 50_000, HeartbeatInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	defer pub.Close()
	sum := publishRandom(t, pub, n, 8, 1, 300)
	waitAllSubs(t, 60*time.Second, []*subscriber.Subscriber{s}, c)
	c.verify(t, pub.Session(), sum, n, 1)
	// The rewinder reads the same last packets on its own goroutine as
	// the subscriber: give it until they are in, boundedly.
	var first, next wire.Seq
	var ok bool
	poll(5*time.Second, func() bool {
		first, next, ok = rw.Cache().Bounds(pub.Session())
		return ok && next == wire.Seq(n+1)
	})
	fs := rw.FeedStats()
	t.Logf("rewinder feed: streams %d, evicted %d, refused %d; cache of REAL [%d, %d)",
		fs.Streams, fs.StreamsEvicted, fs.Drops[subscriber.DropTooManyStreams], first, next)
	require.True(t, ok, "the rewinder caches the new publisher")
	require.Equal(t, wire.Seq(n+1), next)
	require.NotZero(t, s.Stats().Recovered)
}
