package retransmit

import (
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/stretchr/testify/require"
)

// failingReads makes the reads of a socket fail with a chosen error.
type failingReads struct {
	sock.PacketConn
	fail atomic.Pointer[error]
}

func (f *failingReads) ReadBatch(b *sock.Batch) (int, error) {
	n, err := f.PacketConn.ReadBatch(b)
	if e := f.fail.Load(); e != nil {
		return 0, *e
	}
	return n, err
}

// TestServerReadFailureSurfaces: a receive loop that fails does not die
// quietly: Err, Stats and Close say so.
func TestServerReadFailureSurfaces(t *testing.T) {
	netlab.Require(t)
	start := func(t *testing.T) (*Server, *failingReads, *client) {
		c, _ := cachedSession(t, "ERR", 1, 101, 50, CacheConfig{})
		var fr *failingReads
		srv, err := NewServer(ServerConfig{
			Listen: netip.MustParseAddrPort("127.0.0.1:0"), Sources: []Source{c},
			Wrap: func(pc sock.PacketConn) sock.PacketConn { fr = &failingReads{PacketConn: pc}; return fr },
		})
		require.NoError(t, err)
		return srv, fr, newClient(t, "127.0.0.1")
	}
	s := mustSession(t, "ERR")
	t.Run("closed-under-the-server", func(t *testing.T) {
		srv, fr, cl := start(t)
		err := net.ErrClosed
		fr.fail.Store(&err)
		cl.ask(srv.Addr(), s, 1, 1) // wakes the blocked read
		require.Eventually(t, func() bool { return srv.Stats().Stopped }, 5*time.Second, time.Millisecond)
		require.ErrorIs(t, srv.Err(), net.ErrClosed)
		require.Positive(t, srv.Stats().ReadErrors)
		cerr := srv.Close()
		require.ErrorIs(t, cerr, net.ErrClosed, "Close reports that the server had stopped")
		require.ErrorIs(t, srv.Close(), ErrClosed)
	})
	t.Run("transient", func(t *testing.T) {
		srv, fr, cl := start(t)
		require.NoError(t, srv.Err())
		boom := errors.New("boom")
		fr.fail.Store(&boom)
		cl.ask(srv.Addr(), s, 1, 1)
		require.Eventually(t, func() bool { return srv.Stats().ReadErrors > 0 }, 5*time.Second, time.Millisecond)
		require.ErrorIs(t, srv.Err(), boom)
		require.False(t, srv.Stats().Stopped, "a transient error is retried")
		fr.fail.Store(nil)
		// It still answers.
		var got answer
		for range 50 {
			cl.ask(srv.Addr(), s, 5, 1)
			if got = cl.read(1, 100*time.Millisecond); len(got.msgs) == 1 {
				break
			}
		}
		requireMessages(t, got, 5, 6, 50)
		require.ErrorIs(t, srv.Close(), boom)
	})
}
