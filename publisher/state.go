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

// ring holds the packets in flight: QueuePackets buffers of PayloadSize
// bytes, packets numbered by uint64 counters, packet k at pkts[k%q].
// Packets [done, taken) are being sent by the holder of the sending role,
// [taken, sealed) are sealed and wait, and when open is set, packet
// sealed is being filled by enc in a buffer taken from free.
//
// free is a stack: the next packet goes into the buffer freed last, which
// the kernel has just read and the CPU's caches still hold. Taking the
// buffers in ring order instead walks all QueuePackets of them (1.5 MB at
// 1,472 bytes, more than a core's L2), so every packet starts with cache
// misses: with one 1,024-byte message per packet that cost the sender
// about a tenth of its time. The Publication guards it with mu.
type ring struct {
	q                   uint64
	free                [][]byte // empty buffers of capacity PayloadSize, the one to use next last
	pkts                [][]byte // sealed packets: pkts[k%q] is packet k
	enc                 wire.Encoder
	open                bool
	openedAt            monotime.Time // when the open packet was first left waiting (with Linger), once stamped
	stamped             bool
	done, taken, sealed uint64
}

func newRing(q, payloadSize int) ring {
	r := ring{q: uint64(q), free: make([][]byte, q), pkts: make([][]byte, q)}
	backing := make([]byte, q*payloadSize)
	prefault(backing)
	for i := range r.free {
		k := q - 1 - i // the first buffers first
		r.free[i] = backing[k*payloadSize : k*payloadSize : (k+1)*payloadSize]
	}
	return r
}

// room reports whether a buffer is free for the next packet.
func (r *ring) room() bool { return r.sealed-r.done < r.q }

// waiting is the number of sealed packets nobody has taken yet.
func (r *ring) waiting() uint64 { return r.sealed - r.taken }

// openPacket starts packet sealed in its buffer, its first message seq.
func (r *ring) openPacket(s wire.Session, seq wire.Seq, payloadSize int) {
	n := len(r.free) - 1 // there is one: sealed-done < q
	buf := r.free[n]
	r.free[n] = nil
	r.free = r.free[:n]
	r.enc.Reset(buf, s, seq, payloadSize)
	r.open, r.stamped = true, false
}

// stamp records when the open packet starts to linger: at the end of the
// publish call that opened it, when it is left open. A packet sealed in
// the call that opened it (one large message fills it, or a batch goes
// on past it) never reads the clock, which at one message per packet was
// a tenth of the sender's time.
func (r *ring) stamp() {
	if r.open && !r.stamped {
		r.openedAt, r.stamped = monotime.Now(), true
	}
}

func (r *ring) seal() {
	r.pkts[r.sealed%r.q] = r.enc.Bytes()
	r.sealed++
	r.open = false
}

// sent frees the buffers of packets [done, done+n), sent (or refused),
// the last one on top of the stack.
func (r *ring) sent(n uint64) {
	for k := r.done; k < r.done+n; k++ {
		r.free = append(r.free, r.pkts[k%r.q][:0])
		r.pkts[k%r.q] = nil
	}
	r.done += n
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
