package e2e

import (
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/race"
	"github.com/mdbus/mdbus/internal/synth"
	"github.com/mdbus/mdbus/internal/verify"
	"github.com/mdbus/mdbus/packetconn/impair"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/recorder"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

const envChildPublisher = "MDBUS_E2E_CHILD_PUBLISHER" // group:port the child publishes to

// TestChildPublisher is not a test: it is the publisher process that
// TestAcceptancePublisherCrash starts and kills. It publishes seeded
// market data until killed (at most 60 s).
func TestChildPublisher(t *testing.T) {
	g := os.Getenv(envChildPublisher)
	if g == "" {
		t.Skip("helper process for TestAcceptancePublisherCrash")
	}
	rate := 50_000.0
	if race.Enabled {
		rate = 20_000 // the race detector slows every process of the test 5-10x
	}
	pub, err := publisher.New(publisher.Config{Group: netip.MustParseAddrPort(g), Session: "CRASHME",
		RateMessages: rate, HeartbeatInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	gen := synth.New(crashSeed)
	var buf []byte
	end := time.Now().Add(60 * time.Second)
	for time.Now().Before(end) {
		buf = gen.Next(buf[:0])
		if _, err := pub.Publish(buf); err != nil {
			t.Fatal(err)
		}
	}
}

const crashSeed = 77

// Acceptance: the publisher is killed with SIGKILL mid-stream
// while a standalone rewinder runs; subscribers (with 5% loss of their
// own) recover every message the publisher had sent.
func TestAcceptancePublisherCrash(t *testing.T) {
	netlab.Require(t)
	feed := netip.MustParseAddrPort("239.192.25.1:32060")
	repair := netip.MustParseAddrPort("239.192.25.2:32061")
	rw, err := recorder.NewRewinder(recorder.RewinderConfig{
		Feed:      feed,
		Server:    retransmit.ServerConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"), RepairGroup: repair},
		Heartbeat: 100 * time.Millisecond,
	})
	require.NoError(t, err)
	defer rw.Close()
	var cs []*checker
	var subs []*subscriber.Subscriber
	for i := range 3 {
		c := newChecker("sub"+strconv.Itoa(i+1), -1)
		s, err := subscriber.New(subscriber.Config{Group: feed, StartSeq: 1, Recovery: subscriber.Recovery{Retransmitter: rw.Addr(), RepairGroup: repair},
			Receive: subscriber.Receive{
				ReorderPackets: 8192,
			},
			Wrap:      impair.Receiver(impair.Config{Loss: 0.05, Seed: 21, Stream: uint64(i)}),
			OnMessage: c.onMessage})
		require.NoError(t, err)
		defer s.Close()
		cs, subs = append(cs, c), append(subs, s)
	}

	cmd := startChild(t, "TestChildPublisher", envChildPublisher+"="+feed.String())
	session, _ := wire.ParseSession("CRASHME")
	// Let it run until the rewinder holds a good part of a stream, then kill it.
	if !poll(20*time.Second, func() bool { _, next, ok := rw.Cache().Bounds(session); return ok && next > 30_000 }) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("child publisher did not get going")
	}
	require.NoError(t, cmd.Process.Kill()) // SIGKILL: no flush, no end of session
	_ = cmd.Wait()
	// The last datagrams in flight land and the rewinder's own subscriber
	// catches up (under -race on a loaded machine it lagged by 100 ms):
	// wait until its cache has not grown for 500 ms (five times that lag;
	// the publisher is dead, so nothing new is sent).
	type bounds struct {
		first, next wire.Seq
		ok          bool
	}
	b := settle(10*time.Second, 500*time.Millisecond, func() bounds {
		f, nx, o := rw.Cache().Bounds(session)
		return bounds{f, nx, o}
	})
	first, next, ok := b.first, b.next, b.ok
	fs := rw.FeedStats()
	t.Logf("rewinder feed: kernel drops %d, lost %d messages in %d ranges, read buffer granted %d bytes",
		fs.KernelDrops, fs.LostMessages, fs.LostRanges, fs.ReadBufferGranted)
	require.True(t, ok)
	// What the rewinder itself missed nobody can repair: say so plainly
	// rather than as a wrong first sequence.
	require.Zero(t, fs.LostMessages, "the rewinder lost part of the feed itself (kernel drops %d): its cache restarted", fs.KernelDrops)
	require.Equal(t, wire.Seq(1), first)
	n := int(next - 1)

	want := verify.NewHash()
	gen := synth.New(crashSeed)
	var buf []byte
	for range n {
		buf = gen.Next(buf[:0])
		want.Add(buf)
	}
	sum := want.Sum()
	wait := time.Now().Add(10 * time.Second)
	for _, c := range cs {
		poll(time.Until(wait), func() bool { return c.Delivered() >= n })
	}
	t.Logf("publisher killed after %d messages reached the wire", n)
	for i, c := range cs {
		c.verify(t, session, sum, n, 1)
		st := subs[i].Stats()
		t.Logf("%s: delivered %d, NAKs %d, recovered %d, lost ranges %d", c.name, c.Delivered(), st.NAKs, st.Recovered, st.LostRanges)
	}
	ss := rw.ServerStats()
	t.Logf("rewinder: %d requests, %d unicast + %d multicast repair packets", ss.Requests, ss.UnicastPackets, ss.MulticastPackets)
}
