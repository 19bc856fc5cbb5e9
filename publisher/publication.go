package publisher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdbus/mdbus/internal/alarm"
	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/internal/validpkt"
	"github.com/mdbus/mdbus/wire"
)

// Publication is one MoldUDP64 session published to a multicast group.
//
// All methods are safe for concurrent use. Publish and PublishBatch copy the
// message bytes before they return.
type Publication struct {
	s         settings
	afterSend []AfterSendSink // the Sinks that are AfterSendSinks
	// valid[i] is Sinks[i] when it takes its packets with their header
	// fields beside them (validpkt.Sink: this module's retransmit.Cache),
	// nil for the others, which get the bytes.
	valid []validpkt.Sink
	conn  sock.PacketConn
	raw   *sock.Conn // the socket under any Wrap, for its GSO counters
	local netip.AddrPort
	log   *slog.Logger

	// turn orders publishers: a Publish or PublishBatch holds it while it
	// waits for the rate limit or a free buffer and while it appends, so
	// a batch's sequence numbers are contiguous and tokens are taken in
	// sequence order. Order: turn, then mu.
	turn turn
	pace pacer // guarded by turn

	// mu guards the ring, the sending role and the phase.
	mu        sync.Mutex
	space     sync.Cond // a buffer was freed; L is &mu
	ring      ring
	role      role  // who sends; see the package doc, "Send state"
	phase     phase // live, closing, draining
	next      wire.Seq
	published uint64
	err       error         // a send error not yet reported
	progress  chan struct{} // made by Flush, closed when ring.done advances
	// parked is set while the sending goroutine waits on wake or timer;
	// timerAt is when timer fires then (never: not set).
	parked  bool
	timerAt monotime.Time

	// Owned by the holder of the sending role.
	batch    *sock.Batch
	ctl      []byte
	sentNext wire.Seq // sequence after the last data packet sent

	lastSend atomic.Int64 // monotime.Time of the last packet sent

	wake      chan struct{} // capacity 1: wakes the parked sending goroutine
	timer     *time.Timer   // the sending goroutine's: heartbeat, linger, grace
	nudge     *alarm.Nudge  // with Linger: wakes it on the kernel's timer too; nil otherwise
	closingCh chan struct{} // closed when Close starts: interrupts rate waits
	exited    chan struct{} // closed when the sending goroutine returns
	closeDone chan struct{} // closed when Close returns

	st counters
}

// never is a timerAt that is not set.
const never = monotime.Time(math.MaxInt64)

// counters are the Stats, updated atomically by whoever sends.
type counters struct {
	messages, packets, bytes           atomic.Uint64
	heartbeats, endOfSession           atomic.Uint64
	writeBatches, sendErrors           atomic.Uint64
	queueFull, rateWaits, rateWaitNano atomic.Uint64
	inlineSends                        atomic.Uint64
}

// Stats are a Publication's running counters.
type Stats struct {
	// Published is the number of messages Publish and PublishBatch
	// accepted (sequence numbers assigned).
	Published uint64
	// Messages, Packets and Bytes count the data packets the kernel
	// accepted, their messages, and their size (UDP payload bytes).
	Messages, Packets, Bytes uint64
	// Heartbeats and EndOfSession count the control packets sent.
	Heartbeats, EndOfSession uint64
	// WriteBatches counts calls to WriteBatch (each one or more sendmmsg
	// system calls, usually one).
	WriteBatches uint64
	// SendErrors counts packets (data or control) the kernel refused.
	SendErrors uint64
	// QueueFull counts the times a publisher waited for a free buffer.
	QueueFull uint64
	// RateWaits counts the sleeps for the rate limit; RateWaitTime is their
	// total length.
	RateWaits    uint64
	RateWaitTime time.Duration
	// InlineSends counts the WriteBatch rounds of data packets made on a
	// publishing goroutine, inside Publish or PublishBatch (full packets,
	// and with SendInline partly filled ones), instead of by the sending
	// goroutine.
	InlineSends uint64
	// GSO reports that packets go as UDP GSO trains: not disabled, the
	// kernel offers it, and it has not fallen back. GSOTrains counts the
	// trains sent and GSOPackets the packets they carried; GSOFallbacks
	// is 1 when the kernel refused GSO and the publication went back to
	// one packet per sendmmsg slot.
	GSO                                 bool
	GSOTrains, GSOPackets, GSOFallbacks uint64
}

// New opens a Publication as cfg describes and starts its sending
// goroutine. Close it when done.
func New(cfg Config) (*Publication, error) {
	s, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	src := s.Source
	if !src.IsValid() {
		src = netip.IPv4Unspecified()
		if s.group.Addr().Is6() {
			src = netip.IPv6Unspecified()
		}
	}
	c, err := sock.Open(sock.Config{
		Local:       netip.AddrPortFrom(src, 0),
		Interface:   s.ifi,
		TTL:         s.TTL,
		Loopback:    !s.DisableLoopback,
		WriteBuffer: s.WriteBuffer,
		GSO:         !s.DisableGSO,
		SendOnly:    true, // see internal/sock, "Off the poller"
	})
	if err != nil {
		return nil, fmt.Errorf("publisher: socket for %s on %s: %w", s.group, s.Interface, err)
	}
	var conn sock.PacketConn = c
	if s.Wrap != nil {
		if conn = s.Wrap(c); conn == nil {
			c.Close()
			return nil, fmt.Errorf("%w: Wrap returned nil", ErrConfig)
		}
	}
	p := &Publication{
		s:         s,
		conn:      conn,
		raw:       c,
		local:     c.LocalAddr(),
		log:       s.Logger,
		ring:      newRing(s.QueuePackets, s.PayloadSize),
		next:      s.FirstSeq,
		sentNext:  s.FirstSeq,
		timerAt:   never,
		batch:     sock.NewBatch(s.BatchPackets, 0),
		ctl:       make([]byte, 0, wire.HeaderLen),
		turn:      turn{wake: make(chan struct{}, 1)},
		wake:      make(chan struct{}, 1),
		timer:     time.NewTimer(time.Hour),
		closingCh: make(chan struct{}),
		exited:    make(chan struct{}),
		closeDone: make(chan struct{}),
	}
	p.timer.Stop()
	p.space.L = &p.mu
	p.valid = make([]validpkt.Sink, len(s.Sinks))
	for i, sk := range s.Sinks {
		if a, ok := sk.(AfterSendSink); ok {
			p.afterSend = append(p.afterSend, a)
		}
		p.valid[i], _ = sk.(validpkt.Sink)
	}
	for i := range p.batch.Msgs {
		p.batch.Msgs[i].Addr = s.group
	}
	now := monotime.Now()
	p.pace = newPacer(s.RateMessages, s.RateBytes, float64(s.PayloadSize), now)
	p.lastSend.Store(int64(now))
	p.log.Debug("publisher: open", "group", s.group, "interface", s.Interface, "local", p.local,
		"session", s.session.String(), "first_seq", s.FirstSeq, "payload_size", s.PayloadSize,
		"write_buffer_granted", c.WriteBufferGranted, "gso", c.GSOStats().Active)
	if s.Linger > 0 && !s.goTimers {
		// A Go timer alone wakes a parked goroutine up to a millisecond
		// late in an idle program (internal/alarm), so a packet set to
		// linger 200 µs waited five times that.
		p.nudge = alarm.NewNudge(p.nudged)
	}
	go p.run()
	return p, nil
}

// nudged wakes the sending goroutine when the kernel's timer fires (see
// Publication.nudge). Without p.mu: a wake it leaves pending when the
// goroutine is not parked makes its next park return at once, and the
// goroutine looks again at what is due.
func (p *Publication) nudged() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Publish publishes a copy of msg and returns its sequence number. How
// and when it leaves depends on Config.Send (see SendMode and the package
// doc): by default the Publish that fills a packet while nothing is being
// sent sends it before it returns, and a partly filled packet goes to the
// sending goroutine at once (or after Config.Linger). Publish blocks while
// all QueuePackets buffers are taken (backpressure) and, with a rate
// limit, while the rate is over.
//
// On an error nothing was published. The error may be one the background
// sender met earlier (reported once); ErrClosed after Close; one matching
// ErrMessageTooLarge when msg cannot fit in a packet. A warm Publication's
// Publish does not allocate.
func (p *Publication) Publish(msg []byte) (wire.Seq, error) {
	if len(msg) > p.s.maxMsg {
		return wire.InvalidSeq, p.tooLarge(len(msg), -1)
	}
	one := [1][]byte{msg}
	seq, _, err := p.publish(one[:])
	return seq, err
}

// PublishBatch publishes copies of msgs with contiguous sequence numbers
// and returns the first (wire.InvalidSeq for an empty batch). The full
// packets it fills are sent before it returns when nothing else is being
// sent, as with Publish. It checks every message's size before it
// publishes any: one that cannot fit fails the whole batch. Without a rate
// limit the batch is appended at once; with one it is paced message by
// message, and if Close interrupts it, the error (matching ErrClosed) says
// how many of its messages were published.
func (p *Publication) PublishBatch(msgs [][]byte) (wire.Seq, error) {
	for i, m := range msgs {
		if len(m) > p.s.maxMsg {
			return wire.InvalidSeq, p.tooLarge(len(m), i)
		}
	}
	first, n, err := p.publish(msgs)
	if err != nil && n >= 0 {
		err = fmt.Errorf("%w: %d of the batch's %d messages were published", err, n, len(msgs))
	}
	return first, err
}

// publish is the one path of Publish and PublishBatch: it appends msgs
// (each known to fit a packet) with contiguous sequences and gets them
// sent. Without a rate limit it appends them all at once; with one it
// paces them message by message (pacer.wait), sending each as it goes.
// It returns the first sequence and, when the rate wait was interrupted,
// how many were published (else -1).
func (p *Publication) publish(msgs [][]byte) (first wire.Seq, published int, err error) {
	if !p.turn.take(p.closingCh) {
		return wire.InvalidSeq, -1, ErrClosed
	}
	p.mu.Lock()
	if err := p.checkLocked(); err != nil || len(msgs) == 0 {
		p.mu.Unlock()
		p.turn.give()
		return wire.InvalidSeq, -1, err
	}
	if !p.pace.on() {
		for i, m := range msgs {
			seq, _ := p.appendLocked(m)
			if i == 0 {
				first = seq
			}
		}
		p.published += uint64(len(msgs))
		k, n, inline := p.dispatchLocked()
		p.mu.Unlock()
		p.turn.give() // the next publisher appends while this one sends
		if inline {
			p.sendInline(k, n)
		}
		return first, -1, nil
	}
	p.mu.Unlock()
	for i, m := range msgs {
		if err := p.pace.wait(len(m), p.closingCh, &p.st); err != nil {
			p.turn.give()
			return first, i, err
		}
		p.mu.Lock()
		seq, opened := p.appendLocked(m)
		p.published++
		k, n, inline := p.dispatchLocked()
		p.mu.Unlock()
		if opened {
			p.pace.opened()
		}
		if i == 0 {
			first = seq
		}
		if i == len(msgs)-1 {
			p.turn.give()
		}
		if inline {
			p.sendInline(k, n)
		}
	}
	return first, -1, nil
}

// Flush returns once every message published before the call has been
// handed to the kernel, or with ctx's error. It returns a send error the
// background sender met (reported once), or ErrClosed after Close.
func (p *Publication) Flush(ctx context.Context) error {
	p.mu.Lock()
	if p.phase != live {
		p.mu.Unlock()
		return ErrClosed
	}
	if p.ring.open {
		p.ring.seal() // send it now even with Linger
	}
	target := p.ring.sealed
	for {
		if err := p.checkLocked(); err != nil && !errors.Is(err, ErrClosed) {
			p.mu.Unlock()
			return err
		}
		if p.ring.done >= target {
			p.mu.Unlock()
			return nil
		}
		if !p.role.held() {
			p.kickLocked()
		}
		if p.progress == nil {
			p.progress = make(chan struct{})
		}
		ch := p.progress
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("publisher: flush: %w", ctx.Err())
		}
		p.mu.Lock()
	}
}

// Close publishes what is pending, sends the end of session and, for
// Config.Grace, repeats it (see Grace: with Sinks, Close takes 1 s by
// default), stops the sending goroutine and closes the socket. It returns
// a send error not yet reported. Publish calls under way finish first (a
// rate-limited one is interrupted with ErrClosed); later calls return
// ErrClosed. Calling Close again waits for the first call and returns
// ErrClosed.
func (p *Publication) Close() error {
	p.mu.Lock()
	if p.phase != live {
		p.mu.Unlock()
		<-p.closeDone
		return ErrClosed
	}
	p.phase = closing
	close(p.closingCh)
	p.mu.Unlock()

	p.turn.take(nil) // wait for a Publish in progress
	p.mu.Lock()
	p.phase = draining
	p.kickLocked()
	p.mu.Unlock()
	p.turn.give()

	<-p.exited
	p.nudge.Close()
	cerr := p.conn.Close()
	p.pace.stop()
	p.mu.Lock()
	err := p.err
	p.err = nil
	if p.progress != nil {
		close(p.progress)
		p.progress = nil
	}
	p.mu.Unlock()
	if cerr != nil {
		err = errors.Join(err, fmt.Errorf("publisher: close socket: %w", cerr))
	}
	p.log.Debug("publisher: closed", "group", p.s.group, "session", p.s.session.String(), "next_seq", p.NextSeq())
	close(p.closeDone)
	return err
}

// Session is the publication's MoldUDP64 session.
func (p *Publication) Session() wire.Session { return p.s.session }

// NextSeq is the sequence number the next published message will get.
func (p *Publication) NextSeq() wire.Seq {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next
}

// LocalAddr is the address the socket is bound to: the packets' source.
func (p *Publication) LocalAddr() netip.AddrPort { return p.local }

// Group is the multicast group and port published to.
func (p *Publication) Group() netip.AddrPort { return p.s.group }

// PayloadSize is the largest packet the publication sends, in bytes.
func (p *Publication) PayloadSize() int { return p.s.PayloadSize }

// MaxMessageLen is the largest message Publish accepts, in bytes.
func (p *Publication) MaxMessageLen() int { return p.s.maxMsg }

// Stats returns the publication's counters.
func (p *Publication) Stats() Stats {
	p.mu.Lock()
	published := p.published
	p.mu.Unlock()
	gso := p.raw.GSOStats()
	return Stats{
		GSO:          gso.Active,
		GSOTrains:    gso.Trains,
		GSOPackets:   gso.Segments,
		GSOFallbacks: gso.Fallbacks,
		Published:    published,
		Messages:     p.st.messages.Load(),
		Packets:      p.st.packets.Load(),
		Bytes:        p.st.bytes.Load(),
		Heartbeats:   p.st.heartbeats.Load(),
		EndOfSession: p.st.endOfSession.Load(),
		WriteBatches: p.st.writeBatches.Load(),
		SendErrors:   p.st.sendErrors.Load(),
		QueueFull:    p.st.queueFull.Load(),
		RateWaits:    p.st.rateWaits.Load(),
		RateWaitTime: time.Duration(p.st.rateWaitNano.Load()),
		InlineSends:  p.st.inlineSends.Load(),
	}
}

func (p *Publication) tooLarge(n, index int) error {
	err := fmt.Errorf("%w: %d bytes, the limit is %d for a %d-byte payload",
		ErrMessageTooLarge, n, p.s.maxMsg, p.s.PayloadSize)
	if index >= 0 {
		err = fmt.Errorf("%w (message %d of the batch; none published)", err, index)
	}
	return err
}

// checkLocked returns ErrClosed once Close has started, else the latched
// send error (clearing it), else nil.
func (p *Publication) checkLocked() error {
	if p.phase != live {
		return ErrClosed
	}
	if err := p.err; err != nil {
		p.err = nil
		return err
	}
	return nil
}

// appendLocked adds msg (which fits in an empty packet) to the open packet,
// sealing it and opening the next when it is full, and waiting for a free
// buffer when all are taken. opened reports that msg opened a packet.
func (p *Publication) appendLocked(msg []byte) (seq wire.Seq, opened bool) {
	r := &p.ring
	for {
		if r.open {
			if r.enc.Fits(len(msg)) {
				break
			}
			r.seal()
		}
		if r.room() {
			r.openPacket(p.s.session, p.next, p.s.PayloadSize)
			opened = true
			break
		}
		p.st.queueFull.Add(1)
		if !p.role.held() {
			p.kickLocked()
		}
		p.space.Wait()
	}
	if err := r.enc.Add(msg); err != nil {
		panic("publisher: message does not fit after Fits: " + err.Error()) // our invariant
	}
	seq = p.next
	p.next++
	if !r.enc.Fits(len(msg)) {
		// Full for a message like this one: in a feed of similar sizes the
		// next one would not fit either, so the packet need not wait for
		// it to find out (with 1,024-byte messages in 1,472-byte packets,
		// every packet is full at its first message). A smaller message
		// that would still have fitted goes in the next packet: less than
		// one message of room is given up.
		r.seal()
	}
	return seq, opened
}

// lingerLocked returns how much longer the open packet may wait for more
// messages: 0 when it is to be sent now (no Linger, or it waited long
// enough, or the publication is draining).
func (p *Publication) lingerLocked() time.Duration {
	if p.s.Linger == 0 || !p.ring.open || p.phase == draining {
		return 0
	}
	return max(0, p.s.Linger-monotime.Since(p.ring.openedAt))
}

// sendableLocked reports whether there is a packet to send now: a sealed
// one, or the open one unless it may still linger.
func (p *Publication) sendableLocked() bool {
	return p.ring.waiting() > 0 || (p.ring.open && p.lingerLocked() == 0)
}

// kickLocked wakes the sending goroutine if it is parked. It never blocks
// and does not allocate.
func (p *Publication) kickLocked() {
	if p.parked {
		p.parked = false
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// dispatchLocked gets freshly appended packets sent: the Send state
// machine's one decision on the publishing side (package doc, "Send
// state"). While the role is held, the caller only marks the burst (the
// holder looks for more work before it lets go). When it is free, the
// caller takes it (inline is then true and the caller must call
// sendInline) with SendInline, or with SendAuto when it sealed whole
// packets. Otherwise what is pending is handed to the sending goroutine.
func (p *Publication) dispatchLocked() (first, n uint64, inline bool) {
	if p.s.Linger > 0 {
		p.ring.stamp()
	}
	switch p.role {
	case busy, busyBurst:
		p.role = busyBurst
		return 0, 0, false
	case free:
		if p.s.Send == SendInline || p.s.Send == SendAuto && p.ring.waiting() > 0 {
			first, n = p.takeLocked()
			return first, n, true
		}
	}
	p.handOffLocked()
	return 0, 0, false
}

// handOffLocked leaves what is pending to the sending goroutine: it wakes
// the goroutine for packets to send now, and for an open packet that may
// linger it makes sure the goroutine's timer fires when the packet is due
// (setting it from here, without waking the goroutine). Called without
// the sending role.
func (p *Publication) handOffLocked() {
	r := &p.ring
	switch {
	case p.phase == draining || r.waiting() > 0:
		p.kickLocked()
	case r.open && p.s.Linger > 0:
		w := p.lingerLocked()
		if w == 0 {
			p.kickLocked()
			return
		}
		// A running goroutine sets its timer for the packet before it
		// parks; a parked one is woken by the timer.
		if due := r.openedAt.Add(p.s.Linger); p.parked && due < p.timerAt {
			p.timerAt = due
			p.timer.Reset(w)
			p.nudge.Set(due)
		}
	case r.open:
		p.kickLocked()
	}
}

// takeLocked takes the sending role and up to BatchPackets packets, sealing
// the open one if there is room for it in the batch and it need not
// linger.
func (p *Publication) takeLocked() (first, n uint64) {
	r := &p.ring
	limit := uint64(len(p.batch.Msgs))
	if r.open && r.waiting() < limit && p.lingerLocked() == 0 {
		r.seal()
	}
	first, n = r.take(limit)
	p.role = busy // what piled up before is the taker's now
	return first, n
}

// finishLocked gives back the sending role after packets [first, first+n)
// were sent, bad of them refused, freeing their buffers. The caller then
// decides who sends what is pending.
func (p *Publication) finishLocked(n, bad uint64, err error) {
	p.ring.sent(n)
	p.role = p.role.finished()
	p.latchLocked(err)
	p.st.sendErrors.Add(bad) // after the latch: a reader that sees it sees the error
	p.space.Broadcast()      // cheap without waiters
	if p.progress != nil {
		close(p.progress)
		p.progress = nil
	}
}

func (p *Publication) latchLocked(err error) {
	if err == nil {
		return
	}
	if p.err == nil {
		p.log.Warn("publisher: send failed", "group", p.s.group, "session", p.s.session.String(), "err", err)
		p.err = err
	}
}

// sendInline sends packets [first, first+n), taken by dispatchLocked, on
// the publishing goroutine, and goes on with the publisher's own further
// full packets (a PublishBatch longer than BatchPackets) unless another
// publisher came meanwhile. What is left goes to the sending goroutine.
func (p *Publication) sendInline(first, n uint64) {
	for {
		p.st.inlineSends.Add(1)
		bad, err := p.sendData(first, n)
		p.mu.Lock()
		p.finishLocked(n, bad, err)
		if p.role != free || p.phase == draining || p.ring.waiting() == 0 {
			break
		}
		first, n = p.takeLocked()
		p.mu.Unlock()
	}
	p.handOffLocked()
	p.mu.Unlock()
}

// sendData sends packets [first, first+n) with as few WriteBatch calls as
// possible and offers each to the Sinks. A packet the kernel refuses is
// skipped (and counted); the rest are still sent. Called by the holder of
// the sending role. It returns the number of packets refused and the
// first error.
func (p *Publication) sendData(first, n uint64) (bad uint64, firstErr error) {
	if n == 0 {
		return 0, nil
	}
	b := p.batch
	for i := range n {
		b.Msgs[i].Buf = p.ring.pkts[(first+i)%p.ring.q]
	}
	// Offer the packets to the sinks before sending them: a subscriber
	// can ask for a lost packet as soon as it sees the next one, and the
	// cache must hold it by then.
	var msgs, size uint64
	var next wire.Seq
	for i := range n {
		pkt := p.ring.pkts[(first+i)%p.ring.q]
		h, _ := wire.ParseHeader(pkt)
		msgs += uint64(h.MessageCount())
		size += uint64(len(pkt))
		for j, s := range p.s.Sinks {
			if v := p.valid[j]; v != nil {
				// The ring's packets are the encoder's own: the count in
				// the header is the messages it added.
				v.SentValidPacket(validpkt.Packet{Session: h.Session, Seq: h.Seq, Count: h.Count, Body: pkt[wire.HeaderLen:]})
			} else {
				s.SentPacket(pkt)
			}
		}
		next = h.Next()
	}
	var badMsgs, badBytes uint64
	calls := sock.SendAll(p.conn, b, int(n), func(m *sock.Message, err error) bool {
		if firstErr == nil {
			firstErr = fmt.Errorf("publisher: send to %s: %w", p.s.group, err)
		}
		if m != nil {
			h, _ := wire.ParseHeader(m.Buf)
			bad++
			badMsgs += uint64(h.MessageCount())
			badBytes += uint64(len(m.Buf))
		}
		return true
	})
	p.st.writeBatches.Add(uint64(calls))
	p.sentNext = next
	p.st.messages.Add(msgs - badMsgs)
	p.st.bytes.Add(size - badBytes)
	p.st.packets.Add(n - bad)
	p.lastSend.Store(int64(monotime.Now()))
	for _, s := range p.afterSend {
		s.AfterSend()
	}
	return bad, firstErr
}

// controlLocked takes the sending role and sends a heartbeat or end of
// session built by appendPkt, counting it in sent. Called with p.mu held,
// by the sending goroutine, while the role is not held; returns with it
// held.
func (p *Publication) controlLocked(appendPkt func([]byte, wire.Session, wire.Seq) []byte, sent *atomic.Uint64) {
	p.role = p.role.control()
	p.mu.Unlock()
	p.ctl = appendPkt(p.ctl[:0], p.s.session, p.sentNext)
	err := p.sendControl(p.ctl)
	if err == nil {
		sent.Add(1)
	}
	p.mu.Lock()
	p.role = p.role.finished()
	if err != nil {
		p.latchLocked(err)
		p.st.sendErrors.Add(1)
	}
}

// sendControl sends one heartbeat or end-of-session packet. Called by the
// holder of the sending role, who counts a failure after latching it.
func (p *Publication) sendControl(pkt []byte) error {
	b := p.batch
	b.Msgs[0].Buf = pkt
	sent, err := p.conn.WriteBatch(b, 1)
	p.st.writeBatches.Add(1)
	p.lastSend.Store(int64(monotime.Now()))
	if err == nil && sent != 1 {
		err = io.ErrNoProgress
	}
	if err != nil {
		return fmt.Errorf("publisher: send to %s: %w", p.s.group, err)
	}
	return nil
}

// run is the sending goroutine. Each pass of its loop takes the first
// transition that applies, in this order (package doc, "Send state"):
//
//  1. packets to send now, and the role free: send them;
//  2. draining, and the role free: send the end of session, repeat it over
//     the grace, exit;
//  3. nothing sent for HeartbeatInterval, and the role free: heartbeat;
//  4. else park until woken (wake) or until the timer fires for the next
//     heartbeat or the lingering packet.
func (p *Publication) run() {
	defer close(p.exited)
	defer p.timer.Stop()
	p.mu.Lock()
	for {
		switch {
		case !p.role.held() && p.sendableLocked():
			first, n := p.takeLocked()
			p.mu.Unlock()
			bad, err := p.sendData(first, n)
			p.mu.Lock()
			p.finishLocked(n, bad, err)
		case p.phase == draining && !p.role.held():
			p.controlLocked(wire.AppendEndOfSession, &p.st.endOfSession)
			p.mu.Unlock()
			p.grace()
			return
		case p.heartbeatDueLocked():
			p.controlLocked(wire.AppendHeartbeat, &p.st.heartbeats)
		default:
			p.parkLocked()
		}
	}
}

// heartbeatDueLocked reports that nothing has been sent for
// HeartbeatInterval, the session is not draining, and the role is free.
func (p *Publication) heartbeatDueLocked() bool {
	hb := p.s.HeartbeatInterval
	return hb > 0 && p.phase != draining && !p.role.held() &&
		monotime.Since(monotime.Time(p.lastSend.Load())) >= hb
}

// parkLocked sets the timer for the next heartbeat and the lingering
// packet, whichever is first, and waits for it or for wake. Called and
// returns with p.mu held.
func (p *Publication) parkLocked() {
	now := monotime.Now()
	due := never
	if hb := p.s.HeartbeatInterval; hb > 0 && p.phase != draining {
		due = monotime.Time(p.lastSend.Load()).Add(hb)
		if due <= now { // another goroutine holds the role: look again later
			due = now.Add(hb)
		}
	}
	if p.ring.open && !p.role.held() && p.s.Linger > 0 {
		due = min(due, p.ring.openedAt.Add(p.s.Linger))
	}
	if due != never {
		p.timer.Reset(max(due.Sub(now), 0))
		p.nudge.Set(due) // arms only a lingering packet's near time
	} else {
		p.timer.Stop()
	}
	p.timerAt = due
	p.parked = true
	p.mu.Unlock()
	select {
	case <-p.wake:
	case <-p.timer.C:
	}
	p.mu.Lock()
	p.parked = false
	p.timerAt = never
}

// grace repeats the end of session every endEvery until Grace has passed
// since the first, so that subscribers find a lost tail and have the time
// to ask for it. Nothing else is sent: Close has stopped Publish.
func (p *Publication) grace() {
	if p.s.Grace <= 0 {
		return
	}
	end := monotime.Now().Add(p.s.Grace)
	p.timer.Reset(min(p.s.endEvery, p.s.Grace))
	for {
		<-p.timer.C
		left := end.Sub(monotime.Now())
		if left <= 0 {
			return
		}
		p.mu.Lock()
		p.controlLocked(wire.AppendEndOfSession, &p.st.endOfSession)
		p.mu.Unlock()
		p.timer.Reset(min(p.s.endEvery, left))
	}
}

// prefault touches every page of buf, so that the first pass of the
// publisher over its ring does not stop at a page fault every few packets
// (a fresh ring of 16 MiB is 4,096 faults, tens of milliseconds, all in the
// first burst a subscriber sees).
func prefault(buf []byte) {
	const page = 4096
	for i := 0; i < len(buf); i += page {
		buf[i] = 0
	}
}
