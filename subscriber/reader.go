package subscriber

import (
	"net/netip"
	"runtime"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/packetconn"
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
	// polls are the repair readers whose sockets this feed reader reads
	// too, without waiting, after each batch while a gap waits for its
	// repair and the program runs on one Go processor (see pollRepairs);
	// pollBatch is its batch for them.
	polls     []*reader
	pollBatch *sock.Batch
	// oneP is whether GOMAXPROCS was 1 at procsAt, looked up again every
	// procsEvery (the runtime may change it: a program's own call, or the
	// Go runtime following a container's CPU limit).
	oneP    bool
	procsAt monotime.Time
	// nakPoll, on a feed reader of a subscriber that sends re-requests,
	// sends the ones due in the timer goroutine's stead (see readOnce).
	nakPoll func()
}

// procsEvery is how often a feed reader looks up GOMAXPROCS: the lookup
// takes the scheduler's lock, too dear for every batch.
const procsEvery = 100 * time.Millisecond

// onOneP reports whether the program runs on one Go processor, as looked
// up at most procsEvery ago. r.c.mu must be held.
func (r *reader) onOneP(now monotime.Time) bool {
	if now.Sub(r.procsAt) >= procsEvery || r.procsAt == 0 {
		r.oneP, r.procsAt = runtime.GOMAXPROCS(0) == 1, now
	}
	return r.oneP
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
	if n > pollChunk && (len(r.polls) > 0 || r.nakPoll != nil) {
		r.handleChunks(r.batch, n, now)
	} else {
		r.handleLocked(r.batch, n, now)
	}
	nakDue := false
	if (len(r.polls) > 0 || r.nakPoll != nil) && r.c.awaitsRepair() && r.onOneP(now) {
		r.pollRepairs()
		nakDue = r.nakPoll != nil && r.c.timerAt <= now
	}
	r.c.mu.Unlock()
	if nakDue {
		r.nakPoll()
	}
	return nil
}

// pollRepairs reads the repair sockets without waiting and handles what
// was queued there, as their own readers would. A feed reader does this,
// and sends the re-requests that fell due (nakPoll), after each batch
// while a gap waits (core.awaitsRepair) and the program has one Go
// processor (GOMAXPROCS=1: a feed handler pinned to one core, or a
// container limited to one CPU). The repair reader is parked in the
// network poller and the timer goroutine on a timer, and Go polls the
// network only when a processor has nothing else to run, or every 10 ms
// from its monitor thread: a feed reader kept busy by the feed holds the
// one processor, so repairs and re-requests waited while every packet
// behind their gap waited with them. With more processors an idle one
// waits in the poller and wakes those goroutines at once, and the polls'
// system calls cost more than they saved (in the demo's small batches they
// pushed subscribers into a backlog), so there they are off. Doing the
// timer's work early loses no wake-up: the timer goroutine still wakes
// when it would have and finds what is left. A read error is left to the
// socket's own reader, which reports it. A feed reader handed a large
// batch does the same between its chunks on any number of processors
// (see handleChunks). r.c.mu must be held.
func (r *reader) pollRepairs() {
	for _, p := range r.polls {
		n, err := p.conn.(packetconn.TryReader).TryReadBatch(r.pollBatch)
		if err != nil || n == 0 {
			continue
		}
		// The kernel's drop count is left to the socket's own reader: the
		// two reads may be handled out of order, and the count runs on.
		r.pollBatch.Drops = p.ovfl
		p.handleLocked(r.pollBatch, n, monotime.Now())
	}
}

// handleLocked handles b.Msgs[:n], read from r's socket. r.c.mu must be
// held.
func (r *reader) handleLocked(b *sock.Batch, n int, now monotime.Time) {
	r.handleRange(b, 0, n, now)
	r.countDrops(b)
}

// pollChunk is how many datagrams of a large batch a feed reader handles
// between two looks at the repair sockets (see handleChunks).
const pollChunk = 32

// handleChunks handles b.Msgs[:n], read from a feed socket, pollChunk
// datagrams at a time, and between two chunks, while a gap waits for its
// repair, reads the repair sockets without waiting and sends the
// re-requests that fell due (pollRepairs, nakPoll), on any number of Go
// processors. A batch this large means the feed keeps the reader busy:
// it holds the core's lock for the whole batch (about half a millisecond
// for 256 datagrams of 22 messages), and the repair reader and the timer
// goroutine, woken for a repair or a re-request due, wait for it, then for
// a CPU, while every packet behind the gap is held, copied and left to go
// cold. Taken between chunks, the repair comes in behind at most 32
// datagrams. In `mdbus bench throughput --procs --with-loss --loss 0.01
// --rate 7M` the time from a gap to its repair fell from 0.7-1.6 ms to
// 0.36-0.52 ms at the median, at the same CPU per message (BENCHMARKS.md,
// "Repairs between chunks"). Small batches (a reader that keeps up, or a
// UDP_GRO socket reading plain datagrams, at most 8 a read) are handled
// whole, as before: there the polls' system calls cost more than they
// save. r.c.mu must be held; nakPoll runs without it.
func (r *reader) handleChunks(b *sock.Batch, n int, now monotime.Time) {
	for i := 0; i < n; {
		j := min(i+pollChunk, n)
		r.handleRange(b, i, j, now)
		i = j
		if i == n || !r.c.awaitsRepair() {
			continue
		}
		r.pollRepairs()
		if r.nakPoll != nil && r.c.timerAt <= monotime.Now() {
			r.c.mu.Unlock()
			r.nakPoll()
			r.c.mu.Lock()
		}
	}
	r.countDrops(b)
}

// countDrops adds what the kernel's drop count of b moved by since r last
// looked: SO_RXQ_OVFL is a running uint32 count. r.c.mu must be held.
func (r *reader) countDrops(b *sock.Batch) {
	if d := b.Drops; d != r.ovfl {
		r.c.st.KernelDrops += uint64(d - r.ovfl)
		r.ovfl = d
	}
}

// handleRange handles b.Msgs[from:to], read from r's socket. r.c.mu must
// be held.
func (r *reader) handleRange(b *sock.Batch, from, to int, now monotime.Time) {
	c := r.c
	for i := from; i < to; i++ {
		m := &b.Msgs[i]
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
