package impair

import (
	"sync"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/internal/sock"
)

// recvSide impairs what ReadBatch returns. Everything but the deadline
// state belongs to the one goroutine that calls ReadBatch.
type recvSide struct {
	c  *Conn
	e  engine
	ib *sock.Batch // the inner batch: datagrams as read, referenced by outs
	// ibLen and ibSize are the inner batch's messages and buffer size.
	ibLen, ibSize int

	dmu      sync.Mutex
	callerDL time.Time // the caller's deadline (zero: none)
	readDue  time.Time // when the next held datagram is due, during a read (zero: none)
	applied  time.Time // the deadline last set on the inner conn
	applySet bool
}

func newRecvSide(c *Conn, s settings, stream uint64) *recvSide {
	r := &recvSide{c: c}
	r.e.init(s, &c.st, stream, 0, 0)
	return r
}

// ensure sizes the inner batch and the slots for a caller batch b; only
// called with outs empty. It allocates only when b is larger than any
// batch before.
func (r *recvSide) ensure(b *sock.Batch) {
	n, size := len(b.Msgs), 0
	for i := range b.Msgs {
		size = max(size, len(callerBuf(b, i)))
	}
	if r.ib != nil && n <= r.ibLen && size <= r.ibSize {
		return
	}
	r.ibLen, r.ibSize = max(n, r.ibLen), max(size, r.ibSize)
	n = r.ibLen
	r.ib = sock.NewBatch(n, r.ibSize)
	// Every datagram read can make at most two held copies (original and
	// duplicate), and outs is drained before the next read, so MaxHeld
	// plus two per datagram of a batch is enough slots; see engine.hold.
	r.e.grow(r.e.s.MaxHeld + 2*n)
	r.e.growOuts(r.e.s.MaxHeld + 4*n + 8)
}

func (r *recvSide) readBatch(b *sock.Batch) (int, error) {
	if r.c.closed.Load() {
		return 0, ErrClosed
	}
	if len(b.Msgs) == 0 {
		return 0, nil
	}
	e := &r.e
	defer func() {
		r.c.st.held.Store(uint64(e.held()))
		// Between reads the caller's deadline is the only one.
		r.dmu.Lock()
		r.readDue = time.Time{}
		r.dmu.Unlock()
	}()
	for {
		e.promote(monotime.Now())
		if e.pending() > 0 {
			return r.deliver(b), nil
		}
		r.ensure(b)
		var due time.Time
		if t, ok := e.nextDue(); ok {
			due = t.Wall()
		}
		r.setInnerDeadline(due)
		k, err := r.c.inner.ReadBatch(r.ib)
		if err != nil {
			if r.c.closed.Load() {
				return 0, ErrClosed
			}
			if sock.IsTimeout(err) {
				// Our own bound, or the caller's: what is due goes
				// first, even when the caller's deadline has passed
				// too (a late wake-up).
				due, ok := e.nextDue()
				if ok && due <= monotime.Now() || !r.callerExpired() {
					continue
				}
			}
			return 0, err
		}
		b.Drops = r.ib.Drops
		now := monotime.Now()
		for j := range k {
			e.admit(&r.ib.Msgs[j], int32(j), now)
		}
	}
}

// callerBuf is message i's own receive buffer in the caller's batch b at
// its full size: b.Buffer(i), or for a batch not made by NewBatch the
// capacity of Msgs[i].Buf (which deliver then never points elsewhere).
func callerBuf(b *sock.Batch, i int) []byte {
	if buf := b.Buffer(i); buf != nil {
		return buf
	}
	return b.Msgs[i].Buf[:cap(b.Msgs[i].Buf)]
}

// deliver hands out the items in outs into b, as many as fit, and returns
// how many.
//
// A datagram that passes straight through (not delayed, so still in the
// inner batch) is not copied: its Buf points into r.ib, whose bytes stay
// as they are until the caller's next ReadBatch, as PacketConn.ReadBatch
// allows, because the inner batch is read again only once every item that
// points into it has been handed out, and the caller reads again only once
// it is done with the batch before. The copy cost the impaired subscriber
// of a loss benchmark 6% of its CPU (a network drops packets for nothing),
// and so charged the lossy cell for the test's own machinery. Delayed and
// duplicated datagrams wait in slots and are copied into the caller's
// buffer, as is any datagram longer than that buffer (cut and marked
// Truncated), and every datagram for a batch not made by NewBatch, whose
// Msgs[i].Buf is the only buffer it has.
func (r *recvSide) deliver(b *sock.Batch) int {
	e := &r.e
	alias := b.Buffer(0) != nil
	n := 0
	for n < len(b.Msgs) {
		it, ok := e.next()
		if !ok {
			break
		}
		var src *sock.Message
		if it.slot >= 0 {
			src = &e.slots[it.slot].msg
		} else {
			src = &r.ib.Msgs[it.src]
		}
		dst := &b.Msgs[n]
		if buf := callerBuf(b, n); alias && it.slot < 0 && len(src.Buf) <= len(buf) {
			*dst = *src
		} else {
			m := copy(buf, src.Buf)
			*dst = *src
			dst.Buf = buf[:m]
			dst.Truncated = src.Truncated || m < len(src.Buf)
		}
		if it.slot >= 0 {
			e.freeSlot(it.slot)
		}
		n++
	}
	r.c.st.out.Add(uint64(n))
	return n
}

// earliest returns the earlier deadline, a zero time meaning none.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

// setInnerDeadline records due as the current read's own bound and gives
// the inner conn the earlier of it and the caller's deadline.
func (r *recvSide) setInnerDeadline(due time.Time) {
	r.dmu.Lock()
	defer r.dmu.Unlock()
	r.readDue = due
	eff := earliest(r.callerDL, due)
	if r.applySet && eff.Equal(r.applied) {
		return
	}
	// An error (closed conn) shows up in the ReadBatch that follows.
	_ = r.c.inner.SetReadDeadline(eff)
	r.applied, r.applySet = eff, true
}

func (r *recvSide) setReadDeadline(t time.Time) error {
	r.dmu.Lock()
	defer r.dmu.Unlock()
	r.callerDL = t
	eff := earliest(t, r.readDue)
	r.applied, r.applySet = eff, true
	return r.c.inner.SetReadDeadline(eff)
}

// callerExpired reports whether the caller's deadline has passed.
func (r *recvSide) callerExpired() bool {
	r.dmu.Lock()
	dl := r.callerDL
	r.dmu.Unlock()
	return !dl.IsZero() && !time.Now().Before(dl)
}
