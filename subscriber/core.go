package subscriber

import (
	"bytes"
	"cmp"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/wire"
)

// StreamID names a stream: one incarnation of a session from one source
// address and port (wire.StreamID, the identity every role uses). With a
// Secondary feed (A/B) the two copies of a session come from different
// sources, so streams are keyed by session alone and Source is the zero
// AddrPort. Incarnation counts, from 1, the times this subscriber saw the
// session start: a publisher restarted under the same session name on a
// new source port, or on the same port with its sequence starting over
// (wire.StreamPos.Fit), is a new incarnation, and nothing of one
// incarnation is delivered as another's (see "Streams" in the package
// documentation).
type StreamID = wire.StreamID

// streamKey is what a packet names of its stream: the source (zero with
// A/B feeds) and the session. Its current incarnation is the stream.
type streamKey struct {
	source  netip.AddrPort
	session wire.Session
}

// Message is one delivered message. Data is a sub-slice of a receive
// buffer: it is valid only until the callback returns; copy what you keep.
type Message struct {
	Stream StreamID
	Seq    wire.Seq
	Data   []byte
	// PacketStart: the first message delivered from its packet (the
	// others of that packet follow it with PacketStart false), so a
	// recorder can keep which messages shared a packet.
	PacketStart bool
}

// Gap is a range of sequences [From, To) found missing from a stream. Each
// sequence is reported in at most one Gap.
type Gap struct {
	Stream   StreamID
	From, To wire.Seq
}

// Len is the number of messages in the gap.
func (g Gap) Len() uint64 { return uint64(g.To - g.From) }

// Resync is a jump of a stream past a range it will never receive: the
// stream fell more than Config.MaxGap behind its publisher (an outage, an
// overload) and, once the publisher's own packets confirmed the jump, went
// on from To. [From, To) is skipped; unlike a Loss it was never reported
// missing nor requested.
type Resync struct {
	Stream   StreamID
	From, To wire.Seq
}

// coreConfig is the part of Config the stream logic needs, defaults
// applied.
type coreConfig struct {
	maxStreams int
	perSource  int           // streams per source address at most
	idle       time.Duration // a stream silent this long is forgotten; 0: never
	reorder    int
	reorderB   int // bytes held per stream at most; 0: no byte bound
	maxGap     uint64
	startSeq   wire.Seq
	ab         bool       // A/B: streams keyed by session only
	nak        nak.Config // for every stream's detector (Seed is derived per stream)
	// backoff: the detectors share a nak.GroupBackoff sized by the
	// retransmitter's confirms (the default, with neither NAK.Delay nor
	// NAK.Generator set).
	backoff bool
	// payload is the answer packet size assumed when sizing requests
	// (the default for the group's family).
	payload  int
	sendNAKs bool   // a Retransmitter or RetransmitPort is configured
	retrPort uint16 // RetransmitPort: each stream's source is asked at this port
	asker    asker  // who is asked: the Retransmitter and its Backups
	// fullGrace is how long a full reorder buffer of a subscriber that
	// sends NAKs drops newer packets before it gives up its oldest gap
	// (see overflow).
	fullGrace  time.Duration
	lossPolicy LossPolicy
	onMessage  func(Message)
	onGap      func(Gap)
	onEnd      func(StreamID, wire.Seq)
	onLoss     func(Loss)
	onResync   func(Resync)
	// onSuspect is told of each new suspect jump (beyond maxGap, not yet
	// confirmed): stream, next expected, the suspect's sequence. It runs
	// with the core's lock held.
	onSuspect func(id StreamID, next, seq wire.Seq)
}

// core is the stream state of a subscriber, independent of any socket.
// Every field below mu, and every stream, is guarded by mu; readers take
// it once per batch and call handleDatagram/handlePacket for each
// datagram. Callbacks run with mu held.
type core struct {
	cfg coreConfig

	mu        sync.Mutex
	streams   map[streamKey]*stream      // the current incarnation of each key
	bySession map[wire.Session]*stream   // the newest incarnation of each session: where its repairs go
	bySource  map[netip.AddrPort]*stream // the latest stream of each source
	// incarnations is the last incarnation number given to each session.
	incarnations map[wire.Session]uint32
	list         []*stream // the streams in order of creation (stable iteration)
	last         *stream   // one-entry lookup cache
	free         [][]byte  // reorder slot buffers not in use
	freeB        int       // their capacity in bytes, kept at most freeLimit
	st           Stats
	created      uint64 // streams created, for detector seeds

	// Recovery (see recovery.go).
	backoff *nak.GroupBackoff       // shared by the detectors (cfg.backoff); nil otherwise
	ask     asker                   // the retransmitter asked (failover.go)
	hist    *hdrhistogram.Histogram // every stream's recovery times, µs; nil until the first
	retired nak.Stats               // detector counters of forgotten streams
	reqTo   []netip.AddrPort        // with retrPort: poll's destination of each request
	nreqs   []nak.Range             // Poll scratch
	nlost   []nak.Range             // Poll scratch
	wake    chan struct{}           // capacity 1: a gap fell due before timerAt; nil without a timer
	timerAt monotime.Time           // when the timer goroutine will poll next
}

// arrival is the context of one datagram: when and from where it arrived,
// and on which socket. It travels by value down the handling of the
// datagram; nothing of it is kept on the core between datagrams.
type arrival struct {
	now    monotime.Time
	src    netip.AddrPort // its source address and port
	feed   Feed           // the socket it arrived on
	repair bool           // a repair (the unicast repair socket or the repair group)
}

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
	catchUp    wire.Seq
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
	buf      []byte        // the whole packet, re-parsed when delivered
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

func newCore(cfg coreConfig) *core {
	return &core{
		cfg:          cfg,
		streams:      make(map[streamKey]*stream, cfg.maxStreams),
		bySession:    make(map[wire.Session]*stream, cfg.maxStreams),
		bySource:     make(map[netip.AddrPort]*stream, cfg.maxStreams),
		incarnations: make(map[wire.Session]uint32, cfg.maxStreams),
		timerAt:      maxTime,
		ask:          cfg.asker,
		backoff:      newBackoff(cfg),
	}
}

func newBackoff(cfg coreConfig) *nak.GroupBackoff {
	if !cfg.backoff {
		return nil
	}
	return nak.NewGroupBackoff(cfg.nak.Seed)
}

// drop counts a dropped datagram. c.mu must be held.
func (c *core) drop(r DropReason) {
	c.st.Dropped++
	c.st.Drops[r]++
}

// handleDatagram decodes one datagram that arrived as a and handles it. b
// is only read during the call. c.mu must be held.
func (c *core) handleDatagram(a arrival, b []byte) {
	p, err := wire.ParsePacket(b)
	if err != nil {
		c.drop(dropReasonOf(err))
		return
	}
	c.handlePacket(a, p)
}

// handlePacket handles one decoded packet that arrived as a: it finds or starts its
// stream, delivers what became in order, holds what is early, reports new
// gaps and drops the rest with a reason. The packet's bytes are only read
// during the call (held packets are copied). A repair packet (a.repair)
// goes to the newest incarnation of its session, never starts a stream
// and never moves one beyond MaxGap. With A/B feeds streams are keyed by
// session alone. c.mu must be held.
func (c *core) handlePacket(a arrival, p wire.Packet) {
	c.st.Packets++
	h := p.Header
	if h.IsHeartbeat() {
		c.st.Heartbeats++
	}
	if h.Seq == wire.InvalidSeq { // ParsePacket lets 0 through on heartbeats and ends
		c.drop(DropZeroSeq)
		return
	}
	var s *stream
	if a.repair {
		// Its source is trusted to repair this stream (reader.trusted).
		if s = c.bySession[h.Session]; s == nil {
			c.drop(DropUnknownRepair)
			return
		}
	} else {
		key := streamKey{source: a.src, session: h.Session}
		if c.cfg.ab {
			key.source = netip.AddrPort{}
		}
		if s = c.lookup(key, h.Seq, a.now); s == nil {
			return
		}
		if !h.IsEndOfSession() && c.restarted(s, p, a) {
			s = c.incarnate(s, p, a)
		}
		if !s.current {
			if cur := c.bySession[h.Session]; cur == nil || c.quiet(cur, a.now) {
				if cur != nil {
					c.replace(cur)
				}
				c.makeCurrent(s, a.now)
			}
		}
	}
	s.lastActive = a.now
	if s.stopped {
		c.drop(DropStopped)
		return
	}
	if a.repair && a.feed == FeedRepairGroup && c.backoff != nil && h.Count > 0 && h.Seq < s.horizon {
		// A repair on the group for a range this subscriber has seen
		// past (one beyond its horizon may be a loss it has not found
		// yet): did it fill a loss of ours? The share that do tells
		// shared losses from independent ones (nak.GroupBackoff).
		c.backoff.ObserveRepair(s.nak != nil && s.nak.Overlaps(nak.Range{From: h.Seq, To: h.Seq + wire.Seq(h.Count)}))
	}
	c.handleIn(s, p, a)
}

// handleIn hands p, which arrived as a, to stream s by kind.
func (c *core) handleIn(s *stream, p wire.Packet, a arrival) {
	h := p.Header
	if !a.repair {
		f := &s.feedNext[a.feed]
		*f = max(*f, p.Next())
		if n := uint64(p.Count); n > 0 && !h.IsEndOfSession() {
			s.msgBytes += uint64(p.Len()-wire.HeaderLen) - n*wire.MsgLenLen
			s.msgs += n
			if s.msgs > msgWindow {
				s.msgBytes, s.msgs = s.msgBytes/2, s.msgs/2
			}
		}
	}
	switch {
	case h.IsHeartbeat():
		c.heartbeat(s, h.Seq, p, a)
	case h.IsEndOfSession():
		c.endOfSession(s, h.Seq, a.now)
	default:
		c.data(s, p, a)
	}
}

// lookup returns the current incarnation of key, starting a stream when
// there is none and the packet may start one (seq is its first sequence),
// or nil after counting the drop.
func (c *core) lookup(key streamKey, seq wire.Seq, now monotime.Time) *stream {
	if s := c.last; s != nil && s.key == key {
		return s
	}
	if s, ok := c.streams[key]; ok {
		c.last = s
		return s
	}
	first := c.cfg.startSeq
	if first == wire.InvalidSeq {
		first = seq // join live: the first packet seen starts the stream
	} else if seq > first && uint64(seq-first) > c.cfg.maxGap {
		c.drop(DropSeqJump)
		return nil
	}
	if !c.makeRoom(key.source.Addr(), now) {
		c.drop(DropTooManyStreams)
		return nil
	}
	return c.start(key, first, c.bySession[key.session], false, now)
}

// makeCurrent makes s the current incarnation of its session at now: the
// one that asks for repairs and receives them.
func (c *core) makeCurrent(s *stream, now monotime.Time) {
	c.bySession[s.key.session] = s
	if !s.current && s.nak != nil {
		// It could not ask while it waited: its gaps' deadlines count
		// from now, not from when they were found, and it asks for all
		// of them at once (see overflow).
		s.catchUp = s.horizon
		s.nak.Rearm(now)
		c.rearm(s.nak)
	}
	s.current = true
}

// waiting reports whether s is a new incarnation waiting for its
// session's current one to go quiet: it will ask for its gaps once it
// takes its place.
func (c *core) waiting(s *stream) bool { return !s.current && !s.replaced }

// replaceQuiet is how long the current incarnation of a session must have
// been silent (nothing from its own source) before a new source of the
// session takes its place: a live publisher is heard at least every
// heartbeat interval (publisher.DefaultHeartbeatInterval, 1 s), so a
// stream silent that long is taken for gone. Until then the new source's
// stream delivers its own packets but asks for nothing and takes no
// repairs, so one packet from anyone cannot steal a live stream's repairs.
const replaceQuiet = time.Second

// quiet reports whether s, the current incarnation of its session, may be
// replaced by a new source of the session at now.
func (c *core) quiet(s *stream, now monotime.Time) bool {
	return s.ended || s.stopped || now.Sub(s.lastActive) >= replaceQuiet
}

// start begins a stream of key at first, at now. prev, when not nil, is the
// session's current incarnation: the new stream is the next incarnation,
// and replaces prev when force is set (a restart its own source
// confirmed) or prev is quiet; otherwise prev stays the session's current
// incarnation until it is.
func (c *core) start(key streamKey, first wire.Seq, prev *stream, force bool, now monotime.Time) *stream {
	id := StreamID{Source: key.source, Session: key.session, Incarnation: 1}
	current := true
	if prev != nil {
		id.Incarnation = c.incarnations[key.session] + 1
		if force || c.quiet(prev, now) {
			c.replace(prev)
		} else {
			current = false
		}
	}
	c.incarnations[key.session] = id.Incarnation
	if old := c.bySource[key.source]; old != nil && !c.cfg.ab && old.key.session != key.session {
		// A/B: the source is unknown, so nothing is superseded.
		old.superseded = true
		c.st.SessionChanges++
	}
	s := &stream{id: id, key: key, index: c.created, next: first, horizon: first, end: wire.InvalidSeq, lastActive: now}
	c.created++
	c.streams[key] = s
	if current {
		c.makeCurrent(s, now)
	}
	c.bySource[key.source] = s
	c.list = append(c.list, s)
	c.last = s
	return s
}

// replace retires s, the incarnation of its session a newer one replaces:
// what it was still recovering is given up and reported lost (its repairs
// could no longer be told from the new incarnation's) and what it held is
// delivered in order. Packets of its own source still reach it; it asks
// for nothing more.
func (c *core) replace(s *stream) {
	c.st.Incarnations++
	if c.bySession[s.key.session] == s {
		delete(c.bySession, s.key.session)
	}
	s.current = false
	if !s.ended && !s.stopped {
		if s.nak != nil {
			c.nlost = s.nak.GiveUp(c.nlost[:0])
			for _, r := range c.nlost {
				addLost(s, r)
			}
		}
		c.advance(s)
		if len(s.held) > 0 && !s.stopped { // held beyond a gap nobody reported (cannot happen) or after a loss
			addLost(s, nak.Range{From: s.next, To: s.held[0].seq})
			c.advance(s)
		}
	}
	s.replaced = true
	c.clearSuspect(&s.jump)
	c.clearSuspect(&s.restart)
}

// restarted checks p, a packet or heartbeat of s's own source, for a
// restart of the session by its publisher: p goes back before what this
// source already sent, in a way reordering does not explain (to the
// session's first sequence, in a heartbeat, or more than
// wire.RestartDistance back: wire.StreamPos.Fit, the rule every role
// applies). The first such packet is handled as
// usual (a duplicate, mostly) and a copy kept as a suspect; a second one
// of the same source that continues it confirms the restart, and the
// suspect is delivered again, in the new incarnation. A packet that fits
// the stream clears the suspect.
func (c *core) restarted(s *stream, p wire.Packet, a arrival) bool {
	seq := p.Seq
	fn := s.feedNext[a.feed]
	if fn == 0 {
		return false
	}
	sus := &s.restart
	mine := sus.set && sus.src == a.src && sus.feed == a.feed
	fit := wire.StreamPos{High: fn, Next: s.next, Ended: s.ended}.Fit(p.Header)
	back := fit == wire.Repeats || fit == wire.Restarts
	if mine && back && seq >= sus.next && uint64(seq-sus.next) <= c.cfg.maxGap &&
		(seq > sus.seq || p.IsHeartbeat() != sus.heartbeat) {
		return true
	}
	if !back {
		if mine {
			c.clearSuspect(sus)
		}
		return false
	}
	if fit != wire.Restarts {
		return false // an ordinary duplicate
	}
	if mine && seq == sus.seq && p.IsHeartbeat() == sus.heartbeat {
		return false // the suspect again
	}
	c.clearSuspect(sus)
	c.keepSuspect(sus, p, a)
	c.st.SuspectRestarts++
	return false
}

// incarnate starts the new incarnation of s's session that a confirmed
// restart began, from the suspect packet, which it delivers (or holds)
// first, and returns it. p, which arrived as a, confirmed the restart.
func (c *core) incarnate(s *stream, p wire.Packet, a arrival) *stream {
	sus := s.restart
	s.restart = suspect{}
	first := c.cfg.startSeq
	if first == wire.InvalidSeq {
		first = min(sus.seq, p.Seq)
	}
	n := c.start(s.key, first, s, true, a.now)
	if sus.buf != nil {
		if q, err := wire.ParsePacket(sus.buf); err == nil { // always: it was valid when copied
			c.handleIn(n, q, a)
		}
		c.recycleBuf(sus.buf)
	}
	return n
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

// makeRoom makes room for one more stream from addr: it forgets the
// streams silent longer than the idle timeout, then, when addr already
// has the most streams one source may have or the table is full, the
// least recently active stream that is done (ended, stopped, superseded or
// replaced), failing that one that has delivered nothing yet (a heartbeat
// or a forged packet starts such a stream), failing that one quiet for
// replaceQuiet (a publisher that crashed; a live one heartbeats). Live
// streams that delivered are never forgotten for room. It reports whether
// there is room.
func (c *core) makeRoom(addr netip.Addr, now monotime.Time) bool {
	if c.cfg.idle > 0 {
		for i := 0; i < len(c.list); {
			if s := c.list[i]; now.Sub(s.lastActive) > c.cfg.idle {
				c.forget(s)
				c.st.StreamsExpired++
				continue
			}
			i++
		}
	}
	if c.cfg.perSource > 0 {
		n := 0
		for _, s := range c.list {
			if s.key.source.Addr() == addr {
				n++
			}
		}
		if n >= c.cfg.perSource && !c.evict(func(s *stream) bool { return s.key.source.Addr() == addr }, now) {
			return false
		}
	}
	return len(c.list) < c.cfg.maxStreams || c.evict(nil, now)
}

// evict forgets the least recently active stream among those of which
// (nil: all) that is done, or else has delivered nothing, or else is
// quiet at now, and reports whether there was one.
func (c *core) evict(of func(*stream) bool, now monotime.Time) bool {
	var done, empty, quiet *stream
	older := func(a, b *stream) *stream {
		if a == nil || b.lastActive < a.lastActive {
			return b
		}
		return a
	}
	for _, s := range c.list {
		if of != nil && !of(s) {
			continue
		}
		switch {
		case s.ended || s.stopped || s.superseded || s.replaced:
			done = older(done, s)
		case s.delivered == 0:
			empty = older(empty, s)
		case now.Sub(s.lastActive) >= replaceQuiet:
			quiet = older(quiet, s)
		}
	}
	victim := cmp.Or(done, empty, quiet)
	if victim == nil {
		return false
	}
	c.forget(victim)
	c.st.StreamsEvicted++
	return true
}

// forget drops s from the table. What it was still recovering is
// abandoned unreported.
func (c *core) forget(s *stream) {
	c.retire(s)
	c.list = slices.DeleteFunc(c.list, func(x *stream) bool { return x == s })
	c.release(s, 0)
	c.clearSuspect(&s.jump)
	c.clearSuspect(&s.restart)
	if c.streams[s.key] == s {
		delete(c.streams, s.key)
	}
	if c.bySession[s.key.session] == s {
		delete(c.bySession, s.key.session)
	}
	s.current = false
	if c.bySource[s.key.source] == s {
		delete(c.bySource, s.key.source)
	}
	if !slices.ContainsFunc(c.list, func(x *stream) bool { return x.key.session == s.key.session }) {
		delete(c.incarnations, s.key.session)
	}
	if c.last == s {
		c.last = nil
	}
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

// data handles a packet that carries messages, which arrived as a. Two
// outcomes of placing it leave the stream ready for it only afterwards: a
// confirmed jump (the stream resynced, and p is within MaxGap of next)
// and a full reorder buffer that gave up its oldest gap (there is room
// now, or p is in order). p is then placed again. Each of them moves next
// forward, and a second jump finds no suspect to confirm, so the loop
// ends.
func (c *core) data(s *stream, p wire.Packet, a arrival) {
	for c.place(s, p, a) {
	}
}

// place delivers, holds or drops p once, and reports whether it must be
// placed again (see data).
func (c *core) place(s *stream, p wire.Packet, a arrival) (again bool) {
	seq, end := p.Seq, p.Next()
	switch {
	case end <= s.next: // everything delivered already (or before StartSeq)
		s.dups += uint64(p.Count)
		c.st.Duplicates += uint64(p.Count)
		c.drop(DropDuplicate)
		return false
	case s.pastEnd(end):
		c.drop(DropAfterEnd)
		return false
	case seq > s.next && uint64(seq-s.next) > c.cfg.maxGap:
		return c.jumped(s, p, a) // resynced: within reach now
	case seq <= s.next:
		c.inOrder(s, p, a)
		return false
	}
	// Ahead of next: hold it, report what is newly missing before it.
	gapEnd := seq
	switch c.hold(s, p, a) {
	case holdDuplicate:
		s.dups += uint64(p.Count)
		c.st.Duplicates += uint64(p.Count)
		c.drop(DropDuplicate)
		return false
	case holdFull:
		if c.overflow(s, a.now) {
			return true // there is room now, or p is in order
		}
		c.drop(DropReorderFull)
		gapEnd = end // its messages are missing too
	default:
		c.received(s, seq, end, a)
	}
	c.reportGap(s, gapEnd, a.now)
	s.horizon = max(s.horizon, end)
	return false
}

// inOrder delivers p, which arrived as a and starts at or before s.next,
// then the held packets and losses it brought into order.
func (c *core) inOrder(s *stream, p wire.Packet, a arrival) {
	c.received(s, s.next, p.Next(), a)
	c.deliver(s, p, a.feed)
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
		s.nak.OnReceived(now, r) // stop asking for it
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
			on(Message{Stream: s.id, Seq: seq, Data: msg, PacketStart: n == 0})
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

// hold copies p, which starts after s.next and arrived as a, into s's
// reorder buffer in sequence order.
func (c *core) hold(s *stream, p wire.Packet, a arrival) holdResult {
	seq, end := p.Seq, p.Next()
	i, _ := slices.BinarySearchFunc(s.held, seq, func(h heldPacket, seq wire.Seq) int { return cmp.Compare(h.seq, seq) })
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

// stats returns the counters. c.mu must be held.
func (c *core) stats() Stats {
	st := c.st
	st.Streams = len(c.list)
	st.Suppressed = c.retired.Suppressed
	st.Confirmed = c.retired.Confirmed
	st.Retries = c.retired.Retries
	for _, s := range c.list {
		if s.nak != nil {
			ns := s.nak.Stats()
			st.Suppressed += ns.Suppressed
			st.Confirmed += ns.Confirmed
			st.Retries += ns.Retries
		}
	}
	if c.backoff != nil {
		st.GroupSize, st.RepairRTT = c.backoff.Group(), c.backoff.RTT()
		st.SharedLoss, st.Backoff = c.backoff.Shared(), c.backoff.Window()
	}
	st.RecoveryP50, st.RecoveryP99, st.RecoveryMax = percentiles(c.hist)
	if len(c.ask.addrs) > 0 {
		st.Asking = c.ask.addrs[c.ask.cur]
	}
	st.Failovers = c.ask.switches
	return st
}

// streamStats returns every stream's state, by source then session.
// c.mu must be held.
func (c *core) streamStats() []StreamStats {
	out := make([]StreamStats, 0, len(c.list))
	for _, s := range c.list {
		ss := StreamStats{
			ID: s.id, Next: s.next, Horizon: s.horizon, End: s.end,
			Delivered: s.delivered, Bytes: s.bytes, Duplicates: s.dups,
			Gaps: s.gaps, GapMessages: s.gapMsgs,
			Held: len(s.held), HeldMax: s.heldMax,
			Ended: s.ended, Superseded: s.superseded, Replaced: s.replaced, Stopped: s.stopped,
			Resyncs: s.resyncs,
			NAKs:    s.naks, NAKMessages: s.nakMsgs, Repairs: s.repairs, Recovered: s.recovered,
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
		if c := bytes.Compare(a.ID.Session[:], b.ID.Session[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.ID.Incarnation, b.ID.Incarnation)
	})
	return out
}
