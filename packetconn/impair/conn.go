package impair

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/mdbus/mdbus/internal/sock"
)

// Conn is an impaired sock.PacketConn: a Receiver impairs what ReadBatch
// returns and passes writes through; a Sender impairs what WriteBatch and
// WriteTo send and passes reads through. See the package doc for the
// semantics, buffers and concurrency.
type Conn struct {
	inner  sock.PacketConn
	st     counters
	closed atomic.Bool
	r      *recvSide // Receiver
	s      *sendSide // Sender
}

var _ sock.PacketConn = (*Conn)(nil)

// Receiver returns a wrap function (for the Wrap field of publisher,
// subscriber and retransmit configs) that impairs what each wrapped
// connection receives: every receiver loses, duplicates and reorders
// independently. The n-th connection it wraps (from 0) uses PCG stream
// cfg.Stream+n. It panics if cfg is invalid, as regexp.MustCompile does:
// it is meant for test setup; NewReceiver returns the error instead.
func Receiver(cfg Config) func(sock.PacketConn) sock.PacketConn {
	return wrapper(cfg, false)
}

// Sender returns a wrap function that impairs what each wrapped connection
// sends: loss, duplication and reordering happen once, before the
// network, so every receiver of a group sees the same (correlated)
// impairment. Streams and panics as for Receiver.
func Sender(cfg Config) func(sock.PacketConn) sock.PacketConn {
	return wrapper(cfg, true)
}

func wrapper(cfg Config, send bool) func(sock.PacketConn) sock.PacketConn {
	s, err := cfg.withDefaults()
	if err != nil {
		panic(err)
	}
	var n atomic.Uint64
	return func(pc sock.PacketConn) sock.PacketConn {
		c := newConn(pc, s, send, s.Stream+n.Add(1)-1)
		if cfg.OnWrap != nil {
			cfg.OnWrap(c)
		}
		return c
	}
}

// NewReceiver wraps inner as Receiver does, with PCG stream cfg.Stream
// (cfg.OnWrap is not called).
func NewReceiver(inner sock.PacketConn, cfg Config) (*Conn, error) {
	s, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return newConn(inner, s, false, s.Stream), nil
}

// NewSender wraps inner as Sender does, with PCG stream cfg.Stream
// (cfg.OnWrap is not called).
func NewSender(inner sock.PacketConn, cfg Config) (*Conn, error) {
	s, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return newConn(inner, s, true, s.Stream), nil
}

func newConn(inner sock.PacketConn, s settings, send bool, stream uint64) *Conn {
	c := &Conn{inner: inner}
	if send {
		c.s = newSendSide(c, s, stream)
	} else {
		c.r = newRecvSide(c, s, stream)
	}
	return c
}

// StatsOf returns the Stats of pc when it is a *Conn.
func StatsOf(pc sock.PacketConn) (Stats, bool) {
	c, ok := pc.(*Conn)
	if !ok {
		return Stats{}, false
	}
	return c.Stats(), true
}

// Stats returns the counts so far. It is safe to call from any goroutine
// at any time, also after Close.
func (c *Conn) Stats() Stats { return c.st.snapshot() }

// Inner returns the wrapped connection.
func (c *Conn) Inner() sock.PacketConn { return c.inner }

// ReadBatch reads b.Msgs[:n] through the impairment (Receiver) or directly
// (Sender). See the package doc, "Receiver deadlines", for how the read
// deadline is honoured.
func (c *Conn) ReadBatch(b *sock.Batch) (int, error) {
	if c.r == nil {
		return c.inner.ReadBatch(b)
	}
	return c.r.readBatch(b)
}

// WriteBatch sends b.Msgs[:n] through the impairment (Sender) or directly
// (Receiver). A Sender returns n when all n were processed, whether
// dropped, held or sent: drops are the network's, invisible to a sender.
func (c *Conn) WriteBatch(b *sock.Batch, n int) (int, error) {
	if c.s == nil {
		return c.inner.WriteBatch(b, n)
	}
	return c.s.writeBatch(b.Msgs[:max(0, min(n, len(b.Msgs)))])
}

// WriteTo sends one datagram through the impairment (Sender) or directly
// (Receiver).
func (c *Conn) WriteTo(p []byte, to netip.AddrPort) error {
	if c.s == nil {
		return c.inner.WriteTo(p, to)
	}
	return c.s.writeTo(p, to)
}

// SetReadDeadline sets the caller's read deadline; a zero t means none.
// On a Receiver the inner connection gets the earlier of t and the time the
// next held datagram is due while a ReadBatch waits for it.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.r == nil {
		return c.inner.SetReadDeadline(t)
	}
	return c.r.setReadDeadline(t)
}

// LocalAddr is the inner connection's address.
func (c *Conn) LocalAddr() netip.AddrPort { return c.inner.LocalAddr() }

// Close closes the inner connection. A Sender first stops its goroutine
// and sends every datagram it still holds, at once (counted as Forced); a
// Receiver discards what it holds. Close returns the inner Close error
// joined with the first background send error, if any. Later calls return
// ErrClosed.
func (c *Conn) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	if c.s != nil {
		return c.s.close()
	}
	return c.inner.Close()
}
