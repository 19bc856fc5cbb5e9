package subscriber

import (
	"cmp"
	"net/netip"
	"slices"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/wire"
)

// streamKey is what a packet names of its stream: the source (zero with
// A/B feeds) and the session. Its current incarnation is the stream.
type streamKey struct {
	source  netip.AddrPort
	session wire.Session
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

// restartGrace is how long a new incarnation that takes its
// predecessor's place at once (the predecessor ended or went quiet, or
// its own source restarted) waits before it asks for anything. A
// re-request names only the session, so a rewinder answers it from the
// incarnation it holds: one that has not yet seen the restart on its own
// copy of the feed would answer with the previous run's bytes. The grace
// gives it time to see the new incarnation's first packets (and drop the
// old run) first; gaps found meanwhile are asked for when it ends.
const restartGrace = 50 * time.Millisecond

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
	// A session seen before gets the next number, also when its last
	// stream was forgotten (see forget): a StreamID is never reused.
	id := StreamID{Source: key.source, Session: key.session, Incarnation: c.incarnations[key.session] + 1}
	current, graced := true, false
	var askFrom monotime.Time
	if prev != nil {
		if force || c.quiet(prev, now) {
			c.replace(prev)
			askFrom, graced = now.Add(restartGrace), true
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
	s := &stream{id: id, key: key, index: c.created, next: first, horizon: first, end: wire.InvalidSeq, lastActive: now, askFrom: askFrom, graced: graced}
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
	// The session's incarnation number is kept after its last stream is
	// forgotten: should the session come back (a superseded session's
	// late packets, an evicted stream's source), its new stream gets the
	// next number instead of reusing the forgotten one's StreamID, under
	// which the application has seen those sequences already. Kept for
	// the sessions forgotten last only (incarnationMemory of them), so
	// that a sender cycling through sessions costs bounded memory.
	if !slices.ContainsFunc(c.list, func(x *stream) bool { return x.key.session == s.key.session }) {
		c.rememberForgotten(s.key.session)
	}
	if c.last == s {
		c.last = nil
	}
}

// incarnationMemory is how many forgotten sessions keep their incarnation
// numbers: 16 per stream slot, at least 1024.
func incarnationMemory(maxStreams int) int { return max(16*maxStreams, 1024) }

// forgottenNum is a session whose last stream was forgotten, and the
// incarnation number it had then.
type forgottenNum struct {
	session wire.Session
	n       uint32
}

// rememberForgotten queues session, whose last stream was just forgotten,
// and drops the number of the session forgotten longest ago once more
// than incarnationMemory are queued, unless that session has come back
// since (its number moved on). So c.incarnations holds the live sessions
// and at most incarnationMemory forgotten ones.
func (c *core) rememberForgotten(session wire.Session) {
	c.forgotten = append(c.forgotten, forgottenNum{session, c.incarnations[session]})
	if len(c.forgotten)-c.forgottenHead <= incarnationMemory(c.cfg.maxStreams) {
		return
	}
	old := c.forgotten[c.forgottenHead]
	c.forgotten[c.forgottenHead] = forgottenNum{}
	c.forgottenHead++
	if n, ok := c.incarnations[old.session]; ok && n == old.n {
		delete(c.incarnations, old.session)
	}
	if c.forgottenHead >= len(c.forgotten)/2 { // amortised O(1) per forget
		c.forgotten = slices.Delete(c.forgotten, 0, c.forgottenHead)
		c.forgottenHead = 0
	}
}
