package statsd

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/mdbus/mdbus/publisher"
)

// DefaultTickInterval is how often an idle relay or client publishes a
// clock tick (an empty message carrying its time), so that collectors
// can close flush intervals while no metric arrives.
const DefaultTickInterval = 500 * time.Millisecond

// DefaultMaxMessageLen bounds a bus message (header and lines): several
// messages then share a packet and one lost packet costs a few hundred
// lines at most. It is lowered to what one packet holds.
const DefaultMaxMessageLen = 1400

// emitter stamps messages with the relay clock and publishes them. Time
// never goes backwards along the sequence: each message carries
// max(now, previous), stamped and published under one lock, so a collector
// reading the stream in sequence order sees a monotone clock.
type emitter struct {
	mu      sync.Mutex
	pub     *publisher.Publication
	last    int64
	sent    bool // a message went out since the last tick
	maxLen  int  // a message is published once another line would not fit
	hardMax int  // the largest message: a single long line may fill it
	now     func() int64
	tickBuf []byte
	errs    uint64
	msgs    uint64
}

func newEmitter(pub *publisher.Publication, maxLen int, now func() int64) *emitter {
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
	e.sent = true
	e.msgs++
	return nil
}

// tick publishes an empty message unless one went out since the last
// tick.
func (e *emitter) tick() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sent {
		e.sent = false
		return nil
	}
	return e.publishLocked(e.tickBuf)
}

// runTicks ticks every d until ctx ends.
func (e *emitter) runTicks(ctx context.Context, d time.Duration, also func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if also != nil {
				also()
			}
			e.tick()
		}
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
