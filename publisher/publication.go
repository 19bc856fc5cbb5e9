package publisher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
)

// Publication is one MoldUDP64 session published to a multicast group.
//
// All methods are safe for concurrent use. Publish and PublishBatch copy the
// message bytes before they return.
type Publication struct {
	s      settings
	conn   sock.PacketConn
	raw    *sock.Conn // the socket under any Wrap, for its GSO counters
	local  netip.AddrPort
	q      uint64 // ring size, packets
	log    *slog.Logger
	inline bool

	// pubMu orders publishers. A Publish or PublishBatch holds it while
	// it waits for the rate limit or a free buffer and while it appends,
	// so a batch's sequence numbers are contiguous and tokens are taken
	// in sequence order. Lock order: pubMu, then mu.
	pubMu     sync.Mutex
	limited   bool
	rateMsgs  bucket      // guarded by pubMu
	rateBytes bucket      // guarded by pubMu
	rateTimer *time.Timer // guarded by pubMu

	// mu guards the ring and the sending role.
	//
	// Packets are numbered by uint64 counters; packet k lives in ring
	// slot k%q. Packets [done, taken) are being sent by the holder of the
	// sending role, [taken, sealed) are sealed and wait, and when open is
	// set, packet sealed is being filled by enc.
	mu        sync.Mutex
	space     sync.Cond // a buffer was freed; L is &mu
	enc       wire.Encoder
	bufs      [][]byte // ring buffers, each of capacity PayloadSize
	pkts      [][]byte // sealed packets: pkts[k%q] is packet k
	open      bool
	openedAt  monotime.Time // when the open packet got its first message (with Linger)
	armed     bool          // the idle sending goroutine's timer covers the open packet (with Linger)
	sealed    uint64
	taken     uint64
	done      uint64
	next      wire.Seq // sequence of the next message published
	published uint64
	// sending is the sending role: whoever set it owns batch, ctl,
	// sentNext and packets [done, taken), and calls the Sinks.
	sending  bool
	idle     bool // the sending goroutine waits on wake
	blocked  bool // a publisher waits on space
	closing  bool // Close was called: no new Publish
	quitting bool // the sending goroutine is to drain, end the session, exit
	err      error
	progress chan struct{} // made by Flush, closed when done advances

	// Owned by the holder of the sending role.
	batch    *sock.Batch
	ctl      []byte
	sentNext wire.Seq // sequence after the last data packet sent

	lastSend atomic.Int64 // monotime.Time of the last packet sent
	sendCost atomic.Int64 // moving average of a data send's duration, ns

	wake      chan struct{} // capacity 1: wakes the idle sending goroutine
	closingCh chan struct{} // closed when Close starts: interrupts rate waits
	exited    chan struct{} // closed when the sending goroutine returns
	closeDone chan struct{} // closed when Close returns

	st counters
}

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
	// InlineSends counts the sends made inside Publish (Config.Inline).
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
	q := s.QueuePackets
	p := &Publication{
		s:         s,
		conn:      conn,
		raw:       c,
		local:     c.LocalAddr(),
		q:         uint64(q),
		log:       s.Logger,
		inline:    s.Inline,
		bufs:      make([][]byte, q),
		pkts:      make([][]byte, q),
		next:      s.FirstSeq,
		sentNext:  s.FirstSeq,
		batch:     sock.NewBatch(s.BatchPackets, 0),
		ctl:       make([]byte, 0, wire.HeaderLen),
		wake:      make(chan struct{}, 1),
		closingCh: make(chan struct{}),
		exited:    make(chan struct{}),
		closeDone: make(chan struct{}),
	}
	p.space.L = &p.mu
	backing := make([]byte, q*s.PayloadSize)
	prefault(backing)
	for i := range p.bufs {
		p.bufs[i] = backing[i*s.PayloadSize : i*s.PayloadSize : (i+1)*s.PayloadSize]
	}
	for i := range p.batch.Msgs {
		p.batch.Msgs[i].Addr = s.group
	}
	now := monotime.Now()
	if s.RateMessages > 0 || s.RateBytes > 0 {
		p.limited = true
		p.rateMsgs = newBucket(s.RateMessages, 1, now)
		p.rateBytes = newBucket(s.RateBytes, float64(s.PayloadSize), now)
		p.rateTimer = time.NewTimer(time.Hour)
		p.rateTimer.Stop()
	}
	p.lastSend.Store(int64(now))
	p.log.Debug("publisher: open", "group", s.group, "interface", s.Interface, "local", p.local,
		"session", s.session.String(), "first_seq", s.FirstSeq, "payload_size", s.PayloadSize,
		"write_buffer_granted", c.WriteBufferGranted, "gso", c.GSOStats().Active)
	go p.run()
	return p, nil
}

// Publish publishes a copy of msg and returns its sequence number. The
// message goes out at once when nothing else is being sent, or with the
// packets that are. Publish blocks while all QueuePackets buffers are taken
// (backpressure) and, with a rate limit, while the rate is over.
//
// On an error nothing was published. The error may be one the background
// sender met earlier (reported once); ErrClosed after Close; one matching
// ErrMessageTooLarge when msg cannot fit in a packet. A warm Publication's
// Publish does not allocate.
func (p *Publication) Publish(msg []byte) (wire.Seq, error) {
	if len(msg) > p.s.maxMsg {
		return wire.InvalidSeq, p.tooLarge(len(msg), -1)
	}
	p.pubMu.Lock()
	if p.limited {
		if err := p.rateWait(len(msg)); err != nil {
			p.pubMu.Unlock()
			return wire.InvalidSeq, err
		}
	}
	p.mu.Lock()
	if err := p.checkLocked(); err != nil {
		p.mu.Unlock()
		p.pubMu.Unlock()
		return wire.InvalidSeq, err
	}
	seq, newPkt := p.appendLocked(msg)
	p.published++
	first, n, inline := p.dispatchLocked()
	p.mu.Unlock()
	if newPkt && p.limited {
		p.rateBytes.take(wire.HeaderLen)
	}
	p.pubMu.Unlock()
	if inline {
		p.sendInline(first, n)
	}
	return seq, nil
}

// PublishBatch publishes copies of msgs with contiguous sequence numbers
// and returns the first (wire.InvalidSeq for an empty batch). It checks
// every message's size before it publishes any: one that cannot fit fails
// the whole batch. Without a rate limit the batch is appended at once; with
// one it is paced message by message, and if Close interrupts it, the error
// (matching ErrClosed) says how many of its messages were published.
func (p *Publication) PublishBatch(msgs [][]byte) (wire.Seq, error) {
	for i, m := range msgs {
		if len(m) > p.s.maxMsg {
			return wire.InvalidSeq, p.tooLarge(len(m), i)
		}
	}
	p.pubMu.Lock()
	defer p.pubMu.Unlock()
	p.mu.Lock()
	if err := p.checkLocked(); err != nil {
		p.mu.Unlock()
		return wire.InvalidSeq, err
	}
	if len(msgs) == 0 {
		p.mu.Unlock()
		return wire.InvalidSeq, nil
	}
	if !p.limited {
		var first wire.Seq
		for i, m := range msgs {
			seq, _ := p.appendLocked(m)
			if i == 0 {
				first = seq
			}
		}
		p.published += uint64(len(msgs))
		k, n, inline := p.dispatchLocked()
		p.mu.Unlock()
		if inline {
			p.sendInline(k, n)
		}
		return first, nil
	}
	p.mu.Unlock()
	var first wire.Seq
	for i, m := range msgs {
		if err := p.rateWait(len(m)); err != nil {
			return first, fmt.Errorf("%w: %d of the batch's %d messages were published", err, i, len(msgs))
		}
		p.mu.Lock()
		seq, newPkt := p.appendLocked(m)
		p.published++
		k, n, inline := p.dispatchLocked()
		p.mu.Unlock()
		if newPkt {
			p.rateBytes.take(wire.HeaderLen)
		}
		if i == 0 {
			first = seq
		}
		if inline {
			p.sendInline(k, n)
		}
	}
	return first, nil
}

// Flush returns once every message published before the call has been
// handed to the kernel, or with ctx's error. It returns a send error the
// background sender met (reported once), or ErrClosed after Close.
func (p *Publication) Flush(ctx context.Context) error {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return ErrClosed
	}
	if p.open {
		p.sealLocked() // send it now even with Linger
	}
	target := p.sealed
	for {
		if err := p.checkLocked(); err != nil && !errors.Is(err, ErrClosed) {
			p.mu.Unlock()
			return err
		}
		if p.done >= target {
			p.mu.Unlock()
			return nil
		}
		if !p.sending {
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
	if p.closing {
		p.mu.Unlock()
		<-p.closeDone
		return ErrClosed
	}
	p.closing = true
	close(p.closingCh)
	p.mu.Unlock()

	p.pubMu.Lock() // wait for a Publish in progress
	p.mu.Lock()
	p.quitting = true
	p.kickLocked()
	p.mu.Unlock()
	p.pubMu.Unlock()

	<-p.exited
	cerr := p.conn.Close()
	if p.rateTimer != nil {
		p.rateTimer.Stop()
	}
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
	if p.closing {
		return ErrClosed
	}
	if err := p.err; err != nil {
		p.err = nil
		return err
	}
	return nil
}

// rateWait sleeps until a message of n bytes is within the rate limit and
// takes its tokens. Called with pubMu held.
func (p *Publication) rateWait(n int) error {
	cost := float64(n + wire.MsgLenLen)
	for {
		now := monotime.Now()
		p.rateMsgs.refill(now)
		p.rateBytes.refill(now)
		d := max(p.rateMsgs.wait(1), p.rateBytes.wait(cost))
		if d == 0 {
			p.rateMsgs.take(1)
			p.rateBytes.take(cost)
			return nil
		}
		p.st.rateWaits.Add(1)
		p.rateTimer.Reset(d)
		select {
		case <-p.rateTimer.C:
		case <-p.closingCh:
			p.rateTimer.Stop()
			return ErrClosed
		}
		p.st.rateWaitNano.Add(uint64(monotime.Since(now)))
	}
}

// appendLocked adds msg (which fits in an empty packet) to the open packet,
// sealing it and opening the next when it is full, and waiting for a free
// buffer when all are taken. newPkt reports that msg opened a packet.
func (p *Publication) appendLocked(msg []byte) (seq wire.Seq, newPkt bool) {
	for {
		if p.open {
			if p.enc.Fits(len(msg)) {
				break
			}
			p.sealLocked()
		}
		if p.sealed-p.done < p.q {
			p.enc.Reset(p.bufs[p.sealed%p.q][:0], p.s.session, p.next, p.s.PayloadSize)
			p.open = true
			newPkt = true
			if p.s.Linger > 0 {
				p.openedAt = monotime.Now()
			}
			break
		}
		p.st.queueFull.Add(1)
		if !p.sending {
			p.kickLocked()
		}
		p.blocked = true
		p.space.Wait()
	}
	if err := p.enc.Add(msg); err != nil {
		panic("publisher: message does not fit after Fits: " + err.Error()) // our invariant
	}
	seq = p.next
	p.next++
	return seq, newPkt
}

func (p *Publication) sealLocked() {
	p.pkts[p.sealed%p.q] = p.enc.Bytes()
	p.sealed++
	p.open = false
	p.armed = false
}

func (p *Publication) hasWorkLocked() bool { return p.open || p.taken < p.sealed }

// lingerLocked returns how much longer the open packet may wait for more
// messages: 0 when it is to be sent now (no Linger, or it waited long
// enough, or the publication is closing).
func (p *Publication) lingerLocked() time.Duration {
	if p.s.Linger == 0 || !p.open || p.quitting {
		return 0
	}
	return max(0, p.s.Linger-monotime.Since(p.openedAt))
}

// sendableLocked reports whether there is a packet to send now: a sealed
// one, or the open one unless it may still linger.
func (p *Publication) sendableLocked() bool {
	return p.taken < p.sealed || (p.open && p.lingerLocked() == 0)
}

// kickLocked wakes the sending goroutine if it is idle. It never blocks
// and does not allocate.
func (p *Publication) kickLocked() {
	if p.idle {
		p.idle = false
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// dispatchLocked gets freshly appended packets sent: with Config.Inline it
// takes the sending role for the caller when it is free (inline is then
// true and the caller must call sendInline), else it wakes the sending
// goroutine.
func (p *Publication) dispatchLocked() (first, n uint64, inline bool) {
	if p.sending {
		return 0, 0, false // the holder looks for more work before it lets go
	}
	if p.inline && p.quietLocked() {
		first, n = p.takeLocked()
		return first, n, true
	}
	if p.s.Linger > 0 && p.taken == p.sealed && p.armed {
		return 0, 0, false // the sender's timer already covers the open packet
	}
	p.kickLocked()
	return 0, 0, false
}

// quietLocked reports whether the last send ended longer ago than a send
// takes: then the publisher is not in a burst, and an inline send costs
// the caller one send. In a burst (a caller back within one send's time),
// the sending goroutine takes over and packs what piles up meanwhile.
func (p *Publication) quietLocked() bool {
	return monotime.Since(monotime.Time(p.lastSend.Load())) > time.Duration(p.sendCost.Load())
}

// takeLocked takes the sending role and up to BatchPackets packets, sealing
// the open one if there is room for it in the batch.
func (p *Publication) takeLocked() (first, n uint64) {
	limit := uint64(len(p.batch.Msgs))
	if p.open && p.sealed-p.taken < limit && p.lingerLocked() == 0 {
		p.sealLocked()
	}
	first = p.taken
	n = min(p.sealed-p.taken, limit)
	p.taken += n
	p.sending = true
	return first, n
}

// finishLocked gives back the sending role after packets [done, done+n)
// were sent, bad of them refused, freeing their buffers.
func (p *Publication) finishLocked(n, bad uint64, err error) {
	p.done += n
	p.sending = false
	p.latchLocked(err)
	p.st.sendErrors.Add(bad) // after the latch: a reader that sees it sees the error
	if p.blocked {
		p.blocked = false
		p.space.Broadcast()
	}
	if p.progress != nil {
		close(p.progress)
		p.progress = nil
	}
	if p.hasWorkLocked() || p.quitting {
		p.kickLocked()
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

func (p *Publication) latchControlLocked(err error) {
	if err != nil {
		p.latchLocked(err)
		p.st.sendErrors.Add(1)
	}
}

func (p *Publication) sendInline(first, n uint64) {
	p.st.inlineSends.Add(1)
	bad, err := p.sendData(first, n)
	p.mu.Lock()
	p.finishLocked(n, bad, err)
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
		b.Msgs[i].Buf = p.pkts[(first+i)%p.q]
	}
	// Offer the packets to the sinks before sending them: a subscriber
	// can ask for a lost packet as soon as it sees the next one, and the
	// cache must hold it by then.
	var msgs, size uint64
	var next wire.Seq
	for i := range n {
		pkt := p.pkts[(first+i)%p.q]
		h, _ := wire.ParseHeader(pkt)
		msgs += uint64(h.MessageCount())
		size += uint64(len(pkt))
		for _, s := range p.s.Sinks {
			s.SentPacket(pkt)
		}
		next = h.Next()
	}
	var badMsgs, badBytes uint64
	start := monotime.Now()
	for cnt := int(n); cnt > 0; {
		sent, err := p.conn.WriteBatch(b, cnt)
		p.st.writeBatches.Add(1)
		sent = min(max(sent, 0), cnt)
		if err == nil && sent == 0 {
			err = io.ErrNoProgress
		}
		skip := sent
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("publisher: send to %s: %w", p.s.group, err)
			}
			if sent < cnt {
				skip++ // drop the packet the kernel refused
				h, _ := wire.ParseHeader(b.Msgs[sent].Buf)
				bad++
				badMsgs += uint64(h.MessageCount())
				badBytes += uint64(len(b.Msgs[sent].Buf))
			}
		}
		copy(b.Msgs, b.Msgs[skip:cnt])
		cnt -= skip
	}
	wrote := monotime.Now()
	cost := p.sendCost.Load()
	p.sendCost.Store(cost + (int64(wrote.Sub(start))-cost)/8)
	p.sentNext = next
	p.st.messages.Add(msgs - badMsgs)
	p.st.bytes.Add(size - badBytes)
	p.st.packets.Add(n - bad)
	p.lastSend.Store(int64(monotime.Now()))
	return bad, firstErr
}

// controlLocked takes the sending role and sends a heartbeat or end of
// session built by appendPkt, counting it in sent. Called with p.mu held;
// returns with it held.
func (p *Publication) controlLocked(appendPkt func([]byte, wire.Session, wire.Seq) []byte, sent *atomic.Uint64) {
	p.sending = true
	p.mu.Unlock()
	p.ctl = appendPkt(p.ctl[:0], p.s.session, p.sentNext)
	err := p.sendControl(p.ctl)
	if err == nil {
		sent.Add(1)
	}
	p.mu.Lock()
	p.sending = false
	p.latchControlLocked(err)
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

// run is the sending goroutine: it sends what publishers leave pending,
// heartbeats when idle, and the end of session when Close asks it to quit.
func (p *Publication) run() {
	defer close(p.exited)
	hb := p.s.HeartbeatInterval
	var timer *time.Timer
	if hb > 0 || p.s.Linger > 0 {
		timer = time.NewTimer(time.Hour)
		timer.Stop()
		defer timer.Stop()
	}
	p.mu.Lock()
	for {
		p.idle = false
		if !p.sending && p.sendableLocked() {
			first, n := p.takeLocked()
			p.mu.Unlock()
			bad, err := p.sendData(first, n)
			p.mu.Lock()
			p.finishLocked(n, bad, err)
			continue
		}
		if p.quitting && !p.sending {
			p.controlLocked(wire.AppendEndOfSession, &p.st.endOfSession)
			p.mu.Unlock()
			p.grace()
			return
		}
		var tick <-chan time.Time
		d := time.Duration(-1) // how long to wait: -1 for no timeout
		if hb > 0 && !p.quitting {
			d = hb - monotime.Since(monotime.Time(p.lastSend.Load()))
			if d <= 0 && !p.sending {
				p.controlLocked(wire.AppendHeartbeat, &p.st.heartbeats)
				continue
			}
			if d <= 0 { // another goroutine is sending: look again later
				d = hb
			}
		}
		if w := p.lingerLocked(); w > 0 && !p.sending {
			p.armed = true
			if d < 0 || w < d {
				d = w
			}
		}
		if d >= 0 {
			timer.Reset(d)
			tick = timer.C
		}
		p.idle = true
		p.mu.Unlock()
		select {
		case <-p.wake:
		case <-tick:
		}
		p.mu.Lock()
	}
}

// grace repeats the end of session every endEvery until Grace has passed
// since the first, so that subscribers find a lost tail and have the time
// to ask for it. Nothing else is sent: Close has stopped Publish.
func (p *Publication) grace() {
	if p.s.Grace <= 0 {
		return
	}
	end := time.Now().Add(p.s.Grace)
	t := time.NewTimer(min(p.s.endEvery, p.s.Grace))
	defer t.Stop()
	for {
		<-t.C
		left := time.Until(end)
		if left <= 0 {
			return
		}
		p.mu.Lock()
		p.controlLocked(wire.AppendEndOfSession, &p.st.endOfSession)
		p.mu.Unlock()
		t.Reset(min(p.s.endEvery, left))
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
