package subscriber

import (
	"bytes"
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/wire"
)

// StreamID names a stream: the packets of one session from one source
// address and port. With a Secondary feed (A/B) the two copies of a
// session come from different sources, so streams are keyed by session
// alone and Source is the zero AddrPort. It is comparable.
type StreamID struct {
	Source  netip.AddrPort
	Session wire.Session
}

// String formats id as "SESSION@addr:port".
func (id StreamID) String() string { return fmt.Sprintf("%s@%s", id.Session, id.Source) }

// Message is one delivered message. Data is a sub-slice of a receive
// buffer: it is valid only until the callback returns; copy what you keep.
type Message struct {
	Stream StreamID
	Seq    wire.Seq
	Data   []byte
}

// Gap is a range of sequences [From, To) found missing from a stream. Each
// sequence is reported in at most one Gap.
type Gap struct {
	Stream   StreamID
	From, To wire.Seq
}

// Len is the number of messages in the gap.
func (g Gap) Len() uint64 { return uint64(g.To - g.From) }

// coreConfig is the part of Config the stream logic needs, defaults
// applied.
type coreConfig struct {
	maxStreams int
	reorder    int
	reorderB   int // bytes held per stream at most; 0: no byte bound
	maxGap     uint64
	startSeq   wire.Seq
	ab         bool       // A/B: streams keyed by session only
	nak        nak.Config // for every stream's detector (Seed is derived per stream)
	sendNAKs   bool       // a Retransmitter is configured
	// fullGrace is how long a full reorder buffer of a subscriber that
	// sends NAKs drops newer packets before it gives up its oldest gap
	// (see overflow).
	fullGrace  time.Duration
	lossPolicy LossPolicy
	onMessage  func(Message)
	onGap      func(Gap)
	onEnd      func(StreamID, wire.Seq)
	onLoss     func(Loss)
}

// core is the stream state of a subscriber, independent of any socket.
// Every field below mu, and every stream, is guarded by mu; readers take
// it once per batch and call handleDatagram/handlePacket for each
// datagram. Callbacks run with mu held.
type core struct {
	cfg coreConfig

	mu       sync.Mutex
	streams  map[StreamID]*stream
	bySource map[netip.AddrPort]*stream // the latest stream of each source
	list     []*stream                  // the streams in order of creation (stable iteration)
	last     *stream                    // one-entry lookup cache
	free     [][]byte                   // reorder slot buffers not in use
	freeB    int                        // their capacity in bytes, kept at most freeLimit
	st       Stats
	created  uint64 // streams created, for detector seeds

	// The datagram being handled (set by handlePacket and the reader).
	now        monotime.Time
	fromRepair bool
	feed       Feed

	// Recovery (see recovery.go).
	hist    *hdrhistogram.Histogram // every stream's recovery times, µs; nil until the first
	retired nak.Stats               // detector counters of forgotten streams
	nreqs   []nak.Range             // Poll scratch
	nlost   []nak.Range             // Poll scratch
	wake    chan struct{}           // capacity 1: a gap fell due before timerAt; nil without a timer
	timerAt monotime.Time           // when the timer goroutine will poll next
}

// stream is the state of one (source, session).
//
//	 delivered         next    held packets and gaps   horizon   not yet seen
//	-------------------+--[held]----....--[held]..........+-----------------> seq
//
// Every sequence in [next, horizon) is either in a held packet or was
// reported in a Gap.
type stream struct {
	id         StreamID
	index      uint64   // order of creation, for the detector's seed
	next       wire.Seq // next sequence to deliver
	horizon    wire.Seq // one past the highest sequence seen or reported missing; >= next
	end        wire.Seq // end of session; InvalidSeq until known
	jumpAt     wire.Seq // a sequence seen beyond MaxGap, waiting for a second to confirm it (resync)
	ended      bool
	superseded bool
	stopped    bool // LossStop after a loss
	lastActive monotime.Time
	held       []heldPacket // sorted by seq; len <= cfg.reorder; a window into heldBase
	heldBase   []heldPacket // backing array, cap cfg.reorder: drain advances held's start without copying
	heldBytes  int          // bytes of the packets in held

	// Recovery: the gaps being recovered (nil until the first gap), the
	// ranges given up that next has not reached yet (sorted, disjoint,
	// each at or after next), and the recovery times in µs (nil until the
	// first).
	nak  *nak.LossDetector
	lost []nak.Range
	hist *hdrhistogram.Histogram

	delivered, bytes, dups, gaps, gapMsgs              uint64
	naks, nakMsgs, repairs, recovered, lostN, lostMsgs uint64
	heldMax                                            int
}

// heldPacket is a copy of a packet that arrived ahead of next.
type heldPacket struct {
	seq, end wire.Seq
	buf      []byte        // the whole packet, re-parsed when delivered
	feed     Feed          // where it came from
	at       monotime.Time // when it was held: the gap before it was known by then
}

func newCore(cfg coreConfig) *core {
	return &core{
		cfg:      cfg,
		streams:  make(map[StreamID]*stream, cfg.maxStreams),
		bySource: make(map[netip.AddrPort]*stream, cfg.maxStreams),
		timerAt:  maxTime,
	}
}

// drop counts a dropped datagram. c.mu must be held.
func (c *core) drop(r DropReason) {
	c.st.Dropped++
	c.st.Drops[r]++
}

// handleDatagram decodes one datagram and handles it. b is only read
// during the call. c.mu must be held.
func (c *core) handleDatagram(src netip.AddrPort, b []byte, now monotime.Time, fromRepair bool) {
	p, err := wire.ParsePacket(b)
	if err != nil {
		c.drop(dropReasonOf(err))
		return
	}
	c.handlePacket(src, p, now, fromRepair)
}

// handlePacket handles one decoded packet from src: it finds or starts its
// stream, delivers what became in order, holds what is early, reports new
// gaps and drops the rest with a reason. The packet's bytes are only read
// during the call (held packets are copied). A repair packet (fromRepair)
// joins the stream of its session whatever its source, and never starts
// one. With A/B feeds the source is ignored: streams are keyed by session.
// c.mu must be held.
func (c *core) handlePacket(src netip.AddrPort, p wire.Packet, now monotime.Time, fromRepair bool) {
	c.now, c.fromRepair = now, fromRepair
	if c.cfg.ab {
		src = netip.AddrPort{}
	}
	c.st.Packets++
	h := p.Header
	if h.IsHeartbeat() {
		c.st.Heartbeats++
	}
	if h.Seq == wire.InvalidSeq { // ParsePacket lets 0 through on heartbeats and ends
		c.drop(DropZeroSeq)
		return
	}
	s := c.lookup(StreamID{Source: src, Session: h.Session}, h.Seq, now, fromRepair)
	if s == nil {
		return
	}
	s.lastActive = now
	if s.stopped {
		c.drop(DropStopped)
		return
	}
	switch {
	case h.IsHeartbeat():
		c.heartbeat(s, h.Seq)
	case h.IsEndOfSession():
		c.endOfSession(s, h.Seq)
	default:
		c.data(s, p)
	}
}

// lookup returns the stream of id, starting it when the packet may (seq is
// the packet's first sequence), or nil after counting the drop.
func (c *core) lookup(id StreamID, seq wire.Seq, now monotime.Time, fromRepair bool) *stream {
	if s := c.last; s != nil && s.id == id {
		return s
	}
	if s, ok := c.streams[id]; ok {
		c.last = s
		return s
	}
	if fromRepair {
		return c.repairStream(id.Session)
	}
	first := c.cfg.startSeq
	if first == wire.InvalidSeq {
		first = seq // join live: the first packet seen starts the stream
	} else if seq > first && uint64(seq-first) > c.cfg.maxGap {
		c.drop(DropSeqJump)
		return nil
	}
	prev := c.bySource[id.Source]
	if len(c.streams) >= c.cfg.maxStreams && !c.evict() {
		c.drop(DropTooManyStreams)
		return nil
	}
	if prev != nil && !c.cfg.ab { // A/B: the source is unknown, so nothing is superseded
		prev.superseded = true
		c.st.SessionChanges++
	}
	s := &stream{id: id, index: c.created, next: first, horizon: first, end: wire.InvalidSeq, lastActive: now}
	c.created++
	c.streams[id] = s
	c.bySource[id.Source] = s
	c.list = append(c.list, s)
	c.last = s
	return s
}

// repairStream finds the stream a repair of session belongs to: the most
// recently active one with that session.
func (c *core) repairStream(session wire.Session) *stream {
	var best *stream
	for _, s := range c.streams {
		if s.id.Session == session && (best == nil || s.lastActive > best.lastActive) {
			best = s
		}
	}
	if best == nil {
		c.drop(DropUnknownRepair)
	}
	return best
}

// evict forgets the least recently active ended, stopped or superseded
// stream to make room for a new one. Live streams are never evicted; what
// a superseded stream was still recovering is abandoned unreported.
func (c *core) evict() bool {
	var victim *stream
	for _, s := range c.list {
		if (s.ended || s.stopped || s.superseded) && (victim == nil || s.lastActive < victim.lastActive) {
			victim = s
		}
	}
	if victim == nil {
		return false
	}
	c.retire(victim)
	c.list = slices.DeleteFunc(c.list, func(s *stream) bool { return s == victim })
	c.release(victim, 0)
	delete(c.streams, victim.id)
	if c.bySource[victim.id.Source] == victim {
		delete(c.bySource, victim.id.Source)
	}
	if c.last == victim {
		c.last = nil
	}
	c.st.StreamsEvicted++
	return true
}

// release frees the held packets of s from index i on.
func (c *core) release(s *stream, i int) {
	for j := i; j < len(s.held); j++ {
		c.recycle(s, s.held[j].buf)
		s.held[j].buf = nil
	}
	c.st.Held -= len(s.held) - i
	s.held = s.held[:i]
}

// freeLimit bounds the capacity of the idle slot buffers kept for reuse:
// a burst that held many large packets does not pin that memory forever.
const freeLimit = 64 << 20

// recycle takes back the slot buffer of a packet s held.
func (c *core) recycle(s *stream, buf []byte) {
	s.heldBytes -= len(buf)
	if c.freeB+cap(buf) > freeLimit {
		return // let the collector have it
	}
	c.freeB += cap(buf)
	c.free = append(c.free, buf[:0])
}

// data handles a packet that carries messages.
func (c *core) data(s *stream, p wire.Packet) {
	seq, end := p.Seq, p.Next()
	switch {
	case end <= s.next: // everything delivered already (or before StartSeq)
		s.dups += uint64(p.Count)
		c.st.Duplicates += uint64(p.Count)
		c.drop(DropDuplicate)
		return
	case s.end != wire.InvalidSeq && end > s.end:
		c.drop(DropAfterEnd)
		return
	case seq > s.next && uint64(seq-s.next) > c.cfg.maxGap:
		if !c.resync(s, seq) {
			c.drop(DropSeqJump)
			return
		}
		c.data(s, p) // within reach now
		return
	case seq <= s.next:
		c.received(s, s.next, end)
		c.deliver(s, p, c.feed)
		c.advance(s)
		c.finish(s)
		return
	}
	// Ahead of next: hold it, report what is newly missing before it.
	gapEnd := seq
	switch c.hold(s, p) {
	case holdDuplicate:
		s.dups += uint64(p.Count)
		c.st.Duplicates += uint64(p.Count)
		c.drop(DropDuplicate)
		return
	case holdFull:
		if c.overflow(s) {
			c.data(s, p) // there is room now, or p is in order
			return
		}
		c.drop(DropReorderFull)
		gapEnd = end // its messages are missing too
	default:
		c.received(s, seq, end)
	}
	c.reportGap(s, gapEnd)
	s.horizon = max(s.horizon, end)
}

// overflow makes room in the full reorder buffer of s by giving up its
// oldest gap, [next, first held packet), as a Loss. The buffer is the
// stream's budget of waiting: dropping the newer packet instead would only
// turn it into a gap of its own, and at high rates every following packet
// too, a cascade that loses far more than the one gap.
//
// A subscriber that sends NAKs first drops the newer packet (it can ask
// for it again) while the oldest gap is young: its repair is likely on its
// way. Once the gap has waited fullGrace (two NAK retry intervals) without
// a repair, it is given up as well: a repair that late would itself find
// the buffer full and be dropped, and asking again while the cache moves
// on loses everything after it (seen at 3M msgs/s before this rule: one
// stalled repair, then 28M messages lost). It reports whether it made
// room.
func (c *core) overflow(s *stream) bool {
	if len(s.held) == 0 || s.stopped || s.held[0].seq <= s.next {
		return false
	}
	if c.cfg.sendNAKs && c.now.Sub(s.held[0].at) < c.cfg.fullGrace {
		return false
	}
	r := nak.Range{From: s.next, To: s.held[0].seq}
	if s.nak != nil {
		s.nak.OnReceived(c.now, r) // stop asking for it
	}
	c.st.ReorderOverflows++
	addLost(s, r)
	c.advance(s)
	return true
}

// deliver hands the messages of p from s.next on to the application and
// advances s.next past p. p must start at or before s.next and end after.
// feed is where p came from.
func (c *core) deliver(s *stream, p wire.Packet, feed Feed) {
	it := p.Messages()
	if skip := uint64(s.next - p.Seq); skip > 0 {
		it.Skip(int(skip))
		s.dups += skip
		c.st.Duplicates += skip
	}
	var n, nb uint64
	on := c.cfg.onMessage
	for {
		msg, seq, ok := it.Next()
		if !ok {
			break
		}
		if on != nil {
			on(Message{Stream: s.id, Seq: seq, Data: msg})
		}
		n++
		nb += uint64(len(msg))
	}
	s.next = p.Next()
	s.horizon = max(s.horizon, s.next)
	s.delivered += n
	s.bytes += nb
	c.st.Messages += n
	c.st.Bytes += nb
	c.st.FeedMessages[feed] += n
}

// drain delivers held packets that became in order.
func (c *core) drain(s *stream) {
	k := 0
	for ; k < len(s.held) && s.held[k].seq <= s.next; k++ {
		h := &s.held[k]
		if h.end <= s.next {
			n := uint64(h.end - h.seq)
			s.dups += n
			c.st.Duplicates += n
		} else if p, err := wire.ParsePacket(h.buf); err == nil { // always: it was valid when copied
			c.deliver(s, p, h.feed)
		}
		c.recycle(s, h.buf)
		h.buf = nil
	}
	if k > 0 {
		// Advance the window instead of copying the rest down: with
		// thousands held behind a repaired gap, a copy per repair would
		// make recovery quadratic. hold compacts when the window reaches
		// the end of the backing array.
		clear(s.held[:k])
		s.held = s.held[k:]
		if len(s.held) == 0 {
			s.held = s.heldBase[:0]
		}
		c.st.Held -= k
	}
}

type holdResult uint8

const (
	holdOK holdResult = iota
	holdDuplicate
	holdFull
)

// hold copies p, which starts after s.next, into s's reorder buffer in
// sequence order.
func (c *core) hold(s *stream, p wire.Packet) holdResult {
	seq, end := p.Seq, p.Next()
	i, _ := slices.BinarySearchFunc(s.held, seq, func(h heldPacket, seq wire.Seq) int { return cmp.Compare(h.seq, seq) })
	// Covered by the held packet that starts at or before it?
	if i < len(s.held) && s.held[i].seq == seq && s.held[i].end >= end ||
		i > 0 && s.held[i-1].end >= end {
		return holdDuplicate
	}
	if len(s.held) >= c.cfg.reorder || c.cfg.reorderB > 0 && s.heldBytes+wire.HeaderLen+len(p.Body()) > c.cfg.reorderB {
		return holdFull
	}
	if s.heldBase == nil {
		s.heldBase = make([]heldPacket, 0, c.cfg.reorder)
		s.held = s.heldBase
	}
	if len(s.held) == cap(s.held) { // the window reached the end: compact (amortised O(1))
		full := s.heldBase[:cap(s.heldBase)]
		n := copy(full, s.held)
		clear(full[n:])
		s.held = full[:n]
	}
	var buf []byte
	if n := len(c.free); n > 0 {
		buf, c.free[n-1] = c.free[n-1], nil
		c.free = c.free[:n-1]
		c.freeB -= cap(buf)
	}
	buf = wire.AppendHeader(buf, p.Header)
	buf = append(buf, p.Body()...)
	s.heldBytes += len(buf)
	s.held = slices.Insert(s.held, i, heldPacket{seq: seq, end: end, buf: buf, feed: c.feed, at: c.now})
	s.heldMax = max(s.heldMax, len(s.held))
	c.st.HeldMax = max(c.st.HeldMax, len(s.held))
	c.st.Held++
	c.st.Reordered++
	return holdOK
}

// reportGap reports [s.horizon, to) missing when it is not empty, and
// moves the horizon to it.
func (c *core) reportGap(s *stream, to wire.Seq) {
	if to <= s.horizon {
		return
	}
	g := Gap{Stream: s.id, From: s.horizon, To: to}
	s.horizon = to
	s.gaps++
	s.gapMsgs += g.Len()
	c.st.Gaps++
	c.st.GapMessages += g.Len()
	if c.cfg.onGap != nil {
		c.cfg.onGap(g)
	}
	c.gapFound(s, g.From, g.To)
}

// heartbeat handles a heartbeat announcing next as the next sequence: a
// sequence beyond the horizon reveals lost packets (tail loss).
func (c *core) heartbeat(s *stream, next wire.Seq) {
	switch {
	case s.end != wire.InvalidSeq && next > s.end:
		c.drop(DropAfterEnd)
	case next <= s.horizon:
	case uint64(next-s.next) > c.cfg.maxGap && !c.resync(s, next):
		c.drop(DropSeqJump)
	default:
		c.reportGap(s, next)
	}
}

// resync lets a stream that fell more than MaxGap behind its publisher
// (an outage, an overload) catch up. The first packet or heartbeat that
// far ahead is dropped and its sequence remembered; a second one that
// agrees with it (at or after it, and within MaxGap of it) shows that the
// publisher really is there, so the stream gives up everything before the
// remembered sequence, reported as a Loss minus whatever it holds, and
// goes on from it. A lone corrupt or forged sequence costs one dropped
// packet; a stream cut off no longer drops every later packet. It reports
// whether the stream moved (seq is then within MaxGap of next).
func (c *core) resync(s *stream, seq wire.Seq) bool {
	if s.stopped {
		return false
	}
	if s.jumpAt == wire.InvalidSeq || seq < s.jumpAt || uint64(seq-s.jumpAt) > c.cfg.maxGap {
		s.jumpAt = seq
		return false
	}
	from := s.jumpAt
	s.jumpAt = wire.InvalidSeq
	r := nak.Range{From: s.next, To: from}
	if s.nak != nil {
		s.nak.OnReceived(c.now, r) // stop asking for it
	}
	c.st.Resyncs++
	addLost(s, r)
	c.advance(s)
	s.horizon = max(s.horizon, s.next)
	return !s.stopped && s.next == from
}

// endOfSession handles the end of session at end (the sequence after the
// session's last message).
func (c *core) endOfSession(s *stream, end wire.Seq) {
	switch {
	case s.end != wire.InvalidSeq:
		if end != s.end {
			c.drop(DropBadEndOfSession)
		}
		return // a repeat
	case end < s.next:
		c.drop(DropBadEndOfSession)
		return
	case uint64(end-s.next) > c.cfg.maxGap:
		c.drop(DropSeqJump)
		return
	}
	s.end = end
	// Held packets reaching past the end cannot be part of the session.
	for i := 0; i < len(s.held); {
		if s.held[i].end <= end {
			i++
			continue
		}
		c.recycle(s, s.held[i].buf)
		s.held = slices.Delete(s.held, i, i+1)
		c.st.Held--
		c.drop(DropAfterEnd)
	}
	c.reportGap(s, end)
	c.finish(s)
}

// finish ends s once everything before its end of session is delivered.
func (c *core) finish(s *stream) {
	if s.ended || s.stopped || s.end == wire.InvalidSeq || s.next < s.end {
		return
	}
	s.ended = true
	c.release(s, 0)
	s.held = nil
	c.abandon(s)
	c.st.StreamsEnded++
	if c.cfg.onEnd != nil {
		c.cfg.onEnd(s.id, s.next)
	}
}

// stats returns the counters. c.mu must be held.
func (c *core) stats() Stats {
	st := c.st
	st.Streams = len(c.streams)
	st.Suppressed = c.retired.Suppressed
	for _, s := range c.list {
		if s.nak != nil {
			st.Suppressed += s.nak.Stats().Suppressed
		}
	}
	st.RecoveryP50, st.RecoveryP99, st.RecoveryMax = percentiles(c.hist)
	return st
}

// streamStats returns every stream's state, by source then session.
// c.mu must be held.
func (c *core) streamStats() []StreamStats {
	out := make([]StreamStats, 0, len(c.streams))
	for _, s := range c.list {
		ss := StreamStats{
			ID: s.id, Next: s.next, Horizon: s.horizon, End: s.end,
			Delivered: s.delivered, Bytes: s.bytes, Duplicates: s.dups,
			Gaps: s.gaps, GapMessages: s.gapMsgs,
			Held: len(s.held), HeldMax: s.heldMax,
			Ended: s.ended, Superseded: s.superseded, Stopped: s.stopped,
			NAKs: s.naks, NAKMessages: s.nakMsgs, Repairs: s.repairs, Recovered: s.recovered,
			LostRanges: s.lostN, LostMessages: s.lostMsgs,
		}
		if s.nak != nil {
			ss.Missing = s.nak.Pending()
			ss.Detector = s.nak.Stats()
		}
		ss.RecoveryP50, ss.RecoveryP99, ss.RecoveryMax = percentiles(s.hist)
		out = append(out, ss)
	}
	slices.SortFunc(out, func(a, b StreamStats) int {
		if c := a.ID.Source.Compare(b.ID.Source); c != 0 {
			return c
		}
		return bytes.Compare(a.ID.Session[:], b.ID.Session[:])
	})
	return out
}
