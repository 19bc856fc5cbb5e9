package subscriber

import (
	"net/netip"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
)

// reader moves datagrams from one socket into the core: one ReadBatch,
// then one lock of the core for the whole batch. A subscriber has one per
// socket (the primary feed, and the secondary feed, the repair group and
// the unicast repair socket when configured), each run by its own
// goroutine; they share the core under its mutex. A reader is used by one
// goroutine.
type reader struct {
	conn  sock.PacketConn
	batch *sock.Batch
	c     *core
	// group is the destination a datagram must carry; invalid accepts any
	// (a unicast repair socket).
	group netip.Addr
	// source, when valid, is the only sender accepted (SSM).
	source netip.Addr
	// repair marks the datagrams as repairs (see core.handlePacket).
	repair bool
	// from, when valid, is the only sender accepted on the repair group
	// (port 0: any port). With repair set and from invalid, every sender
	// is accepted and counted as unverified. The unicast repair socket
	// (feed FeedRepair) accepts only the retransmitters (core.ask).
	from netip.AddrPort
	// feed is the socket's role, for the per-feed counters.
	feed Feed
	// done is closed when the goroutine reading this socket stops.
	done chan struct{}
	// ovfl is the kernel's drop counter as last reported on this socket.
	ovfl uint32
}

// readOnce reads one batch and handles it. It blocks until a datagram
// arrives, the read deadline passes or the socket is closed. It does not
// allocate unless a packet must be held and no free reorder slot has room.
func (r *reader) readOnce() error {
	n, err := r.conn.ReadBatch(r.batch)
	if err != nil {
		return err
	}
	now := monotime.Now()
	r.c.mu.Lock()
	r.handleLocked(n, now)
	r.c.mu.Unlock()
	return nil
}

// handleLocked handles r.batch.Msgs[:n]. r.c.mu must be held.
func (r *reader) handleLocked(n int, now monotime.Time) {
	c := r.c
	for i := range r.batch.Msgs[:n] {
		m := &r.batch.Msgs[i]
		c.st.Datagrams++
		c.st.FeedDatagrams[r.feed]++
		src := sock.Unmap(m.Addr)
		a := arrival{now: now, src: src, feed: r.feed, repair: r.repair}
		switch {
		case m.Truncated:
			c.drop(DropTruncatedDatagram)
		case r.group.IsValid() && m.Dst.IsValid() && m.Dst.Unmap() != r.group:
			// Another group's traffic reaching the wildcard-bound
			// socket (Go issue 73484), or unicast to our port.
			c.drop(DropWrongGroup)
		case r.source.IsValid() && src.Addr() != r.source:
			c.drop(DropWrongSource)
		case r.repair && !r.trusted(src, now):
			c.drop(DropUntrustedRepair)
		case r.repair && wire.IsConfirm(m.Buf):
			c.handleConfirm(a, m.Buf)
		default:
			c.handleDatagram(a, m.Buf)
		}
	}
	// SO_RXQ_OVFL is a running uint32 count; add what it moved by.
	if d := r.batch.Drops; d != r.ovfl {
		c.st.KernelDrops += uint64(d - r.ovfl)
		r.ovfl = d
	}
}

// trusted reports whether a repair from src may be used, counting the
// ones accepted unchecked, and notes an answer from the retransmitter
// being asked (see asker).
func (r *reader) trusted(src netip.AddrPort, now monotime.Time) bool {
	switch {
	case r.feed == FeedRepair && r.c.cfg.retrPort != 0:
		// A source's own retransmitter: its address is checked against
		// the stream's in core.handlePacket.
		return src.Port() == r.c.cfg.retrPort
	case r.feed == FeedRepair:
		return r.c.ask.trusts(src, now)
	case !r.from.IsValid():
		r.c.st.UnverifiedRepairs++
	case src.Addr() != r.from.Addr(), r.from.Port() != 0 && src.Port() != r.from.Port():
		return false
	}
	r.c.ask.hear(now)
	return true
}
