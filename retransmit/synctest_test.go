package retransmit

import (
	"net"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// memConn stands for the server's request socket in a synctest bubble:
// datagrams are handed to it by the test, what the server sends is kept
// with the moment it left, and the read deadline runs on a Go timer (the
// bubble's clock). The real socket it wraps is only closed.
type memConn struct {
	sock.PacketConn // the wrapped socket: LocalAddr and Close
	in              chan sock.Message
	kick            chan struct{}
	closed          chan struct{}
	once            sync.Once

	mu       sync.Mutex
	deadline time.Time
	sent     []sentAt
	wrote    chan struct{} // one token per datagram sent
}

type sentAt struct {
	at   time.Time
	data []byte
	to   netip.AddrPort
}

func newMemConn() *memConn {
	return &memConn{in: make(chan sock.Message, 64), kick: make(chan struct{}, 1), closed: make(chan struct{}),
		wrote: make(chan struct{}, 1024)}
}

func (m *memConn) wrap(pc sock.PacketConn) sock.PacketConn { m.PacketConn = pc; return m }

func (m *memConn) ReadBatch(b *sock.Batch) (int, error) {
	for {
		m.mu.Lock()
		d := m.deadline
		m.mu.Unlock()
		var expired <-chan time.Time
		if !d.IsZero() {
			t := time.NewTimer(time.Until(d))
			defer t.Stop()
			expired = t.C
		}
		select {
		case msg := <-m.in:
			b.Msgs[0].Buf = append(b.Buffer(0)[:0], msg.Buf...)
			b.Msgs[0].Addr, b.Msgs[0].Truncated = msg.Addr, false
			return 1, nil
		case <-expired:
			return 0, &net.OpError{Op: "recvmmsg", Net: "udp", Err: errTimeout{}}
		case <-m.kick:
		case <-m.closed:
			return 0, &net.OpError{Op: "recvmmsg", Net: "udp", Err: net.ErrClosed}
		}
	}
}

type errTimeout struct{}

func (errTimeout) Error() string   { return "i/o timeout" }
func (errTimeout) Timeout() bool   { return true }
func (errTimeout) Temporary() bool { return true }

func (m *memConn) WriteBatch(b *sock.Batch, n int) (int, error) {
	for _, msg := range b.Msgs[:n] {
		if err := m.WriteTo(msg.Buf, msg.Addr); err != nil {
			return 0, err
		}
	}
	return n, nil
}

func (m *memConn) WriteTo(p []byte, to netip.AddrPort) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent = append(m.sent, sentAt{at: time.Now(), data: append([]byte(nil), p...), to: to})
	select {
	case m.wrote <- struct{}{}:
	default: // nobody counts this many
	}
	return nil
}

func (m *memConn) SetReadDeadline(t time.Time) error {
	m.mu.Lock()
	m.deadline = t
	m.mu.Unlock()
	select {
	case m.kick <- struct{}{}:
	default:
	}
	return nil
}

func (m *memConn) Close() error {
	m.once.Do(func() { close(m.closed) })
	return m.PacketConn.Close()
}

// TestServerHoldsBackOnVirtualTime is TestServerHoldsBack on the bubble's
// clock: the three requests the requester's bucket cannot pay for are
// confirmed at once as "later", and each is answered when the confirm
// said (never later), one packet's bytes at the requester's rate after
// the one before, to the microsecond, with no pause guessed by the test.
func TestServerHoldsBackOnVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := cachedSession(t, "HOLD", 1, 1001, 100, CacheConfig{})
		const rate = 30_000 // bytes/s: a 1472-byte packet every 49 ms
		mc := newMemConn()
		srv, err := NewServer(ServerConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"), Sources: []Source{c},
			RateBytes: 1e6, RequesterRateBytes: rate, CoalesceWindow: -1, Wrap: mc.wrap})
		require.NoError(t, err)
		defer srv.Close()
		from := netip.MustParseAddrPort("127.0.0.7:4000")
		t0 := time.Now()
		for i := range 4 { // four full packets: the first is paid at once
			mc.in <- sock.Message{Buf: request(s, wire.Seq(1+100*i), 100), Addr: from}
		}
		// Seven datagrams are owed: four answers and three confirms. The
		// bubble's clock runs on while the server waits on its bucket.
		for range 7 {
			<-mc.wrote
		}
		synctest.Wait()

		mc.mu.Lock()
		defer mc.mu.Unlock()
		var confirms []wire.Confirm
		var answered []time.Duration
		var sizes []int
		for _, d := range mc.sent {
			require.Equal(t, from, d.to)
			if cf, err := wire.ParseConfirm(d.data); err == nil {
				require.Equal(t, t0, d.at, "confirmed at once")
				confirms = append(confirms, cf)
				continue
			}
			pkt, err := wire.ParsePacket(d.data)
			require.NoError(t, err)
			require.EqualValues(t, 1+100*len(answered), pkt.Seq)
			answered = append(answered, d.at.Sub(t0))
			sizes = append(sizes, len(d.data))
		}
		require.Len(t, answered, 4, "every request answered, one packet each")
		require.Len(t, confirms, 3, "the three held back are confirmed")
		require.Zero(t, answered[0], "the first is paid at once")
		for i, cf := range confirms {
			require.Equal(t, wire.ConfirmLater, cf.Kind)
			require.EqualValues(t, 1+100*(i+1), cf.Seq)
			promised := time.Duration(cf.After) * time.Microsecond
			t.Logf("held %d: confirmed for %v, answered at %v", i+1, promised, answered[i+1])
			// Never later than promised (After is whole microseconds,
			// rounded down), so the requester need not ask again; the
			// promise counts a full payload per packet, so it may come a
			// little sooner.
			require.LessOrEqual(t, answered[i+1], promised+time.Microsecond)
			require.Greater(t, answered[i+1], promised-time.Millisecond)
			// Paced by the requester's bucket: a held answer leaves one
			// packet's bytes after the held one before it (the first held
			// one follows what the bucket's initial tokens paid).
			if i > 0 {
				gap := time.Duration(float64(sizes[i]) / rate * float64(time.Second))
				require.InDelta(t, float64(gap), float64(answered[i+1]-answered[i]), float64(time.Microsecond), "packet %d", i+1)
			}
		}
		st := srv.Stats()
		require.EqualValues(t, 3, st.Deferred)
		require.EqualValues(t, 3, st.DeferredAnswered)
		require.Zero(t, st.Refused.Total())
	})
}
