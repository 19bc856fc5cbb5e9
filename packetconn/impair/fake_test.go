package impair

import (
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// fakeConn is an in-memory sock.PacketConn: push queues datagrams for
// ReadBatch (which honours deadlines and Close like a socket), and writes
// are recorded (or only counted, with discard). It does not allocate in
// steady state when pushes stay within the queue's capacity and discard is
// set.
type fakeConn struct {
	mu       sync.Mutex
	q        [][]byte // queued for reading, q[qh:]
	qh       int
	wake     chan struct{}
	deadline time.Time
	closed   bool
	timer    *time.Timer
	from     netip.AddrPort

	discard bool
	sent    []sentDgram
	nsent   int
}

type sentDgram struct {
	data []byte
	to   netip.AddrPort
	at   time.Time
}

// Errors as a socket returns them, made once so the fake does not allocate.
var (
	errFakeClosed  = &net.OpError{Op: "recvmmsg", Net: "udp", Err: net.ErrClosed}
	errFakeTimeout = &net.OpError{Op: "recvmmsg", Net: "udp", Err: os.ErrDeadlineExceeded}
)

var fakeAddr = netip.MustParseAddrPort("127.0.0.9:4000")

func newFake(t testing.TB) *fakeConn {
	t.Helper()
	tm := time.NewTimer(time.Hour)
	tm.Stop()
	f := &fakeConn{wake: make(chan struct{}, 1), timer: tm, from: fakeAddr, q: make([][]byte, 0, 1024)}
	t.Cleanup(func() { f.Close() })
	return f
}

func (f *fakeConn) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// push queues datagrams to be read; they are referenced, not copied.
func (f *fakeConn) push(ds ...[]byte) {
	f.mu.Lock()
	f.q = append(f.q, ds...)
	f.mu.Unlock()
	f.signal()
}

func (f *fakeConn) ReadBatch(b *sock.Batch) (int, error) {
	for {
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			return 0, errFakeClosed
		}
		if f.qh < len(f.q) {
			n := 0
			for n < len(b.Msgs) && f.qh < len(f.q) {
				d := f.q[f.qh]
				f.q[f.qh] = nil
				f.qh++
				buf := b.Msgs[n].Buf[:cap(b.Msgs[n].Buf)]
				c := copy(buf, d)
				b.Msgs[n] = sock.Message{Buf: buf[:c], Addr: f.from, Truncated: c < len(d)}
				n++
			}
			if f.qh == len(f.q) {
				f.q, f.qh = f.q[:0], 0
			}
			f.mu.Unlock()
			return n, nil
		}
		dl := f.deadline
		f.mu.Unlock()
		if dl.IsZero() {
			<-f.wake
			continue
		}
		d := time.Until(dl)
		if d <= 0 {
			return 0, errFakeTimeout
		}
		f.timer.Reset(d)
		select {
		case <-f.wake:
		case <-f.timer.C:
		}
		f.timer.Stop()
	}
}

func (f *fakeConn) record(p []byte, to netip.AddrPort) {
	f.nsent++
	if !f.discard {
		f.sent = append(f.sent, sentDgram{data: append([]byte(nil), p...), to: to, at: time.Now()})
	}
}

func (f *fakeConn) WriteBatch(b *sock.Batch, n int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, net.ErrClosed
	}
	for i := range n {
		f.record(b.Msgs[i].Buf, b.Msgs[i].Addr)
	}
	return n, nil
}

func (f *fakeConn) WriteTo(p []byte, to netip.AddrPort) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return net.ErrClosed
	}
	f.record(p, to)
	return nil
}

func (f *fakeConn) SetReadDeadline(t time.Time) error {
	f.mu.Lock()
	f.deadline = t
	f.mu.Unlock()
	f.signal()
	return nil
}

func (f *fakeConn) LocalAddr() netip.AddrPort { return fakeAddr }

func (f *fakeConn) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return net.ErrClosed
	}
	f.closed = true
	f.signal()
	return nil
}

// sentSnapshot returns a copy of the datagrams written so far.
func (f *fakeConn) sentSnapshot() []sentDgram {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sentDgram(nil), f.sent...)
}

var testSession = wire.Session{'I', 'M', 'P', 'A', 'I', 'R', ' ', ' ', ' ', ' '}

// readAll reads from c until it has got want datagrams or until timeout
// passes without one, returning the sequences in order.
func readAll(t testing.TB, c sock.PacketConn, want int, timeout time.Duration) []wire.Seq {
	t.Helper()
	b := sock.NewBatch(16, 2048)
	var got []wire.Seq
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(timeout)))
		n, err := c.ReadBatch(b)
		if sock.IsTimeout(err) {
			break
		}
		require.NoError(t, err)
		for _, m := range b.Msgs[:n] {
			got = append(got, seqOf(t, m.Buf))
		}
	}
	return got
}

func seqs(from, to wire.Seq) []wire.Seq {
	var s []wire.Seq
	for q := from; q <= to; q++ {
		s = append(s, q)
	}
	return s
}
