// Package packetconn defines the socket hook of mdbus: the interface
// through which publishers, subscribers and retransmit servers move
// datagrams in batches. Their configurations take a
//
//	Wrap func(packetconn.PacketConn) packetconn.PacketConn
//
// that receives each socket the component opened and returns what the
// component uses instead, for example a wrapper that drops, delays,
// duplicates or records datagrams (packetconn/impair is one).
//
// A wrapper forwards ReadBatch and WriteBatch to the inner PacketConn with
// the same Batch, or with a Batch of its own made by NewBatch; it leaves
// Batch.Impl to the socket.
package packetconn

import (
	"net/netip"
	"time"
)

// PacketConn is a UDP socket with batched I/O.
type PacketConn interface {
	// ReadBatch receives up to len(b.Msgs) datagrams, blocking until at
	// least one arrives, the read deadline passes or the conn is closed,
	// and returns how many of b.Msgs it filled. Each filled Msgs[i].Buf
	// is b.Buffer(i) cut to the datagram's length, or bytes the conn
	// owns, no longer than b.Buffer(i) (a UDP_GRO socket hands out slices
	// of the trains it read; packetconn/impair its own inner batch's when
	// a datagram passes straight through). Either way they stay as they
	// are until the next ReadBatch on the same conn and no longer: a
	// caller that keeps a datagram past that copies it, and never writes
	// into Buf.
	ReadBatch(b *Batch) (int, error)
	// WriteBatch sends b.Msgs[:n], each Buf to its Addr, and returns how
	// many were sent.
	WriteBatch(b *Batch, n int) (int, error)
	// WriteTo sends one datagram.
	WriteTo(p []byte, to netip.AddrPort) error
	// SetReadDeadline sets the deadline for ReadBatch; zero means none.
	SetReadDeadline(t time.Time) error
	// LocalAddr is the address the socket is bound to.
	LocalAddr() netip.AddrPort
	// Close closes the socket and unblocks a pending ReadBatch.
	Close() error
}

// TryReader is a PacketConn that can also read without waiting, as the
// sockets mdbus opens can: TryReadBatch reads what is queued already
// (0 when nothing is) and may run while another goroutine is blocked in
// ReadBatch on the same socket. A busy goroutine uses it to pick up
// datagrams a parked reader would otherwise wait for the OS to be
// scheduled to read (a subscriber's feed reader takes repairs this way,
// a publisher's sending goroutine re-requests). A wrapper that does not
// forward it is simply read by its own reader.
type TryReader interface {
	PacketConn
	TryReadBatch(b *Batch) (int, error)
}

// Message is one datagram in a Batch.
type Message struct {
	// Buf holds the datagram. On receive ReadBatch points it at the
	// message's buffer cut to the datagram's size; on send its length is
	// what is sent.
	Buf []byte
	// Addr is the source on receive, the destination on send.
	Addr netip.AddrPort
	// Dst is the destination address of a received datagram (from
	// IP_PKTINFO or IPV6_PKTINFO); invalid when the kernel did not say.
	Dst netip.Addr
	// IfIndex is the interface a datagram arrived on, 0 if unknown.
	IfIndex int
	// KernelTime is the kernel's receive time in Unix nanoseconds when
	// the socket asked for timestamps, else 0.
	KernelTime int64
	// Truncated reports that the datagram was larger than its buffer.
	Truncated bool
}

// Batch is a preallocated set of messages. A Batch belongs to one
// goroutine at a time.
type Batch struct {
	Msgs []Message
	// Drops is the kernel's running count of datagrams the socket dropped
	// because its receive buffer was full (SO_RXQ_OVFL), as last reported.
	Drops uint32
	// Impl is state the socket implementation keeps with the batch (the
	// kernel structures of recvmmsg and sendmmsg), made on first use.
	// Code other than the socket leaves it alone.
	Impl any
	bufs [][]byte
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
	return b
}

// Buffer returns message i's receive buffer at its full size, whatever
// Msgs[i].Buf points at now. It returns nil for a Batch not made by
// NewBatch.
func (b *Batch) Buffer(i int) []byte {
	if i < len(b.bufs) {
		return b.bufs[i]
	}
	return nil
}
