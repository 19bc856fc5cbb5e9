package retransmit

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// stallingSource is a Source whose first AppendPacket blocks until release
// is closed: the server's goroutine stops reading, as on a machine that
// keeps it off the CPU, while requests pile up in the socket.
type stallingSource struct {
	Source
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (s *stallingSource) AppendPacket(dst []byte, ss wire.Session, from wire.Seq, max, payloadSize int) ([]byte, int, error) {
	s.once.Do(func() {
		close(s.entered)
		<-s.release
	})
	return s.Source.AppendPacket(dst, ss, from, max, payloadSize)
}

// TestServerRequestBurst: the request socket of a server with the default
// ReadBuffer holds the re-requests of several subscribers that all ask at
// once while the server is not reading (four subscribers with 1,500 ranges
// outstanding each: 5% loss of a 23k packets/s feed for a subscriber that
// caught up after 1.3 s off the CPU, or a round of retries after the
// server itself was held up). The old default of 1 MiB (2 MiB granted)
// held 2,520 of these 6,000 requests and dropped 3,480.
func TestServerRequestBurst(t *testing.T) {
	netlab.Require(t)
	const burst = 4 * 1500
	c, s := cachedSession(t, "BURST", 1, 10_001, 100, CacheConfig{})
	src := &stallingSource{Source: c, entered: make(chan struct{}), release: make(chan struct{})}
	released := false
	release := func() {
		if !released {
			released = true
			close(src.release)
		}
	}
	t.Cleanup(release)
	srv := startServer(t, ServerConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"), Sources: []Source{src},
		RateBytes: 1e9, RequesterRateBytes: 1e9})
	cl := newClient(t, "127.0.0.1")
	cl.ask(srv.Addr(), s, 1, 1)
	select {
	case <-src.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the server never answered the first request")
	}
	b := sock.NewBatch(64, 0)
	for sent := 0; sent < burst; {
		n := min(len(b.Msgs), burst-sent)
		for i := range n {
			q := wire.Seq(1 + (sent+i)%10_000)
			b.Msgs[i].Buf = request(s, q, 1)
			b.Msgs[i].Addr = srv.Addr()
		}
		k, err := cl.conn.WriteBatch(b, n)
		require.NoError(t, err)
		sent += k
	}
	release()
	// Wait until the server read all, or read nothing more for a second.
	// (A second of silence from a reader that takes microseconds per
	// request means the kernel holds no more.)
	last, still := srv.Stats().Requests, time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for last < burst+1 && time.Since(still) < time.Second {
		<-tick.C
		if n := srv.Stats().Requests; n != last {
			last, still = n, time.Now()
		}
	}
	// The kernel's drop count reaches the server on the next datagram
	// queued after the drops (SO_RXQ_OVFL): ask once more.
	cl.ask(srv.Addr(), s, 1, 1)
	st := waitStats(t, srv, func(st ServerStats) bool { return st.Requests == last+1 })
	t.Logf("%d requests in one burst: read %d, dropped by the kernel %d (read buffer default %d)",
		burst, st.Requests-2, st.KernelDrops, DefaultReadBuffer)
	require.Zero(t, st.KernelDrops)
	require.EqualValues(t, burst+2, st.Requests)
}
