package subscriber

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/wire"
)

// stream is the state of one (source, session).
//
//	 delivered         next    held packets and gaps   horizon   not yet seen
//	-------------------+--[held]----....--[held]..........+-----------------> seq
//
// Every sequence in [next, horizon) is either in a held packet or was
// reported in a Gap.
type stream struct {
	id    StreamID
	key   streamKey
	index uint64 // order of creation, for the detector's seed
	// msgBytes and msgs: the live feed's message bytes and count, halved
	// when msgs passes msgWindow, so their ratio follows the recent
	// message size; it sizes re-requests (see chunk).
	msgBytes, msgs uint64
	next           wire.Seq // next sequence to deliver
	horizon        wire.Seq // one past the highest sequence seen or reported missing; >= next
	end            wire.Seq // end of session; InvalidSeq until known
	ended          bool
	superseded     bool // its source has since started another session
	replaced       bool // a newer incarnation of its session took its place
	current        bool // the current incarnation of its session (c.bySession)
	// catchUp is its horizon when it became current after waiting for
	// its predecessor to go quiet: the gaps before it were all asked for
	// at once then (see overflow). 0 for a stream that never waited.
	catchUp wire.Seq
	// askFrom: a new incarnation that took its predecessor's place at
	// once (graced) asks for nothing before it (see restartGrace).
	askFrom    monotime.Time
	graced     bool
	stopped    bool // LossStop after a loss
	lastActive monotime.Time
	// feedNext is, per feed, one past the highest sequence the publisher's
	// own packets (not repairs) brought: what a restart goes back from.
	feedNext [NumFeeds]wire.Seq
	// jump is a packet or heartbeat of the publisher's beyond MaxGap
	// waiting for a second to confirm a resync; restart one that went
	// back to an earlier sequence, waiting for a second to confirm a new
	// incarnation (see suspect).
	jump, restart suspect
	held          []heldPacket // sorted by seq; len <= cfg.reorder; a window into heldBase
	heldBase      []heldPacket // backing array, grown up to twice cfg.reorder: drain advances held's start without copying (see insertHeld)
	heldBytes     int          // bytes of the packets in held

	// Recovery: the gaps being recovered (nil until the first gap), the
	// ranges given up that next has not reached yet (sorted, disjoint,
	// each at or after next), and the recovery times in µs (nil until the
	// first).
	nak  *nak.LossDetector
	lost []nak.Range
	hist *hdrhistogram.Histogram

	delivered, bytes, dups, gaps, gapMsgs              uint64
	naks, nakMsgs, repairs, recovered, lostN, lostMsgs uint64
	resyncs                                            uint64
	heldMax                                            int
}

// heldPacket is a copy of a packet that arrived ahead of next.
type heldPacket struct {
	seq, end wire.Seq
	buf      []byte        // the whole packet as it arrived (validated then)
	feed     Feed          // where it came from
	at       monotime.Time // when it was held: the gap before it was known by then
}

// suspect is a packet of a stream's own source that, alone, does not fit
// the stream: it jumped more than MaxGap ahead, or went back to an
// earlier sequence. It is kept (a data packet's copy in buf) until a
// second packet from the same source confirms it or a fitting one clears
// it.
type suspect struct {
	set       bool
	seq, next wire.Seq // its first sequence and one past its last (seq for a heartbeat)
	heartbeat bool
	src       netip.AddrPort
	feed      Feed
	buf       []byte // the packet, nil for a heartbeat
}

// keepSuspect makes p, which arrived as a, the suspect sus, copying a
// data packet.
func (c *core) keepSuspect(sus *suspect, p wire.Packet, a arrival) {
	*sus = suspect{set: true, seq: p.Seq, next: p.Next(), heartbeat: p.IsHeartbeat(), src: a.src, feed: a.feed}
	if !p.IsHeartbeat() && !p.IsEndOfSession() {
		buf := c.slot()
		buf = wire.AppendHeader(buf, p.Header)
		sus.buf = append(buf, p.Body()...)
	}
}

// clearSuspect forgets sus (its drop was counted when it arrived).
func (c *core) clearSuspect(sus *suspect) {
	if sus.buf != nil {
		c.recycleBuf(sus.buf)
	}
	*sus = suspect{}
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
	c.recycleBuf(buf)
}

// slot returns an empty slot buffer, reused when one is free.
func (c *core) slot() []byte {
	var buf []byte
	if n := len(c.free); n > 0 {
		buf, c.free[n-1] = c.free[n-1], nil
		c.free = c.free[:n-1]
		c.freeB -= cap(buf)
	}
	return buf
}

// recycleBuf takes back a slot buffer.
func (c *core) recycleBuf(buf []byte) {
	if c.freeB+cap(buf) > freeLimit {
		return // let the collector have it
	}
	c.freeB += cap(buf)
	c.free = append(c.free, buf[:0])
}

// data handles a packet that carries messages, which arrived as a: it
// delivers, holds or drops it. Two outcomes leave the stream ready for p
// only afterwards: a confirmed jump (the stream resynced, and p is within
// MaxGap of next) and a full reorder buffer that gave up its oldest gap
// (there is room now, or p is in order). p is then placed again, once
// round the loop. Each of them moves next forward, and a second jump
// finds no suspect to confirm, so the loop ends.
func (c *core) data(s *stream, p wire.Packet, a arrival) {
	seq, end := p.Seq, p.Next()
	for {
		switch {
		case end <= s.next: // everything delivered already (or before StartSeq)
			s.dups += uint64(p.Count)
			c.st.Duplicates += uint64(p.Count)
			c.drop(DropDuplicate)
			return
		case s.pastEnd(end):
			c.drop(DropAfterEnd)
			return
		case seq > s.next && uint64(seq-s.next) > c.cfg.maxGap:
			if c.jumped(s, p, a) {
				continue // resynced: within reach now
			}
			return
		case seq <= s.next:
			// inOrder, written out: this is the hot path, and a call
			// more between here and deliver cost a quarter of the
			// in-order throughput (BenchmarkDeliver).
			c.received(s, s.next, end, a)
			c.deliver(s, p.Messages(), seq, end, a.feed)
			c.advance(s)
			c.finish(s)
			return
		}
		// Ahead of next: hold it, report what is newly missing before it.
		gapEnd := seq
		switch c.hold(s, p, a) {
		case holdDuplicate:
			s.dups += uint64(p.Count)
			c.st.Duplicates += uint64(p.Count)
			c.drop(DropDuplicate)
			return
		case holdFull:
			if c.overflow(s, a.now) {
				continue // there is room now, or p is in order
			}
			c.drop(DropReorderFull)
			gapEnd = end // its messages are missing too
		default:
			c.received(s, seq, end, a)
		}
		c.reportGap(s, gapEnd, a.now)
		s.horizon = max(s.horizon, end)
		return
	}
}

// inOrder delivers p, which arrived as a and starts at or before s.next,
// then the held packets and losses it brought into order. data does the
// same, written out.
func (c *core) inOrder(s *stream, p wire.Packet, a arrival) {
	c.received(s, s.next, p.Next(), a)
	c.deliver(s, p.Messages(), p.Seq, p.Next(), a.feed)
	c.advance(s)
	c.finish(s)
}

// pastEnd reports whether a packet ending at end reaches past the
// stream's end of session.
func (s *stream) pastEnd(end wire.Seq) bool {
	return s.end != wire.InvalidSeq && end > s.end
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
// on would lose everything after it (one stalled repair at 3M msgs/s
// would cost tens of millions of messages).
//
// A new incarnation waiting for its session's previous one to go quiet
// asks for nothing, so it never gives up a gap to make room: what it
// drops it asks for once it is current, and its detector, which runs
// replaceQuiet behind, bounds the wait. Once current it asks for the
// whole backlog at once, and the answers come one packet per request,
// queued behind each other: until it has caught up with that backlog
// (next reaches catchUp) a gap's age says nothing of its repair, so it
// gives up none for room either; the detector's deadline, counted from
// when it became current, bounds that too. It reports whether it made
// room at now.
func (c *core) overflow(s *stream, now monotime.Time) bool {
	if len(s.held) == 0 || s.stopped || s.held[0].seq <= s.next {
		return false
	}
	if c.cfg.sendNAKs && (c.waiting(s) || s.next < s.catchUp || now.Sub(s.held[0].at) < c.cfg.fullGrace) {
		return false
	}
	r := nak.Range{From: s.next, To: s.held[0].seq}
	if s.nak != nil {
		c.nlost = s.nak.GiveUpBelow(r.To, c.nlost[:0]) // stop asking for it: lost, not filled
	}
	c.st.ReorderOverflows++
	addLost(s, r)
	c.advance(s)
	return true
}

// deliver hands the messages of a packet [first, end), walked by it, from
// s.next on to the application and advances s.next to end. The packet
// must start at or before s.next and end after. feed is where it came
// from.
func (c *core) deliver(s *stream, it wire.MessageIter, first, end wire.Seq, feed Feed) {
	if skip := uint64(s.next - first); skip > 0 {
		it.Skip(int(skip))
		s.dups += skip
		c.st.Duplicates += skip
	}
	var n, nb uint64
	on := c.cfg.onMessage
	m := Message{Stream: s.id, PacketStart: true}
	for {
		msg, seq, ok := it.Next()
		if !ok {
			break
		}
		if on != nil {
			m.Seq, m.Data = seq, msg
			on(m)
			m.PacketStart = false
		}
		n++
		nb += uint64(len(msg))
	}
	s.next = end
	s.horizon = max(s.horizon, s.next)
	s.delivered += n
	s.bytes += nb
	c.st.Messages += n
	c.st.Bytes += nb
	c.st.FeedMessages[feed] += n
}

// drain delivers held packets that became in order.
//
// A held copy is usually cold by the time its gap is repaired (written a
// repair round trip earlier, often on the other core), and walking its
// length prefixes is a chain of dependent loads: one cache miss after
// another. Once touchAbove bytes are held, drain touches the packet after
// the one it parses, one load per cache line with nothing depending on
// them, so the CPU fetches those lines in parallel while the current
// packet is delivered.
func (c *core) drain(s *stream) {
	ahead := s.heldBytes >= touchAbove
	if ahead && len(s.held) > 0 && s.held[0].seq <= s.next {
		c.touched += touch(s.held[0].buf)
	}
	k := 0
	for ; k < len(s.held) && s.held[k].seq <= s.next; k++ {
		h := &s.held[k]
		if ahead && k+1 < len(s.held) {
			c.touched += touch(s.held[k+1].buf)
		}
		if h.end <= s.next {
			n := uint64(h.end - h.seq)
			s.dups += n
			c.st.Duplicates += n
		} else {
			// The copy of a packet validated when it arrived: walked
			// without checking it again (a second walk of cold memory).
			c.deliver(s, wire.MessagesOf(h.buf[wire.HeaderLen:], h.seq), h.seq, h.end, h.feed)
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

// touchAbove is the held bytes from which drain touches ahead: below it
// the copies are still in the core's L2 cache (1-2 MiB on a current
// server), where the hardware prefetcher keeps up and the touches only
// cost (BenchmarkDrainBacklog: up to 5% slower with 1,024 packets held,
// 10-15% faster with 8,192).
const touchAbove = 2 << 20

// touch reads one byte of each cache line of b, independent loads that
// bring them in together (see drain). The sum only keeps the compiler from
// dropping the loads.
func touch(b []byte) byte {
	var x byte
	for i := 0; i < len(b); i += 64 {
		x += b[i]
	}
	return x
}

type holdResult uint8

const (
	holdOK holdResult = iota
	holdDuplicate
	holdFull
)

// hold copies p, which starts after s.next and arrived as a, into s's
// reorder buffer in sequence order.
func (c *core) hold(s *stream, p wire.Packet, a arrival) holdResult {
	seq, end := p.Seq, p.Next()
	// The live feed lands after the newest held packet: look there before
	// searching (repairs land near the front).
	i := len(s.held)
	if i > 0 && s.held[i-1].seq >= seq {
		i, _ = slices.BinarySearchFunc(s.held, seq, func(h heldPacket, seq wire.Seq) int { return cmp.Compare(h.seq, seq) })
	}
	// Covered by the held packet that starts at or before it?
	if i < len(s.held) && s.held[i].seq == seq && s.held[i].end >= end ||
		i > 0 && s.held[i-1].end >= end {
		return holdDuplicate
	}
	for len(s.held) >= c.cfg.reorder || c.cfg.reorderB > 0 && s.heldBytes+wire.HeaderLen+len(p.Body()) > c.cfg.reorderB {
		// Full. A packet older than the newest held brings delivery
		// closer than that one does: the newest gives up its slot and
		// is asked for again. Without this, a buffer filled by the live
		// feed during a long gap refuses the very repairs that would
		// drain it.
		last := len(s.held) - 1
		if last < 0 || !c.cfg.sendNAKs || s.held[last].seq <= seq {
			return holdFull
		}
		ev := s.held[last]
		c.recycle(s, ev.buf)
		s.held[last] = heldPacket{}
		s.held = s.held[:last]
		c.st.Held--
		c.st.ReorderEvicted++
		c.gapFound(s, ev.seq, ev.end, a.now)
	}
	buf := wire.AppendHeader(c.slot(), p.Header)
	buf = append(buf, p.Body()...)
	s.heldBytes += len(buf)
	c.insertHeld(s, i, heldPacket{seq: seq, end: end, buf: buf, feed: a.feed, at: a.now})
	s.heldMax = max(s.heldMax, len(s.held))
	c.st.HeldMax = max(c.st.HeldMax, len(s.held))
	c.st.Held++
	c.st.Reordered++
	return holdOK
}

// insertHeld inserts h at index i of s.held, which has room for it
// (len(s.held) < cfg.reorder). s.held is a window into s.heldBase: drain
// advances its start, so there is usually room on both sides, and the
// insert moves the shorter side, the entries before i one slot down or
// those from i one slot up. Repairs land near the front (the oldest
// gaps), the live feed at the back, so both cost little even with a
// hundred thousand packets held behind a gap; a plain insert moved
// everything after a repair, megabytes per repair, and under sustained
// loss that copying alone made a subscriber fall further behind.
//
// The backing array grows by doubling from heldInitial, up to twice
// cfg.reorder, so that a stream that holds little costs little, and a
// full window is compacted only when the room it frees at the end is at
// least a quarter of the array (amortised O(1) per packet).
func (c *core) insertHeld(s *stream, i int, h heldPacket) {
	n := len(s.held)
	off := cap(s.heldBase) - cap(s.held) // s.held's start in s.heldBase
	if i < n/2 && off > 0 {
		w := s.heldBase[off-1 : off+n]
		copy(w[:i], s.held[:i])
		w[i] = h
		s.held = w
		return
	}
	if n == cap(s.held) { // the window reached the end of the array
		limit := 2 * max(c.cfg.reorder, 1)
		if off > 0 && (4*off >= cap(s.heldBase) || cap(s.heldBase) >= limit) {
			full := s.heldBase[:cap(s.heldBase)]
			copy(full, s.held)
			clear(full[n:])
			s.held = full[:n]
		} else {
			grown := make([]heldPacket, n, min(max(2*cap(s.heldBase), heldInitial), limit))
			copy(grown, s.held)
			clear(s.held)
			s.heldBase, s.held = grown[:0], grown
		}
	}
	s.held = slices.Insert(s.held, i, h)
}

// heldInitial is the first size of a stream's held array.
const heldInitial = 256

// reportGap reports [s.horizon, to) missing at now when it is not empty,
// and moves the horizon to it.
func (c *core) reportGap(s *stream, to wire.Seq, now monotime.Time) {
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
	c.gapFound(s, g.From, g.To, now)
}

// heartbeat handles a heartbeat, which arrived as a, announcing next as
// the next sequence: a sequence beyond the horizon reveals lost packets
// (tail loss).
func (c *core) heartbeat(s *stream, next wire.Seq, p wire.Packet, a arrival) {
	switch {
	case s.pastEnd(next):
		c.drop(DropAfterEnd)
	case next <= s.horizon:
	case uint64(next-s.next) > c.cfg.maxGap && !c.jumped(s, p, a):
	default:
		c.reportGap(s, next, a.now)
	}
}

// jumped handles p, a packet or heartbeat more than MaxGap ahead of s's
// next sequence. Alone it is a suspect: corrupt, forged, or the first sign
// that the stream fell behind a live publisher (an outage, an overload).
// A repair never moves a stream that far and is dropped (DropSeqJump). The
// first such packet of the stream's own source is kept; a second one of
// the same source that continues it (at or after its end, within MaxGap
// of it) confirms the jump: the stream resyncs to the suspect's sequence
// and the suspect is delivered. It reports whether the stream resynced (p
// is then within MaxGap of next).
func (c *core) jumped(s *stream, p wire.Packet, a arrival) bool {
	c.st.SuspectJumps++
	c.drop(DropSeqJump)
	if a.repair || s.stopped {
		return false
	}
	sus := &s.jump
	seq := p.Seq
	mine := sus.set && sus.src == a.src && sus.feed == a.feed
	if mine && (sus.seq <= s.next || uint64(sus.seq-s.next) <= c.cfg.maxGap) {
		// The stream caught up with the suspect since it was kept: it
		// is no jump any more, and resyncing to it would move next
		// back. Forget it (its messages, if still missing when the
		// stream gets there, are a gap like any other); p is judged
		// on its own below.
		c.clearSuspect(sus)
		mine = false
	}
	if mine && seq >= sus.next && uint64(seq-sus.next) <= c.cfg.maxGap && (seq > sus.seq || p.IsHeartbeat() != sus.heartbeat) {
		kept := *sus
		*sus = suspect{}
		c.resync(s, kept.seq, a.now)
		if kept.buf != nil {
			// resync moved next to the suspect's first sequence: it is in
			// order, unless an end of session since came before its end.
			if q, err := wire.ParsePacket(kept.buf); err == nil && !s.stopped { // always valid: it was when copied
				if s.pastEnd(q.Next()) {
					c.drop(DropAfterEnd)
				} else {
					c.inOrder(s, q, a)
				}
			}
			c.recycleBuf(kept.buf)
		}
		return !s.stopped
	}
	if mine && seq == sus.seq && p.IsHeartbeat() == sus.heartbeat {
		return false // the suspect again
	}
	c.clearSuspect(sus)
	c.keepSuspect(sus, p, a)
	if c.cfg.onSuspect != nil {
		c.cfg.onSuspect(s.id, s.next, seq)
	}
	return false
}

// resync moves s, confirmed to be more than MaxGap behind its publisher,
// to seq. What it holds is delivered, the gaps between its held packets
// are given up as losses (OnLoss), and the rest, [last held or next,
// seq), is skipped and reported as a Resync (OnResync, Stats.Resyncs), not
// as lost messages: the range is bounded by nothing but a sequence off the
// wire. With LossStop the stream stops there. now is when the jump was
// confirmed.
func (c *core) resync(s *stream, seq wire.Seq, now monotime.Time) {
	if n := len(s.held); n > 0 {
		if s.nak != nil {
			// Its gaps are given up here, not by the detector's deadline:
			// it must stop asking for them too (they lie below the new next).
			c.nlost = s.nak.GiveUpBelow(s.held[n-1].end, c.nlost[:0])
		}
		addLost(s, nak.Range{From: s.next, To: s.held[n-1].end})
		c.advance(s)
		if s.stopped {
			return
		}
	}
	from := s.next
	if s.nak != nil {
		s.nak.OnReceived(now, nak.Range{From: from, To: seq}) // stop asking for it
	}
	s.lost = slices.DeleteFunc(s.lost, func(r nak.Range) bool { return r.From < seq })
	s.next = seq
	s.horizon = max(s.horizon, seq)
	s.resyncs++
	c.st.Resyncs++
	if c.cfg.onResync != nil {
		c.cfg.onResync(Resync{Stream: s.id, From: from, To: seq})
	}
	if c.cfg.lossPolicy == LossStop {
		c.stop(s)
	}
}

// endOfSession handles the end of session at end (the sequence after the
// session's last message), which arrived at now.
func (c *core) endOfSession(s *stream, end wire.Seq, now monotime.Time) {
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
	c.reportGap(s, end, now)
	c.finish(s)
}

// finish ends s once everything before its end of session is delivered.
func (c *core) finish(s *stream) {
	if s.ended || s.stopped || s.end == wire.InvalidSeq || s.next < s.end {
		return
	}
	s.ended = true
	c.release(s, 0)
	s.held, s.heldBase = nil, nil
	c.abandon(s)
	c.st.StreamsEnded++
	if c.cfg.onEnd != nil {
		c.cfg.onEnd(s.id, s.next)
	}
}
