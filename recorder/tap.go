package recorder

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/resume"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
)

// tap journals what a subscriber delivers: one journal incarnation per
// subscriber incarnation (wire.StreamID: the subscriber has applied the
// incarnation rule, wire.StreamPos.Fit, so a restart or an end of session
// followed by data arrives under a new ID), split again where the stream
// continues at another sequence than the journal's next (a range declared
// lost or skipped: a journal incarnation holds no holes) and after an end
// of session. Its methods are called from the subscriber's callbacks
// (serialized by the subscriber) and from Close and stats readers, hence
// the mutex.
type tap struct {
	j         *journal.Journal
	log       *slog.Logger
	now       func() int64     // receive time, ns since the Unix epoch
	upstreams []netip.AddrPort // fill the range between a resumed incarnation and the live feed, in turn

	mu      sync.Mutex
	writers map[wire.StreamID]*journal.Writer
	held    map[wire.StreamID]wire.Seq // a resumed incarnation's Next, when beyond the live join
	lastID  wire.StreamID
	last    *journal.Writer // one-entry lookup cache
	// The packet being journaled: the writer its previous message went to
	// (nil when it was not journaled) and its receive time, which every
	// message of the packet gets.
	pktW    *journal.Writer
	pktTime int64
	st      TapStats
	err     error // the first journal error; later appends of the stream are skipped
	closed  bool
}

// TapStats count what a Recorder or a journaling Rewinder wrote.
type TapStats struct {
	Messages     uint64 // appended to the journal
	Bytes        uint64 // message bytes appended
	Incarnations uint64 // journal incarnations created
	Restarts     uint64 // incarnations started because a stream's sequences restarted or skipped
	Resumed      uint64 // incarnations continued after a restart of the recorder
	Filled       uint64 // messages fetched from Upstream to continue a resumed incarnation
	Ended        uint64 // end of session recorded
	Errors       uint64 // appends that failed (the first error is Err)
	// RefusedPackets counts the packets of streams beyond the recorder's
	// stream bounds (Config.MaxStreams), not journaled (Recorder only).
	RefusedPackets uint64
}

func newTap(j *journal.Journal, log *slog.Logger) *tap {
	return &tap{j: j, log: log, writers: map[wire.StreamID]*journal.Writer{}, held: map[wire.StreamID]wire.Seq{},
		now: func() int64 { return time.Now().UnixNano() }}
}

// message journals m, stamped with the receive time of its packet, and
// marked as the first of its packet or one sharing the packet of the
// record before it.
func (t *tap) message(m subscriber.Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	inPacket := t.pktW
	t.pktW = nil // until this message is journaled
	if m.PacketStart || inPacket == nil {
		inPacket, t.pktTime = nil, t.now()
	}
	w := t.last
	if w == nil || t.lastID != m.Stream {
		w = t.writers[m.Stream]
	}
	if w != nil && m.Seq < w.Next() && m.Seq < t.held[m.Stream] {
		return // held already: the recorder resumed an incarnation that reaches past the join
	}
	if w != nil && w.Next() != m.Seq {
		// The subscriber delivers each sequence of an incarnation
		// once, in order: a different one follows a range declared
		// lost or skipped (or, from a caller that does not apply the
		// incarnation rule, a restart). Either way it is not the same
		// history any more.
		t.st.Restarts++
		t.log.Warn("recorder: stream continues at another sequence; new journal incarnation",
			"stream", m.Stream, "want", w.Next(), "got", m.Seq)
		t.closeWriter(m.Stream, w)
		w = t.create(m)
		if w == nil {
			return
		}
	}
	if w == nil {
		w = t.resume(m.Stream, m.Seq)
		if w != nil && m.Seq < w.Next() {
			t.held[m.Stream] = w.Next()
			return // held already
		}
	}
	if w == nil {
		if w = t.create(m); w == nil {
			return
		}
	}
	t.lastID, t.last = m.Stream, w
	// A message shares the packet of the record before it only when that
	// record is the packet's previous message, in this incarnation.
	mark := journal.PacketStart
	if inPacket == w {
		mark = journal.PacketSame
	}
	if err := w.AppendMarked(m.Seq, t.pktTime, m.Data, mark); err != nil {
		t.fail(fmt.Errorf("recorder: stream %s seq %d: %w", m.Stream, m.Seq, err))
		return
	}
	t.pktW = w
	t.st.Messages++
	t.st.Bytes += uint64(len(m.Data))
}

// create starts a new journal incarnation for m's stream at m.Seq. t.mu
// must be held.
func (t *tap) create(m subscriber.Message) *journal.Writer {
	w, err := t.j.Create(m.Stream.Session, m.Stream.Source, m.Seq)
	if err != nil {
		t.fail(fmt.Errorf("recorder: from seq %d: %w", m.Seq, err))
		return nil
	}
	t.writers[m.Stream] = w
	t.st.Incarnations++
	return w
}

// setUpstreams sets the retransmitters a resumed incarnation is filled
// from: up (when valid), then backups.
func (t *tap) setUpstreams(up netip.AddrPort, backups []netip.AddrPort) {
	if up.IsValid() {
		t.upstreams = append([]netip.AddrPort{up}, backups...)
	}
}

// resumeTimeout bounds the fetch that continues a resumed incarnation.
const resumeTimeout = 30 * time.Second

// resume continues the newest incarnation of the stream on disk when the
// recorder restarted under a live stream: same session, same source, not
// ended, and holding nothing beyond seq but possibly less. The range
// between what it holds and seq is fetched from the upstream
// retransmitter first; when that fails the stream gets a new incarnation
// instead (a journal incarnation has no holes). t.mu must be held.
func (t *tap) resume(id wire.StreamID, seq wire.Seq) *journal.Writer {
	jid, ok := t.j.Latest(id.Session, id.Source)
	if !ok || !id.Source.IsValid() {
		return nil
	}
	w, err := t.j.Resume(jid)
	if err != nil {
		return nil // ended, busy, compressed or damaged: a new incarnation
	}
	if w.Next() < seq {
		if len(t.upstreams) == 0 {
			w.Close()
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), resumeTimeout)
		from := w.Next()
		var err error
		for _, up := range t.upstreams {
			if w.Next() >= seq {
				break
			}
			_, err = resume.RequestHistory{Addr: up}.Fetch(ctx, id.Session, w.Next(), seq, func(s wire.Seq, msg []byte) error {
				return w.Append(s, t.now(), msg)
			})
		}
		cancel()
		t.st.Filled += uint64(w.Next() - from)
		if w.Next() < seq {
			t.log.Warn("recorder: could not fill the range since the last run; new journal incarnation",
				"stream", id, "from", w.Next(), "to", seq, "err", err)
			w.Close()
			return nil
		}
	}
	t.writers[id] = w
	t.st.Resumed++
	t.log.Info("recorder: resumed journal incarnation", "stream", id, "next", w.Next())
	return w
}

// end records the end of session of a stream whose every message was
// delivered; the next message of that stream starts a new incarnation.
func (t *tap) end(id wire.StreamID, next wire.Seq) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	w := t.writers[id]
	if w == nil {
		// The first thing heard of the stream since the recorder started
		// is its end: continue the incarnation on disk up to it.
		if w = t.resume(id, next); w == nil || w.Next() != next {
			if w != nil {
				t.closeWriter(id, w)
			}
			return
		}
	}
	if err := w.End(next); err != nil {
		t.fail(fmt.Errorf("recorder: stream %s end at %d: %w", id, next, err))
	}
	t.st.Ended++
	t.closeWriter(id, w)
}

func (t *tap) closeWriter(id wire.StreamID, w *journal.Writer) {
	if err := w.Close(); err != nil && !errors.Is(err, journal.ErrClosed) {
		t.fail(fmt.Errorf("recorder: stream %s: %w", id, err))
	}
	delete(t.writers, id)
	delete(t.held, id)
	if t.pktW == w {
		t.pktW = nil
	}
	if t.last == w {
		t.last = nil
	}
}

// fail counts an error and latches the first. t.mu must be held.
func (t *tap) fail(err error) {
	t.st.Errors++
	if t.err == nil {
		t.err = err
		t.log.Error("recorder: journal write failed", "err", err)
	}
}

func (t *tap) stats() (TapStats, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.st, t.err
}

// close syncs and closes every writer (without an end of session: the
// session did not end, the recording did).
func (t *tap) close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	var errs []error
	for id, w := range t.writers {
		if err := w.Close(); err != nil && !errors.Is(err, journal.ErrClosed) {
			errs = append(errs, fmt.Errorf("recorder: stream %s: %w", id, err))
		}
	}
	clear(t.writers)
	t.last = nil
	return errors.Join(errs...)
}
