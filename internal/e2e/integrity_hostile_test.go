package e2e

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/packetconn/impair"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// forgedMark begins every forged message, so a delivery of one is seen.
var forgedMark = []byte("FORGED!")

// hostile sends, until stop is closed or its budget runs out, a mix of
// what anyone on the network can send: malformed datagrams to the group,
// forged repairs (the stream's session, plausible and far-ahead
// sequences, forged bytes) to the subscriber's repair socket from a
// socket that is not the retransmitter, forged far-ahead heartbeats of the
// session to the group, and a flood of re-requests for the largest range
// to the retransmitter. It returns the request bytes it sent the server.
func hostile(t *testing.T, stop <-chan struct{}, group, repairTo, server netip.AddrPort, session wire.Session, n int) (reqBytes *atomic.Uint64, done func()) {
	t.Helper()
	c, err := sock.Open(sock.Config{Local: netip.MustParseAddrPort("127.0.0.1:0"), Loopback: true})
	require.NoError(t, err)
	reqBytes = new(atomic.Uint64)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer c.Close()
		rng := rand.New(rand.NewPCG(5, 5))
		var b []byte
		forged := func(seq wire.Seq) []byte {
			var e wire.Encoder
			e.Reset(b[:0], session, seq, 1400)
			for range 3 {
				_ = e.Add(append(append([]byte(nil), forgedMark...), byte(rng.IntN(256))))
			}
			return e.Bytes()
		}
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		for i := 0; i < 200_000; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			switch i % 5 {
			case 0: // malformed: random bytes, a short header, a lying count
				junk := make([]byte, rng.IntN(60))
				for j := range junk {
					junk[j] = byte(rng.IntN(256))
				}
				_ = c.WriteTo(junk, group)
				h := wire.AppendHeader(nil, wire.Header{Session: session, Seq: 1, Count: 9})
				_ = c.WriteTo(append(h, 0, 50, 1), group)
			case 1: // forged repairs of plausible sequences
				_ = c.WriteTo(forged(wire.Seq(1+rng.IntN(n))), repairTo)
			case 2: // forged repairs far ahead, twice, consistent with each other
				_ = c.WriteTo(forged(1<<40), repairTo)
				_ = c.WriteTo(forged(1<<40+3), repairTo)
			case 3: // forged far-ahead heartbeats of the session, to the group
				_ = c.WriteTo(wire.AppendHeartbeat(nil, session, 1<<40), group)
				_ = c.WriteTo(wire.AppendHeartbeat(nil, session, 1<<40+1), group)
			case 4: // re-requests for the largest range
				req := wire.AppendRequest(nil, wire.Request{Session: session, Seq: 1, Count: wire.MaxCount})
				if c.WriteTo(req, server) == nil {
					reqBytes.Add(uint64(len(req)))
				}
			}
		}
	}()
	return reqBytes, wg.Wait
}

// heapInUse returns the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestAcceptanceHostileSender: a valid stream
// with 5% receive loss, recovered from its retransmitter, while a hostile
// sender interleaves malformed packets, forged repairs from a socket that
// is not the retransmitter, forged far-ahead repairs and heartbeats and a
// flood of re-requests. The stream is delivered whole and hash-equal, no
// forged message is delivered, nothing is lost or resynced, and the heap
// stays bounded: repairs count only from the stream's retransmitter, and a
// far-ahead forgery must not resync the stream.
func TestAcceptanceHostileSender(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.192.90.1:32901")
	n := scale(200_000, 20_000)
	b := newBus(t, publisher.Config{Group: group, RateMessages: float64(scale(100_000, 20_000)), HeartbeatInterval: 20 * time.Millisecond},
		retransmit.CacheConfig{}, retransmit.ServerConfig{})
	var forgedSeen atomic.Uint64
	c := newChecker("sub", n)
	s, err := subscriber.New(subscriber.Config{
		Group: group, StartSeq: 1, Recovery: subscriber.Recovery{Retransmitter: b.srv.Addr()}, Receive: subscriber.Receive{ReorderPackets: 8192},
		Wrap: impair.Receiver(impair.Config{Loss: 0.05, Seed: 9}),
		OnMessage: func(m subscriber.Message) {
			if bytes.HasPrefix(m.Data, forgedMark) {
				forgedSeen.Add(1)
			}
			c.onMessage(m)
		},
	})
	require.NoError(t, err)
	defer s.Close()
	heap0 := heapInUse()

	stop := make(chan struct{})
	reqBytes, wait := hostile(t, stop, group, s.RepairAddr(), b.srv.Addr(), b.pub.Session(), n)
	srv0 := b.srv.Stats()
	start := time.Now()
	sum := publishRandom(t, b.pub, n, 11, 1, 200)
	waitAllSubs(t, 60*time.Second, []*subscriber.Subscriber{s}, c)
	close(stop)
	wait()
	elapsed := time.Since(start)

	heap1 := heapInUse()
	st := s.Stats()
	ss := b.srv.Stats()
	c.verify(t, b.pub.Session(), sum, n, 1)
	t.Logf("%d messages in %v under attack: forged delivered %d; subscriber: recovered %d, lost %d, resyncs %d, suspect jumps %d, untrusted repairs dropped %d, malformed dropped %d, streams %d, heap %d -> %d KiB",
		n, elapsed.Round(time.Millisecond), forgedSeen.Load(), st.Recovered, st.LostMessages, st.Resyncs, st.SuspectJumps,
		st.Drops[subscriber.DropUntrustedRepair], st.Drops[subscriber.DropShortHeader]+st.Drops[subscriber.DropTruncated]+st.Drops[subscriber.DropTrailingBytes]+st.Drops[subscriber.DropMalformed],
		st.Streams, heap0>>10, heap1>>10)
	out := ss.Bytes() - srv0.Bytes()
	t.Logf("server under the re-request flood: %d request bytes in (hostile), %d requests, %d repair bytes out in all (%.0f bytes out per hostile request byte, upper bound)",
		reqBytes.Load(), ss.Requests-srv0.Requests, out, float64(out)/float64(max(reqBytes.Load(), 1)))
	require.Zero(t, forgedSeen.Load(), "forged messages delivered")
	require.Zero(t, st.LostMessages)
	require.Zero(t, st.Resyncs)
	require.Positive(t, st.Drops[subscriber.DropUntrustedRepair])
	require.Less(t, heap1, heap0+64<<20, "heap grew by more than 64 MiB")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, b.pub.Flush(ctx))
}
