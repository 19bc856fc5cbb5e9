package sock

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// Message is one datagram in a Batch.
type Message struct {
	// Buf holds the datagram. On receive its capacity is what may be
	// filled and ReadBatch sets its length to the datagram's size; on send
	// its length is what is sent.
	Buf []byte
	// Addr is the source on receive, the destination on send.
	Addr netip.AddrPort
	// Dst is the destination address of a received datagram (from
	// IP_PKTINFO or IPV6_PKTINFO); invalid when the kernel did not say.
	Dst netip.Addr
	// IfIndex is the interface a datagram arrived on, 0 if unknown.
	IfIndex int
	// KernelTime is the kernel's receive time in Unix nanoseconds when
	// Config.Timestamps is set, else 0.
	KernelTime int64
	// Truncated reports that the datagram was larger than Buf.
	Truncated bool
}

// Batch is a preallocated set of messages and the kernel structures behind
// them. A Batch belongs to one goroutine at a time.
type Batch struct {
	Msgs []Message
	// Drops is the kernel's running count of datagrams this socket dropped
	// because its receive buffer was full (SO_RXQ_OVFL), as last reported.
	Drops uint32
	sys   batchSys
	bufs  [][]byte // the full-capacity receive buffers
}

// NewBatch returns a batch of n messages, each with a buffer of bufSize
// bytes for receiving. For sending, point Msgs[i].Buf at the bytes to send.
func NewBatch(n, bufSize int) *Batch {
	b := &Batch{Msgs: make([]Message, n), bufs: make([][]byte, n)}
	backing := make([]byte, n*bufSize)
	for i := range b.Msgs {
		b.bufs[i] = backing[i*bufSize : (i+1)*bufSize : (i+1)*bufSize]
		b.Msgs[i].Buf = b.bufs[i]
	}
	b.sys.init(n)
	return b
}

// Config describes a socket to open.
type Config struct {
	// Local is the address to bind. For a receiver of a group it is the
	// wildcard address with the group's port; for a sender, the source
	// address (optionally) and port 0.
	Local netip.AddrPort
	// Interface is the multicast interface (sending and joining). Nil
	// leaves the kernel's choice, which only unicast sockets should do.
	Interface *net.Interface
	// ReusePort sets SO_REUSEADDR and SO_REUSEPORT so several receivers
	// can bind one port.
	ReusePort bool
	// TTL is the multicast TTL (IPv4) or hop limit (IPv6). 0 keeps
	// packets on this host.
	TTL int
	// Loopback enables IP_MULTICAST_LOOP, so receivers on this host hear
	// what this socket sends.
	Loopback bool
	// ReadBuffer and WriteBuffer request SO_RCVBUF and SO_SNDBUF bytes;
	// 0 keeps the kernel default. The kernel caps a request at
	// net.core.rmem_max (wmem_max); when it does and the process holds
	// CAP_NET_ADMIN in the host's user namespace, Open asks again with
	// SO_RCVBUFFORCE (SO_SNDBUFFORCE), which is not capped, as a feed
	// handler run with that capability does. Without it the capped size
	// stays.
	ReadBuffer, WriteBuffer int
	// Timestamps asks for kernel receive timestamps (SO_TIMESTAMPNS).
	Timestamps bool
	// BusyPoll makes ReadBatch retry a non-blocking recvmmsg for up to
	// this long before it parks the goroutine in the network poller: a
	// datagram that arrives meanwhile is read by a goroutine already on
	// a CPU instead of one the poller and the OS scheduler must wake
	// (the tail of the receive path on a busy machine). It costs a CPU
	// spinning while the feed is quiet for less than BusyPoll. 0 (the
	// default) never spins; at most MaxBusyPoll.
	BusyPoll time.Duration
}

// MaxBusyPoll bounds Config.BusyPoll: Close waits for a spinning
// ReadBatch to give up, so the spin must stay short.
const MaxBusyPoll = 10 * time.Millisecond

// Conn is a UDP socket with batched I/O.
type Conn struct {
	uc  *net.UDPConn
	v6  bool
	sys connSys
	// ReadBufferGranted and WriteBufferGranted are the buffer sizes the
	// kernel granted (it doubles the request and caps it at
	// net.core.rmem_max / wmem_max unless forced, see Config); read back
	// after Open.
	ReadBufferGranted, WriteBufferGranted int
}

// ErrClosed is returned by operations on a closed Conn.
var ErrClosed = net.ErrClosed

// Open opens a UDP socket bound to cfg.Local.
func Open(cfg Config) (*Conn, error) {
	if cfg.BusyPoll < 0 || cfg.BusyPoll > MaxBusyPoll {
		return nil, fmt.Errorf("sock: busy poll %v out of range [0, %v]", cfg.BusyPoll, MaxBusyPoll)
	}
	if !cfg.Local.IsValid() {
		return nil, fmt.Errorf("sock: open: invalid local address")
	}
	return open(cfg)
}

// Join joins group on ifi, from any source, or only from source when it is
// valid (source-specific multicast).
func (c *Conn) Join(ifi *net.Interface, group, source netip.Addr) error {
	if !group.IsMulticast() {
		return fmt.Errorf("sock: join %s: not a multicast address", group)
	}
	if err := c.join(ifi, group, source); err != nil {
		name := "default interface"
		if ifi != nil {
			name = ifi.Name
		}
		return fmt.Errorf("sock: join %s on %s: %w", group, name, err)
	}
	return nil
}

// LocalAddr is the address the socket is bound to.
func (c *Conn) LocalAddr() netip.AddrPort {
	return c.uc.LocalAddr().(*net.UDPAddr).AddrPort()
}

// IPv6 reports whether the socket is IPv6.
func (c *Conn) IPv6() bool { return c.v6 }

// SetReadDeadline sets the deadline for ReadBatch; a zero t means none.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.uc.SetReadDeadline(t) }

// WriteTo sends one datagram, for the rare non-batched send (re-requests).
func (c *Conn) WriteTo(b []byte, to netip.AddrPort) error {
	_, err := c.uc.WriteToUDPAddrPort(b, to)
	return err
}

// Close closes the socket, unblocking a pending ReadBatch or WriteBatch.
func (c *Conn) Close() error { return c.uc.Close() }

// IsTimeout reports whether err is a deadline expiry.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Unmap returns a with an IPv4-mapped IPv6 address turned to IPv4.
func Unmap(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

// PacketConn is what publishers, subscribers and servers move datagrams
// through. *Conn implements it; the impairment layer (tools/impair) wraps it
// to drop, duplicate, reorder and delay datagrams in tests.
type PacketConn interface {
	// ReadBatch fills b.Msgs[:n] and returns n; see Conn.ReadBatch.
	ReadBatch(b *Batch) (int, error)
	// WriteBatch sends b.Msgs[:n]; see Conn.WriteBatch.
	WriteBatch(b *Batch, n int) (int, error)
	// WriteTo sends one datagram.
	WriteTo(p []byte, to netip.AddrPort) error
	SetReadDeadline(t time.Time) error
	LocalAddr() netip.AddrPort
	Close() error
}

var _ PacketConn = (*Conn)(nil)
