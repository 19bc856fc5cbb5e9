package statsd

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/mdbus/mdbus/wire"
)

// DefaultTickInterval is the clock tick period of a relay or client: at
// every multiple of it on the Unix epoch of the relay clock, one publishes
// an empty message carrying its time unless a message already did since
// that instant, so that collectors close each flush interval at once when
// it ends, metrics or not.
const DefaultTickInterval = 500 * time.Millisecond

// DefaultMaxMessageLen bounds a bus message (header and lines): several
// messages then share a packet and one lost packet costs a few hundred
// lines at most. It is lowered to what one packet holds.
const DefaultMaxMessageLen = 1400

// bus is where an emitter publishes: a *publisher.Publication.
type bus interface {
	Publish(msg []byte) (wire.Seq, error)
	MaxMessageLen() int
}

// emitter stamps messages with the relay clock and publishes them. Time
// never goes backwards along the sequence: each message carries
// max(now, previous), stamped and published under one lock, so a collector
// reading the stream in sequence order sees a monotone clock.
type emitter struct {
	mu      sync.Mutex
	pub     bus
	last    int64 // the stamp of the last message published
	maxLen  int   // a message is published once another line would not fit
	hardMax int   // the largest message: a single long line may fill it
	now     func() int64
	tickBuf []byte
	errs    uint64
	msgs    uint64
}

func newEmitter(pub bus, maxLen int, now func() int64) *emitter {
	if maxLen <= 0 {
		maxLen = DefaultMaxMessageLen
	}
	hard := pub.MaxMessageLen()
	maxLen = max(min(maxLen, hard), HeaderLen+64)
	if now == nil {
		now = func() int64 { return time.Now().UnixNano() }
	}
	return &emitter{pub: pub, maxLen: maxLen, hardMax: hard, now: now, tickBuf: AppendMessageHeader(nil, 0)}
}

// maxLine is the longest line one message can carry.
func (e *emitter) maxLine() int { return e.hardMax - HeaderLen - 1 }

// clampLimits lowers l.MaxLineLen to what a bus message can carry, so a
// longer line is refused and counted (ReasonLineTooLong), never lost.
func (e *emitter) clampLimits(l Limits) Limits {
	l = l.withDefaults()
	l.MaxLineLen = min(l.MaxLineLen, e.maxLine())
	return l
}

// publish stamps msg (a header and lines) and publishes it.
func (e *emitter) publish(msg []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.publishLocked(msg)
}

func (e *emitter) publishLocked(msg []byte) error {
	t := max(e.now(), e.last)
	e.last = t
	binary.BigEndian.PutUint64(msg[timeOff:], uint64(t))
	if _, err := e.pub.Publish(msg); err != nil {
		e.errs++
		return fmt.Errorf("statsd: publish: %w", err)
	}
	e.msgs++
	return nil
}

// tick publishes an empty message unless a message stamped at or after
// at (Unix ns, a tick instant) went out already: either one tells the
// collectors that the relay clock has passed at.
func (e *emitter) tick(at int64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.last >= at {
		return nil
	}
	return e.publishLocked(e.tickBuf)
}

// runTicks calls also and ticks at every multiple of d on the emitter
// clock's Unix epoch, until ctx ends. A flush interval that is a multiple
// of d (the defaults: 10 s and 500 ms) then ends on a tick: collectors
// close it as soon as the tick arrives, not up to a tick period later.
// Tick instants missed (a stalled process) are skipped, not caught up.
func (e *emitter) runTicks(ctx context.Context, d time.Duration, also func()) {
	step := int64(d)
	next := func(now int64) int64 { return (now/step + 1) * step }
	at := next(e.now())
	t := time.NewTimer(time.Duration(at - e.now()))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := e.now()
		if now < at {
			// The timer and the clock disagree by a little (the timer
			// runs on the monotonic clock): wait for the clock.
			t.Reset(time.Duration(min(at-now, step)))
			continue
		}
		if also != nil {
			also()
		}
		e.tick(at)
		at = next(now)
		t.Reset(time.Duration(at - now))
	}
}

// builder fills one message with lines; it belongs to one goroutine.
type builder struct {
	e   *emitter
	buf []byte
	n   int // lines in buf
}

func newBuilder(e *emitter) *builder {
	return &builder{e: e, buf: AppendMessageHeader(make([]byte, 0, e.maxLen), 0)}
}

// add appends one line, parts joined (for an etsy multi-metric part: the
// name, ":" and the part), publishing the message first when the line
// would not fit in maxLen. A line longer than that goes alone in a
// message of up to hardMax bytes; one longer still is refused (the
// parser's limits, clamped by clampLimits, keep it from coming).
func (b *builder) add(parts ...[]byte) (ok bool, err error) {
	n := 1
	for _, p := range parts {
		n += len(p)
	}
	if HeaderLen+n > b.e.hardMax {
		return false, nil
	}
	if len(b.buf)+n > b.e.maxLen && b.n > 0 {
		err = b.flush()
	}
	for _, p := range parts {
		b.buf = append(b.buf, p...)
	}
	b.buf = append(b.buf, lineSep)
	b.n++
	return true, err
}

// flush publishes the pending lines, if any.
func (b *builder) flush() error {
	if b.n == 0 {
		return nil
	}
	err := b.e.publish(b.buf)
	b.buf, b.n = b.buf[:HeaderLen], 0
	return err
}
