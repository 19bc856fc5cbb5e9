package journal

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mdbus/mdbus/wire"
)

// indexEvery is the spacing, in segment bytes, of the sparse index: a seek
// scans at most this much after a binary search.
const indexEvery = 16 << 10

// fineEvery is the spacing, in segment bytes, of the fine index under the
// sparse one: a positioned read (a re-request answered from the journal)
// scans at most this much before the record it wants, so what it reads
// stays close to what it answers.
const fineEvery = 512

// packFine packs the position of the record of sequence seq at offset off
// relative to its sparse index entry c: the sequence delta in the high 16
// bits, the offset delta in units of recAlign in the low 16. An index
// entry spans less than indexEvery + MaxRecordLen bytes, so both fit.
func packFine(c idxEntry, seq wire.Seq, off int64) uint32 {
	return uint32(seq-c.seq)<<16 | uint32((off-c.off)/recAlign)
}

// unpackFine is the index entry of fine entry f under c.
func unpackFine(c idxEntry, f uint32) idxEntry {
	return idxEntry{seq: c.seq + wire.Seq(f>>16), off: c.off + int64(f&0xFFFF)*recAlign, tmax: c.tmax}
}

// Segment file names: the first sequence, zero padded, and the kind.
const (
	segExt  = ".seg" // records as written
	zstdExt = ".zst" // a sealed segment compressed into zstd blocks
	tmpExt  = ".tmp" // a file being written, renamed when complete
)

func segName(first wire.Seq, ext string) string { return fmt.Sprintf("%020d%s", uint64(first), ext) }

func parseSegName(name string) (wire.Seq, string, bool) {
	ext := filepath.Ext(name)
	if ext != segExt && ext != zstdExt {
		return 0, "", false
	}
	n, err := strconv.ParseUint(strings.TrimSuffix(name, ext), 10, 64)
	if err != nil || n == 0 {
		return 0, "", false
	}
	return wire.Seq(n), ext, true
}

// idxEntry is one point of a segment's sparse index: the record of
// sequence seq starts at off, and every record before it in the segment
// has a time of at most tmax. Its fine entries are seg.fine[fine:] up to
// the next entry's fine (uncompressed segments only).
type idxEntry struct {
	seq  wire.Seq
	off  int64
	tmax int64
	fine uint32
}

// segment is one file of a stream.
type segment struct {
	path  string
	hdr   segHeader
	first wire.Seq
	zstd  bool

	// end is the offset after the last committed record and next the
	// sequence after it (the writer publishes both after every write);
	// fixed once the segment is sealed. For a compressed segment end is
	// unused.
	end  atomic.Int64
	next atomic.Uint64
	size atomic.Int64 // bytes on disk

	mu      sync.Mutex
	idx     []idxEntry
	fine    []uint32 // packFine entries, every fineEvery bytes between idx entries
	indexed bool     // idx covers the whole segment and maxTime is known
	minTime int64    // time of the first record (math.MinInt64 if none)
	maxTime int64    // largest record time (math.MinInt64 if none)
	ended   bool     // holds the end-of-session record
	sealed  bool     // ends with a seal record: the stream goes on in the next segment
	bad     error    // corruption found by a scan
	zb      *zstdIndex
}

func (s *segment) nextSeq() wire.Seq { return wire.Seq(s.next.Load()) }

// header returns the segment's header (retention may set a flag in it).
func (s *segment) header() segHeader {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hdr
}

// scanResult is what a full scan of an uncompressed segment found.
type scanResult struct {
	end     int64    // offset after the last good record
	next    wire.Seq // sequence after the last good message
	idx     []idxEntry
	fine    []uint32
	minTime int64
	maxTime int64
	ended   bool
	sealed  bool // ends with a seal record
	// Exactly one of these may be set when the scan stopped early.
	torn    bool // a torn tail starts at end (only when tail is allowed)
	corrupt *CorruptError
}

// scanSegment reads every record of an uncompressed segment of size bytes
// after its header, checking CRCs and sequence continuity. With tail set
// (the stream's newest segment), a bad record after which no good record
// follows is a torn tail; anywhere else a bad record is corruption.
func scanSegment(f io.ReaderAt, st *ioStats, path string, h segHeader, size int64, tail bool) scanResult {
	res := scanResult{end: SegmentHeaderLen, next: h.first, minTime: math.MinInt64, maxTime: math.MinInt64}
	var w window
	w.init(f, 1<<20)
	w.st = st
	nextIdx, nextFine := int64(0), int64(0)
	for off := int64(SegmentHeaderLen); off < size; {
		b, err := w.get(off, size, 0)
		if err != nil {
			res.corrupt = &CorruptError{Path: path, Offset: off, Reason: "read: " + err.Error()}
			return res
		}
		fr, st := decodeFrame(b)
		reason := st.String()
		if st == frameOK {
			switch {
			case res.ended:
				st, reason = frameBadBody, "record after the end of session"
			case res.sealed:
				st, reason = frameBadBody, "record after the seal of the segment"
			case fr.seq != res.next:
				st, reason = frameBadBody, fmt.Sprintf("sequence %d where %d was expected", fr.seq, res.next)
			}
		}
		if st != frameOK {
			if tail && !goodRecordAfter(&w, off, size, res.next) {
				res.torn = true
				return res
			}
			res.corrupt = &CorruptError{Path: path, Offset: off, Reason: reason}
			return res
		}
		switch fr.typ {
		case recEnd:
			res.ended = true
		case recSeal:
			res.sealed = true
		default:
			if off >= nextIdx {
				res.idx = append(res.idx, idxEntry{seq: fr.seq, off: off, tmax: res.maxTime, fine: uint32(len(res.fine))})
				nextIdx, nextFine = off+indexEvery, off+fineEvery
			} else if off >= nextFine {
				res.fine = append(res.fine, packFine(res.idx[len(res.idx)-1], fr.seq, off))
				nextFine = off + fineEvery
			}
			if res.minTime == math.MinInt64 {
				res.minTime = fr.ts
			}
			res.maxTime = max(res.maxTime, fr.ts)
			res.next++
		}
		off += int64(fr.n)
		res.end = off
	}
	return res
}

// goodRecordAfter reports whether a valid record of a sequence from next on
// starts at some aligned offset after off: if one does, the bad record at
// off is corruption in the middle of the data, not a torn tail.
func goodRecordAfter(w *window, off, size int64, next wire.Seq) bool {
	for p := off + recAlign; p+RecordHeaderLen <= size; p += recAlign {
		b, err := w.get(p, size, 0)
		if err != nil {
			return true // cannot prove it is only a tail: be conservative
		}
		if fr, st := decodeFrame(b); st == frameOK && fr.seq >= next {
			return true
		}
	}
	return false
}

// window is a read buffer over a file: get returns the bytes from an
// offset, refilling with positioned reads sized by the caller's want when
// the record there is not whole in the buffer.
type window struct {
	f     io.ReaderAt
	buf   []byte
	start int64    // file offset of buf[0]
	st    *ioStats // counts the bytes read; nil counts nothing
}

func (w *window) init(f io.ReaderAt, size int) {
	w.f = f
	if cap(w.buf) < size {
		w.buf = make([]byte, 0, size)
	}
	w.buf = w.buf[:0]
	w.start = 0
}

func (w *window) reset(f io.ReaderAt) { w.f, w.buf, w.start = f, w.buf[:0], 0 }

// wholeAt reports how many bytes from rel the record there needs to be
// whole in b (0 when b does not hold its header yet).
func recordNeed(b []byte) int {
	if len(b) < RecordHeaderLen {
		return 0
	}
	l := binary.LittleEndian.Uint32(b[recLenOff:])
	if l < msgFixedLen || l > maxBodyLen {
		return RecordHeaderLen // corrupt or zero: decodeFrame says so
	}
	return RecordHeaderLen + align(int(l))
}

// get returns the bytes from off up to limit (not past it): at least the
// whole record at off when the file has it. A refill reads want bytes
// from off (the whole buffer when want is 0: read-ahead for a sequential
// scan), more when the record at off is longer, and keeps the buffered
// bytes from off instead of reading them again.
func (w *window) get(off, limit int64, want int) ([]byte, error) {
	bufEnd := w.start + int64(len(w.buf))
	if off >= w.start && off <= bufEnd {
		b := w.buf[off-w.start:]
		if n := recordNeed(b); (n > 0 && n <= len(b)) || bufEnd >= limit {
			return w.buf[off-w.start : min(bufEnd, max(limit, off))-w.start], nil
		}
	}
	if want <= 0 || want > cap(w.buf) {
		want = cap(w.buf)
	}
	// Keep the bytes already buffered from off.
	keep := 0
	if off >= w.start && off < bufEnd {
		keep = copy(w.buf[:cap(w.buf)], w.buf[off-w.start:])
	}
	w.buf, w.start = w.buf[:keep], off
	for {
		need := max(want, RecordHeaderLen)
		if n := recordNeed(w.buf); n > 0 {
			need = max(need, n)
		}
		need = int(min(int64(min(need, cap(w.buf))), limit-off))
		if need <= len(w.buf) {
			return w.buf, nil
		}
		got, err := w.f.ReadAt(w.buf[len(w.buf):need], off+int64(len(w.buf)))
		w.st.read(got)
		w.buf = w.buf[:len(w.buf)+got]
		if err != nil && err != io.EOF {
			return nil, err
		}
		if got == 0 {
			return w.buf, nil // the file is shorter than limit
		}
	}
}

// loadIndex makes sure s.idx covers the whole sealed segment, scanning it
// once if it was not written by this process.
func (s *segment) loadIndex(st *ioStats) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.indexed {
		return s.bad
	}
	if s.zstd {
		return s.bad // the block index is read when the segment is opened
	}
	f, err := openRegular(s.path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("journal: open %s: %w", s.path, err)
	}
	defer f.Close()
	end := s.end.Load()
	res := scanSegment(f, st, s.path, s.hdr, end, false)
	s.idx, s.fine, s.minTime, s.maxTime, s.ended, s.sealed = res.idx, res.fine, res.minTime, res.maxTime, res.ended, res.sealed
	s.indexed = true
	if res.corrupt != nil {
		s.bad = res.corrupt
		return s.bad
	}
	if wire.Seq(s.next.Load()) != res.next {
		s.bad = &CorruptError{Path: s.path, Offset: res.end, Reason: fmt.Sprintf(
			"segment ends at sequence %d but the next segment starts at %d", res.next, s.next.Load())}
	}
	return s.bad
}

// seekIndex returns the index entry to start a scan for seq from.
func (s *segment) seekIndex(seq wire.Seq) idxEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.idx), func(i int) bool { return s.idx[i].seq > seq })
	if i == 0 {
		return idxEntry{seq: s.first, off: SegmentHeaderLen, tmax: math.MinInt64}
	}
	c := s.idx[i-1]
	end := len(s.fine)
	if i < len(s.idx) {
		end = int(s.idx[i].fine)
	}
	if int(c.fine) >= end || end > len(s.fine) {
		return c
	}
	fs := s.fine[c.fine:end]
	k := sort.Search(len(fs), func(k int) bool { return c.seq+wire.Seq(fs[k]>>16) > seq })
	if k == 0 {
		return c
	}
	return unpackFine(c, fs[k-1])
}

// seekTimeIndex returns the index entry to start a scan for the first
// record with a time of at least ns.
func (s *segment) seekTimeIndex(ns int64) idxEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.idx), func(i int) bool { return s.idx[i].tmax >= ns })
	if i == 0 {
		return idxEntry{seq: s.first, off: SegmentHeaderLen, tmax: math.MinInt64}
	}
	return s.idx[i-1]
}
