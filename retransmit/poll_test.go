package retransmit

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/packetconn"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// stallConn lets its first ReadBatch through and then parks every later
// one until Close, as a serving goroutine whose thread the OS does not
// schedule; TryReadBatch goes to the socket.
type stallConn struct {
	packetconn.TryReader
	once   sync.Once
	reads  int
	closed chan struct{}
}

func (c *stallConn) ReadBatch(b *packetconn.Batch) (int, error) {
	if c.reads++; c.reads == 1 {
		return c.TryReader.ReadBatch(b)
	}
	<-c.closed
	return c.TryReader.ReadBatch(b) // closed: returns net.ErrClosed
}

func (c *stallConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.TryReader.Close()
}

// TestCachePollsServer: a request the server's goroutine does not read is
// answered from the goroutine that feeds the cache, after its next sends,
// once a request came within pollActive; a feed with no requests does not
// read the socket; after Close the cache no longer polls the server.
func TestCachePollsServer(t *testing.T) {
	netlab.Require(t)
	c, s := cachedSession(t, "POLL", 1, 1001, 100, CacheConfig{})
	var stall *stallConn
	srv := startServer(t, ServerConfig{
		Listen:  netip.MustParseAddrPort("127.0.0.1:0"),
		Sources: []Source{c},
		Wrap: func(pc packetconn.PacketConn) packetconn.PacketConn {
			stall = &stallConn{TryReader: pc.(packetconn.TryReader), closed: make(chan struct{})}
			return stall
		},
	})
	cl := newClient(t, "127.0.0.1")

	// Another session's packets, as the publisher goes on sending.
	other := mustSession(t, "FEED")
	next := wire.Seq(1)
	send := func(packets int) {
		for range packets {
			var enc wire.Encoder
			enc.Reset(nil, other, next, 1472)
			require.NoError(t, enc.Add([]byte("m")))
			c.SentPacket(enc.Bytes())
			c.AfterSend()
			next++
		}
	}

	// The first request is the serving goroutine's.
	cl.ask(srv.Addr(), s, 10, 5)
	requireMessages(t, cl.read(5, 2*time.Second), 10, 15, 100)
	waitStats(t, srv, func(st ServerStats) bool { return st.Answered == 1 })

	// The second waits on the socket; the serving goroutine is stalled.
	cl.ask(srv.Addr(), s, 500, 7)
	time.Sleep(20 * time.Millisecond) // real time: the request reaches the socket
	send(pollEvery - 1)
	require.EqualValues(t, 1, srv.Stats().Requests, "polled before the pollEvery-th packet")
	send(1)
	requireMessages(t, cl.read(7, 2*time.Second), 500, 507, 100)
	st := srv.Stats()
	require.EqualValues(t, 2, st.Requests)
	require.EqualValues(t, 1, st.Polled)
	require.EqualValues(t, 2, st.Answered)

	// Quiet for longer than pollActive: the next request is left to the
	// serving goroutine (stalled here), so the feed's packets do not read it.
	time.Sleep(pollActive + 20*time.Millisecond) // real time: the monotonic clock must pass pollActive
	cl.ask(srv.Addr(), s, 600, 1)
	time.Sleep(20 * time.Millisecond)
	send(4 * pollEvery)
	require.EqualValues(t, 2, srv.Stats().Requests)

	require.NoError(t, srv.Close())
	require.Nil(t, c.pollers.Load(), "a closed server is still polled")
	send(pollEvery)
}
