package journal

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/mdbus/mdbus/wire"
)

// readBufLen is the Reader's read-ahead for sequential reads: one ReadAt
// fills this much. Positioned reads (AppendPacket) read what the answer
// needs instead.
const readBufLen = 1 << 20

// Reader reads one stream in sequence order. Not safe for concurrent use.
//
// A Reader follows a stream that is being written: Next returns io.EOF at
// the current end and the records appended later on the next calls.
type Reader struct {
	j  *Journal
	st *stream

	seg    *segment // current segment, nil before the first
	f      *os.File // its file (uncompressed segments)
	win    window
	want   int                       // bytes a refill reads: 0 reads ahead readBufLen (see window.get)
	hdr    [RecordHeaderLen + 1]byte // skipTo's header and type, here so it does not escape per call
	off    int64                     // offset of the next record in seg (uncompressed)
	zr     zstdCursor
	expect wire.Seq // sequence of the next record

	// pending is the record peek decoded, not yet consumed.
	pending    Record
	pendingN   int
	hasPending bool

	err    error // sticky corruption
	closed bool
}

func newReader(j *Journal, st *stream) *Reader {
	r := &Reader{j: j, st: st}
	r.win.init(nil, readBufLen)
	r.win.st = &j.io
	first, _ := st.bounds()
	r.expect = first
	st.mu.RLock()
	if len(st.segs) > 0 {
		r.seg = st.segs[0]
	}
	st.mu.RUnlock()
	r.off = SegmentHeaderLen
	return r
}

// Bounds is the range of sequences held, [first, next).
func (r *Reader) Bounds() (first, next wire.Seq) { return r.st.bounds() }

// SeekSeq positions the reader at seq (O(log n) via the sparse index).
// seq may be the stream's Next: the reader then waits at the end.
func (r *Reader) SeekSeq(seq wire.Seq) error {
	if r.closed {
		return ErrClosed
	}
	first, next := r.st.bounds()
	if seq < first || seq > next {
		return fmt.Errorf("journal: seek %s to sequence %d: holds [%d, %d): %w", r.st.id, seq, first, next, ErrNotFound)
	}
	r.st.mu.RLock()
	segs := r.st.segs
	i := sort.Search(len(segs), func(i int) bool { return segs[i].first > seq }) - 1
	seg := segs[max(i, 0)]
	r.st.mu.RUnlock()
	if err := seg.loadIndex(&r.j.io); err != nil && seg != r.newest() {
		// A corrupt sealed segment: the index covers what precedes the
		// bad record; Next reports it when it gets there.
		_ = err
	}
	e := seg.seekIndex(seq)
	if err := r.position(seg, e); err != nil {
		return err
	}
	if r.want > 0 && !seg.zstd {
		r.skipTo(seq)
	}
	for r.expect < seq {
		if _, err := r.peek(); err != nil {
			return err
		}
		r.advance()
	}
	return nil
}

// skipTo moves a positioned reader (want set) from its index entry
// towards seq reading only record headers, at most fineEvery bytes of
// records apart. A length out of range stops it: peek then reports the
// record there, and one whose sequence is not the expected one is
// corruption, so a damaged length never makes it serve another record.
func (r *Reader) skipTo(seq wire.Seq) {
	end := r.seg.end.Load()
	h := r.hdr[:] // header and type
	for r.expect < seq && r.off+int64(len(h)) <= end {
		var b []byte
		if rel := r.off - r.win.start; rel >= 0 && rel+int64(len(h)) <= int64(len(r.win.buf)) {
			b = r.win.buf[rel:]
		} else {
			n, _ := r.f.ReadAt(h, r.off)
			r.j.io.read(n)
			if n < len(h) {
				return
			}
			b = h
		}
		l := binary.LittleEndian.Uint32(b[recLenOff:])
		if t := b[RecordHeaderLen]; l < msgFixedLen || l > maxBodyLen || (t != recMessage && t != recPacket && t != recSame) {
			return
		}
		n := int64(RecordHeaderLen + align(int(l)))
		if r.off+n > end {
			return
		}
		r.off += n
		r.expect++
	}
}

func (r *Reader) newest() *segment {
	r.st.mu.RLock()
	defer r.st.mu.RUnlock()
	return r.st.segs[len(r.st.segs)-1]
}

// position makes seg current, at index entry e.
func (r *Reader) position(seg *segment, e idxEntry) error {
	r.hasPending = false
	r.err = nil
	if seg != r.seg || (r.f == nil && !seg.zstd) || (seg.zstd && !r.zr.open) {
		r.closeFile()
		r.seg = seg
		if seg.zstd {
			if err := r.zr.openSeg(r.j, seg); err != nil {
				return err
			}
		} else {
			f, err := openRegular(seg.path, os.O_RDONLY, 0)
			if err != nil {
				return fmt.Errorf("journal: read %s: %w", seg.path, err)
			}
			r.f = f
			r.win.reset(f)
		}
	}
	r.expect = e.seq
	if seg.zstd {
		return r.zr.seek(e)
	}
	r.off = e.off
	return nil
}

func (r *Reader) closeFile() {
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
	r.zr.close()
}

// SeekTime positions the reader at the first record with Time >= ns. Times
// need not be monotonic: records before the position all have smaller
// times, as far as the index can tell, and the scan from there stops at
// the first record at or after ns. With none, the reader is at the end.
func (r *Reader) SeekTime(ns int64) error {
	if r.closed {
		return ErrClosed
	}
	r.st.mu.RLock()
	segs := append([]*segment(nil), r.st.segs...)
	r.st.mu.RUnlock()
	for i, seg := range segs {
		if err := seg.loadIndex(&r.j.io); err != nil && i < len(segs)-1 {
			return err
		}
		seg.mu.Lock()
		mt := seg.maxTime
		seg.mu.Unlock()
		if mt < ns && i < len(segs)-1 {
			continue
		}
		if err := r.position(seg, seg.seekTimeIndex(ns)); err != nil {
			return err
		}
		for {
			rec, err := r.peek()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if rec.Time >= ns {
				return nil
			}
			r.advance()
		}
	}
	return nil
}

// Next returns the next record, io.EOF after the last one; a corrupt
// record returns a *CorruptError, never the record. The record's Data is
// valid until the next call on the Reader.
func (r *Reader) Next() (Record, error) {
	// Fast path: the next record is whole in the read buffer.
	if r.f != nil && !r.hasPending && r.err == nil {
		rel := r.off - r.win.start
		if end := r.seg.end.Load(); rel >= 0 && r.off < end && rel < int64(len(r.win.buf)) {
			fr, st := decodeFrame(r.win.buf[rel:])
			if st == frameOK && fr.typ == recMessage && fr.seq == r.expect && r.off+int64(fr.n) <= end {
				r.off += int64(fr.n)
				r.expect++
				return Record{Seq: fr.seq, Time: fr.ts, Data: fr.data, Packet: fr.mark}, nil
			}
		}
	}
	rec, err := r.peek()
	if err != nil {
		return Record{}, err
	}
	r.advance()
	return rec, nil
}

// advance consumes the record peek returned.
func (r *Reader) advance() {
	if !r.hasPending {
		return
	}
	r.hasPending = false
	r.expect++
	if r.seg.zstd {
		r.zr.advance(r.pendingN)
	} else {
		r.off += int64(r.pendingN)
	}
}

// peek decodes the next record without consuming it.
func (r *Reader) peek() (Record, error) {
	if r.hasPending {
		return r.pending, nil
	}
	if r.closed {
		return Record{}, ErrClosed
	}
	if r.err != nil {
		return Record{}, r.err
	}
	for {
		if r.seg == nil {
			r.st.mu.RLock()
			if len(r.st.segs) > 0 {
				r.seg = r.st.segs[0]
				r.off = SegmentHeaderLen
			}
			r.st.mu.RUnlock()
			if r.seg == nil {
				return Record{}, io.EOF
			}
		}
		if r.f == nil && !r.zr.open {
			if err := r.position(r.seg, idxEntry{seq: r.expect, off: r.off}); err != nil {
				return Record{}, err
			}
		}
		var (
			fr     frame
			status frameStatus
			at     int64
			atEnd  bool
		)
		if r.seg.zstd {
			var err error
			fr, status, at, atEnd, err = r.zr.next()
			if err != nil {
				r.err = err
				return Record{}, err
			}
		} else {
			end := r.seg.end.Load()
			if r.off >= end {
				atEnd = true
			} else {
				b, err := r.win.get(r.off, end, r.want)
				if err != nil {
					return Record{}, fmt.Errorf("journal: read %s at offset %d: %w", r.seg.path, r.off, err)
				}
				fr, status = decodeFrame(b)
				at = r.off
			}
		}
		if atEnd {
			nxt := r.following()
			if nxt == nil {
				return Record{}, io.EOF
			}
			// The writer publishes a segment's last records before the
			// next segment: look again before moving on.
			if !r.seg.zstd && r.off < r.seg.end.Load() {
				continue
			}
			if err := r.enter(nxt); err != nil {
				return Record{}, err
			}
			continue
		}
		if status != frameOK {
			r.err = &CorruptError{Path: r.seg.path, Offset: at, Reason: status.String()}
			return Record{}, r.err
		}
		if fr.typ == recSeal {
			// The stream goes on in the next segment, which the writer
			// created before it sealed this one.
			if fr.seq != r.expect {
				r.err = &CorruptError{Path: r.seg.path, Offset: at, Reason: fmt.Sprintf(
					"segment sealed at sequence %d where %d was expected", fr.seq, r.expect)}
				return Record{}, r.err
			}
			nxt := r.following()
			if nxt == nil {
				return Record{}, io.EOF
			}
			if err := r.enter(nxt); err != nil {
				return Record{}, err
			}
			continue
		}
		if fr.typ == recEnd {
			return Record{}, io.EOF
		}
		if fr.seq != r.expect {
			r.err = &CorruptError{Path: r.seg.path, Offset: at, Reason: fmt.Sprintf(
				"sequence %d where %d was expected", fr.seq, r.expect)}
			return Record{}, r.err
		}
		r.pending = Record{Seq: fr.seq, Time: fr.ts, Data: fr.data, Packet: fr.mark}
		r.pendingN = fr.n
		r.hasPending = true
		return r.pending, nil
	}
}

// enter moves the reader to the start of nxt, the segment after its own,
// which must begin at the sequence expected next: a later start means
// records are missing, which is corruption.
func (r *Reader) enter(nxt *segment) error {
	if nxt.first != r.expect {
		r.err = &CorruptError{Path: nxt.path, Offset: 0, Reason: fmt.Sprintf(
			"segment starts at sequence %d where %d was expected (records missing)", nxt.first, r.expect)}
		return r.err
	}
	return r.position(nxt, idxEntry{seq: nxt.first, off: SegmentHeaderLen})
}

// following returns the segment after the current one, nil if none.
func (r *Reader) following() *segment {
	r.st.mu.RLock()
	defer r.st.mu.RUnlock()
	segs := r.st.segs
	i := sort.Search(len(segs), func(i int) bool { return segs[i].first > r.seg.first })
	if i == len(segs) {
		return nil
	}
	return segs[i]
}

// Close releases the reader.
func (r *Reader) Close() error {
	if r.closed {
		return ErrClosed
	}
	r.closed = true
	r.closeFile()
	r.j.forget(r)
	return nil
}
