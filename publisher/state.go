package publisher

import (
	"sync/atomic"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/wire"
)

// role is who holds the sending role, the right to hand packets to the
// kernel and call the Sinks, and whether what publishers left meanwhile
// belongs to the sending goroutine. See the package doc, "Send state".
type role uint8

const (
	// free: nobody sends. The next Publish may take the role (SendAuto,
	// SendInline), or the sending goroutine does.
	free role = iota
	// busy: one goroutine sends; nobody published meanwhile.
	busy
	// busyBurst: one goroutine sends, and others published meanwhile.
	busyBurst
	// handedOff: nobody sends, and what piled up during the last send
	// waits for the sending goroutine, which was woken for it: no Publish
	// takes the role until the goroutine has taken that pile.
	handedOff
)

// held reports that a goroutine is sending.
func (r role) held() bool { return r == busy || r == busyBurst }

// finished is the role after its holder's send: free, or handedOff when
// others published meanwhile.
func (r role) finished() role {
	if r == busyBurst {
		return handedOff
	}
	return free
}

// control is the role while the sending goroutine sends a heartbeat or an
// end of session: held, and a pile that was the goroutine's stays its own.
func (r role) control() role {
	if r == handedOff {
		return busyBurst
	}
	return busy
}

// phase is the publication's life.
type phase uint8

const (
	// live: Publish and PublishBatch are accepted.
	live phase = iota
	// closing: Close has started. New calls return ErrClosed; calls under
	// way finish (a rate wait is interrupted).
	closing
	// draining: no call is under way. The sending goroutine sends what is
	// pending at once (nothing lingers), then the end of session, repeats
	// it over the grace, and exits.
	draining
)

// ring holds the packets in flight, numbered by uint64 counters: packets
// [done, taken) are being sent by the holder of the sending role, [taken,
// sealed) are sealed and wait, and when open is set, packet sealed is
// being filled by enc; packet k is pkts[k%q], at most q of them filling
// or in flight. Their buffers (PayloadSize bytes each) come from free.
// Without a keeper a sent packet's buffer goes back to free at once, so q
// buffers serve. With a keeper (a RetainingSink), a sent packet it keeps
// in place (keptInPlace) stays in its buffer, queued in kept, until the
// ring needs the buffer: then the oldest kept packets are released to the
// keeper and their buffers reused. The ring then has up to q+retain
// buffers, allocated a block at a time as needed, so a feed of small
// packets (copied, not kept) uses no more than q. The Publication guards
// it with mu.
type ring struct {
	q                   uint64
	payload             int
	pkts                [][]byte // sealed packets: pkts[k%q] is packet k
	free                [][]byte // empty buffers
	allocated, total    int      // buffers allocated, and at most
	keeper              RetainingSink
	kept                [][]byte // FIFO of sent packets kept in place: kept[keptHead], ... keptN of them
	keptHead, keptN     int
	enc                 wire.Encoder
	open                bool
	openedAt            monotime.Time // when the open packet got its first message (with Linger)
	done, taken, sealed uint64
}

// ringBlock is the most buffer bytes allocated at once beyond the first
// q buffers.
const ringBlock = 1 << 20

// newRing makes a ring of q packets; with keeper, up to retain more
// buffers hold packets kept in place.
func newRing(q, retain, payloadSize int, keeper RetainingSink) ring {
	r := ring{q: uint64(q), payload: payloadSize, pkts: make([][]byte, q), total: q}
	if keeper != nil {
		r.keeper, r.total = keeper, q+retain
		r.kept = make([][]byte, r.total)
	}
	r.alloc(q) // the queue's buffers now
	return r
}

// alloc allocates n buffers, prefaulted, into free.
func (r *ring) alloc(n int) {
	backing := make([]byte, n*r.payload)
	prefault(backing)
	for i := range n {
		r.free = append(r.free, backing[i*r.payload:i*r.payload:(i+1)*r.payload])
	}
	r.allocated += n
}

// buffer returns an empty buffer for the next packet: a free one, a new
// one while the ring may grow, or one released by the keeper. There is
// always one: at most q-1 packets are in flight when a packet opens, and
// the other buffers are free or kept.
func (r *ring) buffer() []byte {
	if len(r.free) == 0 {
		if r.allocated < r.total {
			r.alloc(min(r.total-r.allocated, max(1, ringBlock/r.payload)))
		} else {
			r.releaseKept()
		}
	}
	buf := r.free[len(r.free)-1]
	r.free[len(r.free)-1] = nil
	r.free = r.free[:len(r.free)-1]
	return buf
}

// releaseBatch is how many kept packets releaseKept gives back to the
// keeper in one call.
const releaseBatch = 64

// releaseKept releases the oldest kept packets to the keeper, one
// ReleasePacket for the newest of them (which releases those before it),
// and frees their buffers.
func (r *ring) releaseKept() {
	b := min(releaseBatch, r.keptN)
	n := len(r.kept)
	r.keeper.ReleasePacket(r.kept[(r.keptHead+b-1)%n])
	for i := range b {
		k := (r.keptHead + i) % n
		r.free = append(r.free, r.kept[k][:0])
		r.kept[k] = nil
	}
	r.keptHead = (r.keptHead + b) % n
	r.keptN -= b
}

// sent frees packets [done, done+n), sent (or refused): a packet the
// keeper keeps in place is queued in kept, the others' buffers are free.
func (r *ring) sent(n uint64) {
	for k := r.done; k < r.done+n; k++ {
		pkt := r.pkts[k%r.q]
		r.pkts[k%r.q] = nil
		if r.keeper != nil && keptInPlace(pkt, r.payload) {
			r.kept[(r.keptHead+r.keptN)%len(r.kept)] = pkt
			r.keptN++
		} else {
			r.free = append(r.free, pkt[:0])
		}
	}
	r.done += n
}

// keptInPlace reports whether a packet goes to the keeper's RetainPacket
// (at least half full) rather than SentPacket: an emptier one is copied,
// so that a slow feed of small packets does not hold a buffer per
// message.
func keptInPlace(pkt []byte, payload int) bool { return 2*len(pkt) >= payload }

// room reports whether the next packet may open.
func (r *ring) room() bool { return r.sealed-r.done < r.q }

// waiting is the number of sealed packets nobody has taken yet.
func (r *ring) waiting() uint64 { return r.sealed - r.taken }

// openPacket starts packet sealed in a buffer, its first message seq;
// stamp records when (for Linger).
func (r *ring) openPacket(s wire.Session, seq wire.Seq, payloadSize int, stamp bool) {
	r.enc.Reset(r.buffer(), s, seq, payloadSize)
	r.open = true
	if stamp {
		r.openedAt = monotime.Now()
	}
}

func (r *ring) seal() {
	r.pkts[r.sealed%r.q] = r.enc.Bytes()
	r.sealed++
	r.open = false
}

// take hands up to limit waiting packets to the caller: [first, first+n).
func (r *ring) take(limit uint64) (first, n uint64) {
	first = r.taken
	n = min(r.sealed-r.taken, limit)
	r.taken += n
	return first, n
}

// turn is the publishers' lock. It is a sync.Mutex's fast path (one
// compare-and-swap to take, one swap to give) with waiters parked on a
// channel instead of the runtime's semaphore, because a publisher holds it
// across long waits (the rate limit, a full ring): a publisher waiting for
// its turn can be interrupted by Close, and is durably blocked for
// testing/synctest, so tests of the rate limit and of backpressure run on
// virtual time. It is not fair: a publisher that comes as the turn is
// given may take it before one that waited.
type turn struct {
	state atomic.Int32  // 0 free, 1 taken, 2 taken and maybe waited for
	wake  chan struct{} // capacity 1: a give for a waiter
}

// take waits for the turn and reports true, or false when closing is
// closed first (a nil closing never is).
func (t *turn) take(closing <-chan struct{}) bool {
	if t.state.CompareAndSwap(0, 1) {
		return true
	}
	// Mark it waited for, then sleep until a give; a stale wake-up only
	// costs another look.
	for t.state.Swap(2) != 0 {
		select {
		case <-t.wake:
		case <-closing:
			return false
		}
	}
	return true
}

// give gives the turn back and wakes a waiter if there may be one.
func (t *turn) give() {
	if t.state.Swap(0) == 2 {
		select {
		case t.wake <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}
