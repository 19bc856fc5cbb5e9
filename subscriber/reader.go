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
		case r.repair && !r.trusted(a, m.Buf):
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

// trusted reports whether b, a repair or confirm that arrived as a, may
// be used, counting the ones accepted unchecked, and notes an answer from
// the retransmitter being asked (see asker). It is the one place that
// decides who may repair a stream, before anything of b is used or
// counted: on the unicast repair socket, the retransmitters asked
// (Config.Recovery.Retransmitter and Backups), or with RetransmitPort the port at
// the address of the stream the datagram names (each source's
// retransmitter answers for its own streams); on the repair group, the
// RepairSource when set. r.c.mu must be held.
func (r *reader) trusted(a arrival, b []byte) bool {
	c := r.c
	switch {
	case a.feed == FeedRepair && c.cfg.retrPort != 0:
		if a.src.Port() != c.cfg.retrPort {
			return false
		}
		// A session with no stream yet (or a header too short to name
		// one) is left to the handling: dropped as an unknown repair or
		// a malformed datagram, or, a confirm, ignored.
		h, err := wire.ParseHeader(b)
		if err != nil {
			return true
		}
		s := c.bySession[h.Session]
		return s == nil || s.key.source.Addr() == a.src.Addr()
	case a.feed == FeedRepair:
		return c.ask.trusts(a.src, a.now)
	case !r.from.IsValid():
		c.st.UnverifiedRepairs++
	case a.src.Addr() != r.from.Addr(), r.from.Port() != 0 && a.src.Port() != r.from.Port():
		return false
	}
	c.ask.hear(a.now)
	return true
}
