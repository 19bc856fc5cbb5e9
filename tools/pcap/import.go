package pcap

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net/netip"
	"slices"

	"github.com/mdbus/mdbus/internal/cfgcheck"
	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/wire"
)

// GapPolicy says what an import does when a stream's sequences jump
// (messages the capture missed): the journal holds only contiguous
// sequences per incarnation.
type GapPolicy uint8

// Gap policies.
const (
	// GapSplit (the default) ends the incarnation before the gap and
	// journals what follows as a new incarnation of the same (session,
	// source), so nothing captured is lost and no incarnation has a hole.
	// Every gap is reported in ImportStats.Gaps.
	GapSplit GapPolicy = iota
	// GapFail stops the import at the first gap with ErrGap; what came
	// before it stays journaled.
	GapFail
)

// DefaultMaxStreams is ImportConfig.MaxStreams when zero. Creating an
// incarnation costs the journal three fsyncs (about 6 ms on a virtual
// disk) and about 100 KB of index held until the journal is closed, so
// 1,000 keeps an import of any capture within about 10 s and 150 MB.
const DefaultMaxStreams = 1_000

// ErrGap matches the error of an import under GapFail that met a gap.
var ErrGap = errors.New("pcap: the capture misses messages of a stream")

// ImportConfig tunes an Importer. The zero value is the default; zero and
// negative values follow Config's rule.
type ImportConfig struct {
	// Gaps is the gap policy; default GapSplit.
	Gaps GapPolicy
	// MaxOpen bounds the journal writers held open at once (one per
	// stream being imported); beyond it the least recently used is closed
	// and resumed when its stream sends again. Default 32: an open writer
	// holds a few hundred KiB of buffers, a closed one none.
	MaxOpen int
	// MaxStreams bounds the journal incarnations one import creates (each
	// costs the journal a directory, a file and its in-memory index until
	// it is closed). Data that would need one more is refused and counted
	// in ImportStats.RefusedStreams and Refused. Default
	// DefaultMaxStreams; negative: none, no bound.
	MaxStreams int
	// MaxGaps bounds the gaps listed in ImportStats.Gaps (all are
	// counted in GapCount). Default 1000.
	MaxGaps int
	// Reorder is how many packets beyond a missing one a stream holds,
	// waiting for the missing one to arrive late (a capture's reordering),
	// before the hole counts as a gap. Default 64; negative: none held.
	Reorder int
	// ReorderBytes bounds the bytes held for reordering over all streams;
	// default 16 MiB.
	ReorderBytes int
}

// Check returns an error wrapping ErrConfig that names the first field
// of c holding a negative value that has no "none", or nil.
func (c ImportConfig) Check() error {
	return cfgcheck.Negative(ErrConfig, cfgcheck.F("MaxOpen", c.MaxOpen), cfgcheck.F("MaxGaps", c.MaxGaps),
		cfgcheck.F("ReorderBytes", c.ReorderBytes))
}

// withDefaults fills the zero fields; a negative one that Check refuses
// is taken as zero.
func (c ImportConfig) withDefaults() ImportConfig {
	if c.MaxOpen <= 0 {
		c.MaxOpen = 32
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	if c.MaxGaps <= 0 {
		c.MaxGaps = 1000
	}
	if c.Reorder == 0 {
		c.Reorder = 64
	}
	if c.ReorderBytes <= 0 {
		c.ReorderBytes = 16 << 20
	}
	return c
}

// Gap is a range of messages a stream's capture lacks.
type Gap struct {
	Session wire.Session
	Source  netip.AddrPort
	// From and To are the missing messages [From, To).
	From, To wire.Seq
	// File and Frame locate the packet that revealed it.
	File  string
	Frame uint64
}

func (g Gap) String() string {
	return fmt.Sprintf("%s from %s: messages %d..%d missing (%d), seen at %s packet %d",
		g.Session, g.Source, g.From, g.To-1, g.To-g.From, g.File, g.Frame)
}

// StreamSummary describes what one import did to one journal incarnation.
type StreamSummary struct {
	ID wire.StreamID
	// Created is true when the import started the incarnation, false when
	// it continued or matched one already in the journal.
	Created bool
	// First and Next bound the captured messages matched to it: [First, Next).
	First, Next wire.Seq
	// Appended counts messages written; Held counts messages the journal
	// already had (skipped).
	Appended, Held uint64
	// Ended is set when the capture's end of session was journaled.
	Ended bool
}

// ImportStats counts what an Importer did.
type ImportStats struct {
	Packets    uint64 // MoldUDP64 datagrams handled
	Heartbeats uint64
	Ends       uint64 // end-of-session packets
	Appended   uint64 // messages written to the journal
	Held       uint64 // messages skipped: the journal already held them
	Duplicates uint64 // messages skipped: repeated in the capture
	Late       uint64 // messages skipped: captured after a later packet had split the stream at a gap
	// RefusedStreams counts the incarnations not created because the
	// import had created MaxStreams; Refused counts their messages.
	RefusedStreams uint64
	Refused        uint64
	Orphans        uint64 // heartbeats and ends of session of streams with no data yet, ignored
	Streams        []StreamSummary
	GapCount       uint64
	Gaps           []Gap // the first MaxGaps
}

type streamKey struct {
	src     netip.AddrPort
	session wire.Session
}

// istream is the import state of one (source, session) of the capture.
type istream struct {
	key      streamKey
	id       wire.StreamID
	w        *journal.Writer // nil while closed (MaxOpen) or ended
	next     wire.Seq        // next expected sequence
	heldNext wire.Seq        // messages below it were in the journal before
	jEnded   bool            // the journal incarnation has ended: nothing more goes in
	done     bool            // the capture ended this stream (end of session)
	broken   bool            // a gap was seen: the next data starts anew
	pend     []held          // packets beyond next, by sequence (Reorder)
	sum      int             // index in stats.Streams; -1 when refused
	used     uint64          // LRU clock
	refused  bool            // over MaxStreams: this incarnation's data is counted, not journaled
	// high is one past the highest sequence the capture's packets of
	// this stream carried or announced (held ones included).
	high wire.Seq
	// first is a hash of the packet that began the incarnation at
	// sequence 1 (has1): an identical packet later is a copy (a SPAN port,
	// a second tap), not a restart.
	first uint64
	has1  bool
}

// pos is how far st has got, for the incarnation rule.
func (st *istream) pos() wire.StreamPos {
	return wire.StreamPos{High: max(st.high, st.next), Next: st.next, Ended: st.done}
}

// Importer journals the MoldUDP64 streams of captures: each (source,
// session) becomes a journal stream, a sequence restart a new incarnation,
// messages the journal already holds are skipped (so importing a capture
// twice adds nothing), and gaps follow the GapPolicy.
//
// An Importer is not safe for concurrent use. Call Close when done.
type Importer struct {
	j       *journal.Journal
	cfg     ImportConfig
	streams map[streamKey]*istream
	used    map[wire.StreamID]bool // incarnations a capture stream of this import went to
	// prior holds the journal's incarnations from before the import, by
	// (source, session), oldest first: only those can be continued or
	// matched (every one the import creates is used), and looking them
	// up must not cost a scan of the whole journal per new stream.
	prior     map[streamKey][]journal.StreamInfo
	made      map[streamKey]bool // keys the import created an incarnation of
	created   int                // incarnations created (MaxStreams)
	open      []*istream         // streams with an open writer (at most MaxOpen)
	seed      maphash.Seed
	free      [][]byte // recycled buffers of held packets
	pendBytes int
	clock     uint64
	stats     ImportStats
	file      string
}

// NewImporter returns an Importer writing to j. It cannot fail: check
// cfg with ImportConfig.Check first.
func NewImporter(j *journal.Journal, cfg ImportConfig) *Importer {
	im := &Importer{j: j, cfg: cfg.withDefaults(), streams: make(map[streamKey]*istream), used: make(map[wire.StreamID]bool),
		prior: make(map[streamKey][]journal.StreamInfo), made: make(map[streamKey]bool), seed: maphash.MakeSeed()}
	for _, in := range j.Streams() { // oldest first
		k := streamKey{src: in.ID.Source, session: in.ID.Session}
		im.prior[k] = append(im.prior[k], in)
	}
	return im
}

// Stats returns the counts so far.
func (im *Importer) Stats() ImportStats { return im.stats }

// ImportFile reads every event of r (named name in errors and gaps) into
// the journal. It returns the capture's read statistics.
func (im *Importer) ImportFile(r io.Reader, cfg Config) (Stats, error) {
	rd, err := NewReader(r, cfg)
	if err != nil {
		return Stats{}, err
	}
	im.file = rd.cfg.Name
	for {
		ev, err := rd.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return rd.Stats(), nil
			}
			return rd.Stats(), err
		}
		if err := im.Add(ev); err != nil {
			return rd.Stats(), fmt.Errorf("pcap: %s: packet %d: %w", im.file, ev.Frame, err)
		}
	}
}

// Add journals one event (as read by a Reader).
func (im *Importer) Add(ev Event) error {
	p, err := wire.ParsePacket(ev.Packet)
	if err != nil {
		return err // a Reader never hands one out
	}
	im.stats.Packets++
	key := streamKey{src: ev.Src, session: p.Session}
	st := im.streams[key]
	switch {
	case p.IsEndOfSession():
		im.stats.Ends++
		return im.end(st, p, ev)
	case p.IsHeartbeat():
		im.stats.Heartbeats++
		return im.heartbeat(st, p, ev)
	}
	fit := wire.Continues
	if st != nil {
		fit = st.pos().Fit(p.Header)
		st.high = max(st.high, p.Next())
	}
	var h1 uint64
	if p.Seq == 1 {
		h1 = maphash.Bytes(im.seed, ev.Packet)
		if fit == wire.Restarts && st.has1 && st.first == h1 {
			// The same bytes at the same sequence: a copy of the
			// packet that began the incarnation, not a restart.
			im.stats.Duplicates += uint64(p.Count)
			return nil
		}
	}
	if fit == wire.Restarts && !st.done {
		// The publisher restarted under the same session: a new
		// incarnation (a retransmission would come from the
		// retransmitter's address, not the feed's source). A capture
		// is trusted: one packet suffices.
		if err := im.closeStream(st); err != nil {
			return err
		}
		st = nil
	}
	if st != nil && !st.done && !st.broken && p.Seq > st.next {
		if im.cfg.Reorder > 0 {
			// Maybe only reordered: hold it until the missing packets
			// arrive or the window is full.
			return im.hold(st, p, ev)
		}
		if err := im.gap(st, st.next, p.Seq, ev); err != nil {
			return err
		}
		st.broken = true
	}
	if st != nil && st.done && fit == wire.Repeats && p.Next() <= st.next {
		// A repeat from before the end (a retransmission in the grace
		// period); sequence 1 again is a restart.
		im.stats.Duplicates += uint64(p.Count)
		return nil
	}
	if st == nil || st.done || st.broken {
		if st, err = im.start(key, p, ev.Time); err != nil {
			return err
		}
		if p.Seq == 1 {
			st.first, st.has1 = h1, true
		}
	}
	if err := im.data(st, p, ev); err != nil {
		return err
	}
	return im.drain(st)
}

// held is a packet beyond its stream's next sequence, kept for a while
// in case the packets before it arrive late (reordering).
type held struct {
	seq   wire.Seq
	time  int64
	frame uint64
	file  string
	pkt   []byte // a copy
}

// hold keeps p until the packets before it arrive; when the stream holds
// more than Reorder packets (or all streams more than ReorderBytes), the
// oldest hole is a gap.
func (im *Importer) hold(st *istream, p wire.Packet, ev Event) error {
	var buf []byte
	if n := len(im.free); n > 0 {
		buf, im.free = im.free[n-1][:0], im.free[:n-1]
	}
	h := held{seq: p.Seq, time: ev.Time, frame: ev.Frame, file: im.file, pkt: append(buf, ev.Packet...)}
	i := len(st.pend)
	for i > 0 && st.pend[i-1].seq > h.seq {
		i--
	}
	st.pend = append(st.pend, held{})
	copy(st.pend[i+1:], st.pend[i:])
	st.pend[i] = h
	im.pendBytes += len(h.pkt)
	if len(st.pend) > im.cfg.Reorder || im.pendBytes > im.cfg.ReorderBytes {
		return im.giveUp(st)
	}
	return nil
}

// drain journals the held packets of the stream of st that its next
// sequence has reached.
func (im *Importer) drain(st *istream) error {
	for len(st.pend) > 0 && st.pend[0].seq <= st.next {
		h := st.pend[0]
		st.pend = st.pend[1:]
		if err := im.replay(st, h); err != nil {
			return err
		}
		st = im.streams[st.key] // replay may have started a new incarnation
		if st == nil {
			return nil
		}
	}
	return nil
}

// replay journals a held packet and recycles its buffer.
func (im *Importer) replay(st *istream, h held) error {
	defer im.recycle(h)
	p, err := wire.ParsePacket(h.pkt)
	if err != nil {
		return err
	}
	if err := im.data(st, p, Event{Time: h.time, Src: st.key.src, Packet: h.pkt, Frame: h.frame}); err != nil {
		return fmt.Errorf("%s: packet %d (held for reordering): %w", h.file, h.frame, err)
	}
	return nil
}

func (im *Importer) recycle(h held) {
	im.pendBytes -= len(h.pkt)
	if len(im.free) < 64 {
		im.free = append(im.free, h.pkt)
	}
}

// giveUp declares the hole before st's oldest held packet a gap: under
// GapSplit the held packets continue in a new incarnation.
func (im *Importer) giveUp(st *istream) error {
	h := st.pend[0]
	file := im.file
	im.file = h.file
	err := im.gap(st, st.next, h.seq, Event{Frame: h.frame})
	im.file = file
	if err != nil {
		return err
	}
	pend := st.pend
	st.pend = nil
	p, err := wire.ParsePacket(h.pkt)
	if err != nil {
		return err
	}
	nst, err := im.start(st.key, p, h.time)
	if err != nil {
		return err
	}
	nst.pend = pend
	return im.drain(nst)
}

// flushPending gives up every hole of st (the capture ended, the stream
// restarted or ended) and returns the stream's current state.
func (im *Importer) flushPending(st *istream) (*istream, error) {
	for st != nil && len(st.pend) > 0 {
		if err := im.giveUp(st); err != nil {
			return st, err
		}
		st = im.streams[st.key]
	}
	return st, nil
}

// data journals the messages of p beyond what st has seen.
func (im *Importer) data(st *istream, p wire.Packet, ev Event) error {
	if st.refused {
		im.refuse(st, p)
		return nil
	}
	s := &im.stats.Streams[st.sum]
	from := p.Seq
	if from < st.next { // seen earlier in this import, or late
		to := min(p.Next(), st.next)
		if first := s.First; from < first {
			// Below the incarnation this stream continues in: the
			// capture saw them after a later packet split the stream.
			im.stats.Late += uint64(min(to, first) - from)
			from = min(to, first)
		}
		im.stats.Duplicates += uint64(to - from)
		from = st.next
	}
	if p.Next() <= from {
		return nil
	}
	if from < st.heldNext { // the journal had these before the import
		to := min(p.Next(), st.heldNext)
		s.Held += uint64(to - from)
		im.stats.Held += uint64(to - from)
		from, st.next, s.Next = to, to, to
		if p.Next() <= from {
			return nil
		}
	}
	if st.jEnded {
		// The journal's incarnation ended where the capture goes on:
		// what follows cannot join it.
		if err := im.release(st); err != nil {
			return err
		}
		if err := im.create(st, from); err != nil {
			return err
		}
		if st.refused {
			im.refuse(st, p)
			return nil
		}
		s = &im.stats.Streams[st.sum]
	}
	w, err := im.writer(st)
	if err != nil {
		return err
	}
	before := w.Next()
	if before != from {
		return fmt.Errorf("journal stream %s: next sequence %d, the capture is at %d", st.id, before, from)
	}
	// AppendPacket skips the messages below the writer's Next.
	if err := w.AppendPacket(ev.Packet, ev.Time); err != nil {
		return fmt.Errorf("journal stream %s: %w", st.id, err)
	}
	n := uint64(w.Next() - before)
	s.Appended += n
	im.stats.Appended += n
	st.next, s.Next = w.Next(), w.Next()
	return nil
}

// refuse counts the messages of p beyond st's next sequence as refused
// (st is over MaxStreams) and those before it as duplicates.
func (im *Importer) refuse(st *istream, p wire.Packet) {
	if p.Seq < st.next {
		im.stats.Duplicates += uint64(min(p.Next(), st.next) - p.Seq)
	}
	if from := max(p.Seq, st.next); p.Next() > from {
		im.stats.Refused += uint64(p.Next() - from)
		st.next = p.Next()
	}
}

// controlStream is the stream a heartbeat or end of session p speaks
// for. Packets held behind a hole that p shows will not be filled (the
// publisher went idle past it) are flushed first. Without a live stream
// p is counted as an orphan and the stream is nil.
func (im *Importer) controlStream(st *istream, p wire.Packet) (*istream, error) {
	if st != nil && len(st.pend) > 0 && p.Seq > st.next {
		var err error
		if st, err = im.flushPending(st); err != nil {
			return nil, err
		}
	}
	if st == nil || st.done {
		im.stats.Orphans++
		return nil, nil
	}
	return st, nil
}

func (im *Importer) heartbeat(st *istream, p wire.Packet, ev Event) error {
	st, err := im.controlStream(st, p)
	if st == nil {
		return err
	}
	fit := st.pos().Fit(p.Header)
	st.high = max(st.high, p.Next())
	if fit == wire.Restarts { // restarted
		return im.closeStream(st)
	}
	if p.Seq > st.next && !st.broken {
		if err := im.gap(st, st.next, p.Seq, ev); err != nil {
			return err
		}
		st.broken = true
	}
	return nil
}

func (im *Importer) end(st *istream, p wire.Packet, ev Event) error {
	st, err := im.controlStream(st, p)
	if st == nil {
		return err
	}
	if p.Seq > st.next {
		if !st.broken {
			if err := im.gap(st, st.next, p.Seq, ev); err != nil {
				return err
			}
		}
		st.broken = true
		return nil
	}
	if p.Seq < st.next || st.broken {
		return nil // an end that disagrees with the data: ignore it
	}
	st.done = true
	if st.refused {
		return nil
	}
	s := &im.stats.Streams[st.sum]
	if st.jEnded || st.heldNext > st.next {
		s.Ended = st.jEnded
		return im.release(st) // the journal has the end already (or more)
	}
	w, err := im.writer(st)
	if err != nil {
		return err
	}
	if err := w.End(p.Seq); err != nil {
		return fmt.Errorf("journal stream %s: end of session: %w", st.id, err)
	}
	st.jEnded, s.Ended = true, true
	return im.release(st)
}

func (im *Importer) gap(st *istream, from, to wire.Seq, ev Event) error {
	g := Gap{Session: st.key.session, Source: st.key.src, From: from, To: to, File: im.file, Frame: ev.Frame}
	if im.cfg.Gaps == GapFail {
		return fmt.Errorf("%w: %s; the journal keeps each incarnation contiguous: import with the split policy (--gaps split) to journal each side as its own incarnation", ErrGap, g)
	}
	im.stats.GapCount++
	if len(im.stats.Gaps) < im.cfg.MaxGaps {
		im.stats.Gaps = append(im.stats.Gaps, g)
	}
	return nil
}

// start begins (or finds in the journal) the incarnation that takes
// data packet p of a stream seen anew.
func (im *Importer) start(key streamKey, p wire.Packet, ts int64) (*istream, error) {
	if old := im.streams[key]; old != nil {
		if err := im.closeStream(old); err != nil {
			return nil, err
		}
	}
	st := &istream{key: key, next: p.Seq}
	im.streams[key] = st
	it := p.Messages()
	msg, _, _ := it.Next()
	id, info, found, err := im.match(key, p.Seq, msg, ts)
	if err != nil {
		return nil, err
	}
	if !found {
		return st, im.create(st, p.Seq)
	}
	st.id, st.heldNext, st.jEnded = id, info.Next, info.Ended
	im.used[id] = true
	st.sum = len(im.stats.Streams)
	im.stats.Streams = append(im.stats.Streams, StreamSummary{ID: id, First: p.Seq, Next: p.Seq})
	im.touch(st)
	return st, nil
}

// create starts a new journal incarnation for st at sequence first.
// Beyond MaxStreams it marks st refused instead.
func (im *Importer) create(st *istream, first wire.Seq) error {
	if im.cfg.MaxStreams > 0 && im.created >= im.cfg.MaxStreams {
		st.refused, st.sum, st.next, st.heldNext = true, -1, first, first
		im.stats.RefusedStreams++
		return nil
	}
	// Room first: the writer about to open counts against MaxOpen.
	if err := im.limitOpen(im.cfg.MaxOpen - 1); err != nil {
		return err
	}
	w, err := im.j.Create(st.key.session, st.key.src, first)
	if err != nil {
		return err
	}
	im.created++
	im.made[st.key] = true
	st.id, st.w, st.heldNext, st.jEnded = w.ID(), w, first, false
	im.used[w.ID()] = true
	st.sum = len(im.stats.Streams)
	im.stats.Streams = append(im.stats.Streams, StreamSummary{ID: w.ID(), Created: true, First: first, Next: first})
	im.open = append(im.open, st)
	im.touch(st)
	return nil
}

// match looks for an incarnation of (session, source) in the journal that
// this capture stream continues: one holding message seq with the same
// bytes (the capture was imported before; the oldest not yet taken by
// this import, preferring one whose record also has the captured time),
// or the newest, when its next sequence is seq and it has not ended (the
// capture continues an earlier one).
func (im *Importer) match(key streamKey, seq wire.Seq, msg []byte, ts int64) (wire.StreamID, journal.StreamInfo, bool, error) {
	infos := im.prior[key] // oldest first
	var (
		found  journal.StreamInfo
		ok     bool
		timeOK bool
	)
	for _, in := range infos {
		if in.First > seq || seq >= in.Next || im.used[in.ID] {
			continue // another stream, not holding seq, or taken by an earlier part of this capture
		}
		same, sameTime, err := im.holds(in.ID, seq, msg, ts)
		if err != nil {
			return wire.StreamID{}, journal.StreamInfo{}, false, err
		}
		if same && (!ok || sameTime && !timeOK) {
			found, ok, timeOK = in, true, sameTime
		}
		if timeOK {
			break
		}
	}
	if ok {
		return found.ID, found, true, nil
	}
	// The newest incarnation, unless this import made a newer one.
	if n := len(infos); n > 0 && !im.made[key] {
		if in := infos[n-1]; !im.used[in.ID] && in.Next == seq && !in.Ended && in.Next > in.First {
			return in.ID, in, true, nil
		}
	}
	return wire.StreamID{}, journal.StreamInfo{}, false, nil
}

// holds reports whether stream id's record seq is msg, and whether it
// also has time ts.
func (im *Importer) holds(id wire.StreamID, seq wire.Seq, msg []byte, ts int64) (same, sameTime bool, err error) {
	r, err := im.j.OpenReader(id)
	if err != nil {
		return false, false, err
	}
	defer r.Close()
	if err := r.SeekSeq(seq); err != nil {
		return false, false, fmt.Errorf("journal stream %s: seek %d: %w", id, seq, err)
	}
	rec, err := r.Next()
	if err != nil {
		return false, false, fmt.Errorf("journal stream %s: read %d: %w", id, seq, err)
	}
	same = rec.Seq == seq && bytes.Equal(rec.Data, msg)
	return same, same && rec.Time == ts, nil
}

// writer returns st's writer, resuming the incarnation if it was closed.
func (im *Importer) writer(st *istream) (*journal.Writer, error) {
	im.touch(st)
	if st.w != nil {
		return st.w, nil
	}
	if err := im.limitOpen(im.cfg.MaxOpen - 1); err != nil {
		return nil, err
	}
	w, err := im.j.Resume(st.id)
	if err != nil {
		return nil, err
	}
	st.w = w
	im.open = append(im.open, st)
	return w, nil
}

func (im *Importer) touch(st *istream) {
	im.clock++
	st.used = im.clock
}

// limitOpen closes the least recently used writers until at most n are
// open.
func (im *Importer) limitOpen(n int) error {
	for len(im.open) > max(n, 0) {
		lru := im.open[0]
		for _, st := range im.open[1:] {
			if st.used < lru.used {
				lru = st
			}
		}
		if err := im.release(lru); err != nil {
			return err
		}
	}
	return nil
}

// release closes st's writer, if open.
func (im *Importer) release(st *istream) error {
	if st.w == nil {
		return nil
	}
	w := st.w
	st.w = nil
	if i := slices.Index(im.open, st); i >= 0 {
		im.open = slices.Delete(im.open, i, i+1)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("journal stream %s: close: %w", st.id, err)
	}
	return nil
}

// closeStream ends the import of st (a restart or a new start follows),
// first journaling or giving up what it held for reordering.
func (im *Importer) closeStream(st *istream) error {
	if len(st.pend) > 0 {
		var err error
		if st, err = im.flushPending(st); err != nil {
			return err
		}
	}
	delete(im.streams, st.key)
	return im.release(st)
}

// Close journals what was held for reordering (each hole a gap) and
// closes every writer the Importer opened, syncing them.
func (im *Importer) Close() error {
	var first error
	var keys []streamKey
	for k, st := range im.streams {
		if len(st.pend) > 0 {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		if _, err := im.flushPending(im.streams[k]); err != nil && first == nil {
			first = err
		}
	}
	for _, st := range im.streams {
		if err := im.release(st); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// FirstTime returns the capture time of the first MoldUDP64 packet of r,
// ok false when r holds none. Importing several captures in the order of
// their first packets keeps each stream's packets in capture order when
// the captures follow one another in time (rotated files); captures that
// overlap in time still interleave, and the import counts what that made
// late (ImportStats.Late).
func FirstTime(r io.Reader, cfg Config) (ts int64, ok bool, err error) {
	rd, err := NewReader(r, cfg)
	if err != nil {
		return 0, false, err
	}
	ev, err := rd.Next()
	if errors.Is(err, io.EOF) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return ev.Time, true, nil
}
