package journal

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdbus/mdbus/wire"
)

// writeBufLen is the Writer's frame buffer: AppendPacket frames a whole
// packet's messages and writes them with one write call.
const writeBufLen = 256 << 10

// Writer appends to one stream. Not safe for concurrent use.
//
// Every Append reaches the operating system with one write call before it
// returns (AppendPacket: one per packet), so a crash of the process loses
// nothing appended; the SyncPolicy decides when it reaches the disk.
type Writer struct {
	j   *Journal
	st  *stream
	cfg *Config

	seg      *segment
	f        *os.File
	off      int64    // committed end of seg
	next     wire.Seq // sequence of the next Append
	tmax     int64    // largest time in seg
	nextIdx  int64    // offset from which the next index entry is due
	nextFine int64    // offset from which the next fine index entry is due
	buf      []byte
	closed   bool
	ended    bool

	// Background sync (SyncInterval): the loop goroutine waits for a kick,
	// sleeps the interval and syncs. syncMu serializes fsync with rotation
	// and Close, which swap the file.
	syncMu  sync.Mutex
	dirty   atomic.Bool
	kick    chan struct{}
	quit    chan struct{}
	done    chan struct{}
	durable atomic.Uint64

	failed atomic.Bool
	errMu  sync.Mutex
	err    error
}

func newWriter(j *Journal, st *stream, seg *segment, f *os.File) *Writer {
	w := &Writer{j: j, st: st, cfg: &j.cfg, seg: seg, f: f,
		off: seg.end.Load(), next: seg.nextSeq(), tmax: math.MinInt64,
		buf: make([]byte, 0, writeBufLen)}
	seg.mu.Lock()
	w.tmax = seg.maxTime
	if n := len(seg.idx); n > 0 {
		c := seg.idx[n-1]
		w.nextIdx, w.nextFine = c.off+indexEvery, c.off+fineEvery
		if k := len(seg.fine); k > int(c.fine) {
			w.nextFine = unpackFine(c, seg.fine[k-1]).off + fineEvery
		}
	}
	if cap(seg.idx) < int(j.cfg.SegmentBytes/indexEvery)+1 {
		// Room for every index entry of a full segment, so that appends
		// never grow the slice.
		idx := make([]idxEntry, len(seg.idx), int(j.cfg.SegmentBytes/indexEvery)+2)
		copy(idx, seg.idx)
		seg.idx = idx
	}
	if cap(seg.fine) < int(j.cfg.SegmentBytes/fineEvery)+1 {
		fine := make([]uint32, len(seg.fine), int(j.cfg.SegmentBytes/fineEvery)+2)
		copy(fine, seg.fine)
		seg.fine = fine
	}
	seg.mu.Unlock()
	w.durable.Store(uint64(w.next))
	if j.cfg.Sync == SyncInterval {
		w.kick = make(chan struct{}, 1)
		w.quit = make(chan struct{})
		w.done = make(chan struct{})
		go w.syncLoop()
	}
	return w
}

// ID names the stream.
func (w *Writer) ID() wire.StreamID { return w.st.id }

// Next is the sequence the next Append must carry.
func (w *Writer) Next() wire.Seq { return w.next }

// Durable is the sequence after the last record known to be fsynced.
func (w *Writer) Durable() wire.Seq { return wire.Seq(w.durable.Load()) }

// Err returns the first error latched by SentPacket or the background sync.
func (w *Writer) Err() error {
	if !w.failed.Load() {
		return nil
	}
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.err
}

func (w *Writer) latch(err error) error {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	if w.err == nil {
		w.err = err
		w.failed.Store(true)
		w.j.log.Error("journal: writer failed; the stream takes no more records", "stream", w.st.id.String(), "err", err)
	}
	return w.err
}

func (w *Writer) check(seq wire.Seq) error {
	switch {
	case w.failed.Load():
		return w.Err()
	case w.closed:
		return ErrClosed
	case w.ended:
		return ErrEnded
	case seq != w.next:
		return ErrOutOfOrder
	}
	return nil
}

// Append adds message seq, which must be Next() (ErrOutOfOrder
// otherwise), timestamped ts (ns since the Unix epoch), its packet
// unknown. It allocates nothing. The record is durable per the Config's
// SyncPolicy.
func (w *Writer) Append(seq wire.Seq, ts int64, msg []byte) error {
	return w.AppendMarked(seq, ts, msg, PacketUnknown)
}

// AppendMarked is Append recording what is known of the message's packet
// (PacketStart for the first message of a packet, PacketSame for the
// others), so that the packets can be rebuilt as they were on the wire.
func (w *Writer) AppendMarked(seq wire.Seq, ts int64, msg []byte, mark PacketMark) error {
	if err := w.check(seq); err != nil {
		return err
	}
	if len(msg) > MaxMessageLen {
		return ErrTooLarge
	}
	if err := w.room(frameLen(len(msg))); err != nil {
		return err
	}
	w.buf = w.frame(w.buf[:0], seq, ts, msg, mark)
	return w.commit(w.buf, seq+1)
}

// room rotates the segment when n more bytes would pass SegmentBytes.
func (w *Writer) room(n int) error {
	if w.off+int64(n)+sealLen > w.cfg.SegmentBytes && w.off > SegmentHeaderLen {
		return w.rotate()
	}
	return nil
}

// frame appends the record of message seq to b (pending bytes after off),
// noting an index entry when one is due.
func (w *Writer) frame(b []byte, seq wire.Seq, ts int64, msg []byte, mark PacketMark) []byte {
	at := w.off + int64(len(b))
	if at >= w.nextIdx {
		w.seg.mu.Lock()
		w.seg.idx = append(w.seg.idx, idxEntry{seq: seq, off: at, tmax: w.tmax, fine: uint32(len(w.seg.fine))})
		w.seg.mu.Unlock()
		w.nextIdx, w.nextFine = at+indexEvery, at+fineEvery
	} else if at >= w.nextFine {
		w.seg.mu.Lock()
		w.seg.fine = append(w.seg.fine, packFine(w.seg.idx[len(w.seg.idx)-1], seq, at))
		w.seg.mu.Unlock()
		w.nextFine = at + fineEvery
	}
	w.tmax = max(w.tmax, ts)
	return appendMessage(b, seq, ts, msg, mark)
}

// commit writes b, the framed records up to next, and publishes them.
func (w *Writer) commit(b []byte, next wire.Seq) error {
	if _, err := w.f.Write(b); err != nil {
		return w.fail(fmt.Errorf("journal: write %s at offset %d: %w%s", w.seg.path, w.off, err, hint(err)))
	}
	w.off += int64(len(b))
	w.next = next
	s := w.seg
	s.end.Store(w.off)
	s.size.Store(w.off)
	s.next.Store(uint64(next))
	s.mu.Lock()
	s.maxTime = w.tmax
	s.mu.Unlock()
	switch w.cfg.Sync {
	case SyncEvery:
		return w.Sync()
	case SyncInterval:
		if !w.dirty.Load() && w.dirty.CompareAndSwap(false, true) {
			select {
			case w.kick <- struct{}{}:
			default:
			}
		}
	}
	return nil
}

// fail latches err after a failed write, cutting a partly written record
// (ENOSPC mid-record) so the segment ends at the last whole one.
func (w *Writer) fail(err error) error {
	w.seg.mu.Lock()
	for n := len(w.seg.idx); n > 0 && w.seg.idx[n-1].off >= w.off; n-- {
		w.seg.idx = w.seg.idx[:n-1]
	}
	if n := len(w.seg.idx); n == 0 {
		w.seg.fine = w.seg.fine[:0]
	} else {
		c := w.seg.idx[n-1]
		for k := len(w.seg.fine); k > int(c.fine) && unpackFine(c, w.seg.fine[k-1]).off >= w.off; k-- {
			w.seg.fine = w.seg.fine[:k-1]
		}
	}
	w.seg.mu.Unlock()
	if terr := w.f.Truncate(w.off); terr == nil {
		_, _ = w.f.Seek(w.off, 0)
	}
	return w.latch(err)
}

// AppendPacket appends every message of a MoldUDP64 data packet, marking
// which ones shared it (PacketStart, then PacketSame). Messages below Next
// are skipped (already held); a packet starting beyond Next is
// ErrOutOfOrder. An end-of-session packet records the end (End); a
// heartbeat is ignored.
func (w *Writer) AppendPacket(pkt []byte, ts int64) error {
	p, err := wire.ParsePacket(pkt)
	if err != nil {
		return fmt.Errorf("journal: append packet: %w", err)
	}
	switch p.Count {
	case wire.CountHeartbeat:
		return nil
	case wire.CountEndOfSession:
		return w.End(p.Seq)
	}
	if err := w.check(w.next); err != nil {
		return err
	}
	if p.Seq > w.next {
		return ErrOutOfOrder
	}
	it := p.Messages()
	if skip := w.next - p.Seq; skip > 0 {
		if uint64(skip) >= uint64(p.Count) {
			return nil
		}
		it.Skip(int(skip))
	}
	b := w.buf[:0]
	next := w.next
	mark := PacketStart
	for {
		msg, seq, ok := it.Next()
		if !ok {
			break
		}
		n := frameLen(len(msg))
		if w.off+int64(len(b)+n)+sealLen > w.cfg.SegmentBytes && w.off+int64(len(b)) > SegmentHeaderLen || len(b)+n > cap(b) {
			if len(b) > 0 {
				if err := w.commit(b, next); err != nil {
					return err
				}
				b = w.buf[:0]
			}
			if err := w.room(n); err != nil {
				return err
			}
		}
		b = w.frame(b, seq, ts, msg, mark)
		mark = PacketSame
		next = seq + 1
	}
	if len(b) == 0 {
		return nil
	}
	return w.commit(b, next)
}

// SentPacket makes a Writer a publisher.Sink: it appends pkt stamped with
// the current time and latches any error (see Err).
func (w *Writer) SentPacket(pkt []byte) {
	if w.failed.Load() {
		return
	}
	if err := w.AppendPacket(pkt, time.Now().UnixNano()); err != nil && !errors.Is(err, ErrClosed) {
		w.latch(err)
	}
}

// End records the end of session: next is the sequence after the last.
// It syncs whatever the policy; the stream takes no more records.
func (w *Writer) End(next wire.Seq) error {
	if err := w.check(next); err != nil {
		return err
	}
	if err := w.room(RecordHeaderLen + align(msgFixedLen)); err != nil {
		return err
	}
	w.buf = appendEnd(w.buf[:0], next, time.Now().UnixNano())
	if _, err := w.f.Write(w.buf); err != nil {
		return w.fail(fmt.Errorf("journal: write %s at offset %d: %w%s", w.seg.path, w.off, err, hint(err)))
	}
	w.off += int64(len(w.buf))
	w.ended = true
	s := w.seg
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
	s.end.Store(w.off)
	s.size.Store(w.off)
	return w.Sync()
}

// Sync fsyncs everything appended so far.
func (w *Writer) Sync() error {
	if w.closed {
		return ErrClosed
	}
	return w.sync()
}

// sync is Sync for the writer's own user and the background loop.
func (w *Writer) sync() error {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	if w.failed.Load() {
		return w.Err()
	}
	if w.f == nil {
		return nil
	}
	next := w.seg.next.Load()
	if err := fdatasync(w.f); err != nil {
		return w.latch(fmt.Errorf("journal: sync %s: %w%s", w.seg.path, err, hint(err)))
	}
	// A segment unlinked under a running writer (its directory deleted)
	// still takes writes and syncs, which then reach nothing: say so.
	if fi, err := w.f.Stat(); err == nil {
		if unlinked(fi) {
			return w.latch(fmt.Errorf("journal: segment %s was removed from disk (was the journal directory deleted?); records after %d are lost", w.seg.path, w.durable.Load()))
		}
	}
	if next > w.durable.Load() {
		w.durable.Store(next)
	}
	return nil
}

func (w *Writer) syncLoop() {
	defer close(w.done)
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		select {
		case <-w.quit:
			return
		case <-w.kick:
		}
		t.Reset(w.cfg.SyncInterval)
		select {
		case <-w.quit:
			t.Stop()
			return
		case <-t.C:
		}
		w.dirty.Store(false)
		_ = w.sync() // latched
	}
}

// rotate seals the current segment (synced) and starts the next one.
func (w *Writer) rotate() error {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	old := w.seg
	if err := fdatasync(w.f); err != nil {
		return w.latch(fmt.Errorf("journal: seal %s: %w%s", old.path, err, hint(err)))
	}
	if next := old.next.Load(); next > w.durable.Load() {
		w.durable.Store(next)
	}
	h := old.header()
	h.flags &^= flagOrigin | flagRetained
	h.first = w.next
	h.created = time.Now().UnixNano()
	seg, f, err := w.j.createSegment(w.st.dir, h)
	if err != nil {
		return w.latch(err)
	}
	// Seal the old segment only now that the next one is on disk: a
	// sealed segment without a successor is a deleted segment, never a
	// crash in the middle of a rotation.
	w.buf = appendSeal(w.buf[:0], w.next, h.created)
	if _, err := w.f.Write(w.buf); err != nil {
		f.Close()
		return w.fail(fmt.Errorf("journal: seal %s: %w%s", old.path, err, hint(err)))
	}
	if err := fdatasync(w.f); err != nil {
		f.Close()
		return w.latch(fmt.Errorf("journal: seal %s: %w%s", old.path, err, hint(err)))
	}
	w.off += int64(len(w.buf))
	old.end.Store(w.off)
	old.size.Store(w.off)
	old.mu.Lock()
	old.sealed = true
	old.mu.Unlock()
	if err := w.f.Close(); err != nil {
		w.j.log.Warn("journal: close sealed segment", "path", old.path, "err", err)
	}
	old.mu.Lock()
	old.idx = old.idx[:len(old.idx):len(old.idx)]
	old.fine = append([]uint32(nil), old.fine...) // give back the room a full segment would need
	old.mu.Unlock()
	w.f, w.seg, w.off, w.tmax, w.nextIdx, w.nextFine = f, seg, SegmentHeaderLen, math.MinInt64, 0, 0
	seg.idx = make([]idxEntry, 0, int(w.cfg.SegmentBytes/indexEvery)+2)
	seg.fine = make([]uint32, 0, int(w.cfg.SegmentBytes/fineEvery)+2)
	w.st.mu.Lock()
	w.st.segs = append(w.st.segs, seg)
	w.st.mu.Unlock()
	w.j.retain(w.st)
	w.j.enqueue(w.st, old)
	return nil
}

// Close syncs and closes the writer; a second Close returns ErrClosed.
func (w *Writer) Close() error {
	if w.closed {
		return ErrClosed
	}
	w.closed = true
	if w.quit != nil {
		close(w.quit)
		<-w.done
	}
	err := w.sync()
	w.syncMu.Lock()
	if cerr := w.f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("journal: close %s: %w", w.seg.path, cerr)
	}
	w.f = nil
	w.syncMu.Unlock()
	w.st.mu.Lock()
	if w.st.writer == w {
		w.st.writer = nil
	}
	w.st.mu.Unlock()
	return err
}
