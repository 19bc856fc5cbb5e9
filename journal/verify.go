package journal

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/mdbus/mdbus/wire"
)

// SegmentInfo describes one segment file of a stream.
type SegmentInfo struct {
	Path        string
	First, Next wire.Seq // records held: [First, Next)
	Compressed  bool
	Bytes       int64 // on disk
	Newest      bool  // the segment appends go to
}

// Segments lists the segments of stream id, oldest first.
func (j *Journal) Segments(id wire.StreamID) ([]SegmentInfo, error) {
	st := j.find(id)
	if st == nil {
		return nil, fmt.Errorf("journal: segments of %s: %w", id, ErrNotFound)
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	out := make([]SegmentInfo, 0, len(st.segs))
	for i, s := range st.segs {
		out = append(out, SegmentInfo{Path: s.path, First: s.first, Next: s.nextSeq(),
			Compressed: s.zstd, Bytes: s.size.Load(), Newest: i == len(st.segs)-1})
	}
	return out, nil
}

// Verify reads every record of every segment of stream id, checking the
// framing, each CRC and the sequence continuity within and across
// segments. It returns the first corruption of each damaged segment (none
// when the stream is intact); the error is for files it could not read.
func (j *Journal) Verify(id wire.StreamID) ([]*CorruptError, error) {
	st := j.find(id)
	if st == nil {
		return nil, fmt.Errorf("journal: verify %s: %w", id, ErrNotFound)
	}
	st.mu.RLock()
	segs := append([]*segment(nil), st.segs...)
	st.mu.RUnlock()
	var bad []*CorruptError
	for _, seg := range segs {
		ce, err := j.verifySegment(seg)
		if err != nil {
			return bad, err
		}
		if ce != nil {
			bad = append(bad, ce)
		}
	}
	return bad, nil
}

func (j *Journal) verifySegment(seg *segment) (*CorruptError, error) {
	sv, err := j.salvage(seg)
	if err != nil {
		return nil, err
	}
	return sv.firstBad, nil
}

// salvaged is what could be read back from a segment.
type salvaged struct {
	recs     []frame // good message records, in sequence order, data copied
	ended    bool
	endTime  int64
	sealed   bool // ends with a seal record
	sealTime int64
	firstBad *CorruptError
}

// salvage reads every record of seg that is intact. After a bad record it
// resynchronizes at the next aligned offset holding a valid record of a
// later sequence (in a compressed segment: the next intact block), so one
// bad record costs only itself.
func (j *Journal) salvage(seg *segment) (salvaged, error) {
	var sv salvaged
	note := func(off int64, why string) {
		if sv.firstBad == nil {
			sv.firstBad = &CorruptError{Path: seg.path, Offset: off, Reason: why}
		}
	}
	expect := seg.first
	take := func(fr frame, off int64) {
		if sv.ended || sv.sealed {
			note(off, "record after the end of session or the seal of the segment")
			return
		}
		switch fr.typ {
		case recEnd:
			sv.ended, sv.endTime = true, fr.ts
			return
		case recSeal:
			if fr.seq != expect {
				note(off, fmt.Sprintf("segment sealed at sequence %d where %d was expected", fr.seq, expect))
			}
			sv.sealed, sv.sealTime = true, fr.ts
			return
		}
		if fr.seq != expect {
			note(off, fmt.Sprintf("sequence %d where %d was expected", fr.seq, expect))
		}
		fr.data = append([]byte(nil), fr.data...)
		sv.recs = append(sv.recs, fr)
		expect = fr.seq + 1
	}
	if seg.zstd {
		var z zstdCursor
		if err := z.openSeg(j, seg); err != nil {
			return sv, err
		}
		defer z.close()
		for _, e := range seg.idx {
			if err := z.load(e.off); err != nil {
				var ce *CorruptError
				if !errors.As(err, &ce) {
					return sv, err
				}
				note(ce.Offset, ce.Reason)
				continue
			}
			for z.pos < len(z.block) {
				fr, st := decodeFrame(z.block[z.pos:])
				if st != frameOK || fr.seq < expect && fr.typ == recMessage {
					note(z.boff, fmt.Sprintf("record at offset %d of the block: %s", z.pos, st))
					break
				}
				take(fr, z.boff)
				z.pos += fr.n
			}
		}
	} else {
		b, err := readRegular(seg.path, &j.io)
		if err != nil {
			return sv, fmt.Errorf("journal: read %s: %w", seg.path, err)
		}
		end := min(int64(len(b)), seg.end.Load())
		if seg.bad != nil {
			end = int64(len(b))
		}
		for off := int64(SegmentHeaderLen); off < end; {
			fr, st := decodeFrame(b[off:end])
			if st == frameOK && (fr.typ != recMessage || fr.seq >= expect) {
				take(fr, off)
				off += int64(fr.n)
				continue
			}
			if st == frameOK {
				st = frameBadBody
			}
			note(off, st.String())
			off += recAlign
		}
	}
	if next := seg.nextSeq(); !sv.ended && expect != next && sv.firstBad == nil {
		note(seg.size.Load(), fmt.Sprintf("segment ends at sequence %d but the stream continues at %d", expect, next))
	}
	return sv, nil
}

// Range is a range of sequences, [From, To).
type Range struct{ From, To wire.Seq }

// Repair rewrites every corrupt segment of stream id. The records that
// still read back are kept; each missing range is filled with the
// messages fetch returns for it (exactly To-From of them, in order),
// timed evenly between the records around the range (the one before it
// and the one after it, in this segment or its neighbours): a paced
// replay sends them at the range's original pace, not in a burst. A
// range with a record on one side only gets that record's time; with
// none, the segment's creation time. Their packet grouping is unknown
// (PacketUnknown). Each segment is written whole to a temporary
// file, synced, renamed over the damaged one and its directory synced, so
// a crash leaves the old or the new segment, never a mix; nothing changes
// for a segment whose ranges fetch cannot fill. It returns the ranges it
// filled.
func (j *Journal) Repair(id wire.StreamID, fetch func(r Range) ([][]byte, error)) ([]Range, error) {
	if j.cfg.ReadOnly {
		return nil, fmt.Errorf("journal: repair %s: the journal was opened read-only", id)
	}
	st := j.find(id)
	if st == nil {
		return nil, fmt.Errorf("journal: repair %s: %w", id, ErrNotFound)
	}
	st.mu.RLock()
	segs := append([]*segment(nil), st.segs...)
	st.mu.RUnlock()
	var filled []Range
	for i, seg := range segs {
		sv, err := j.salvage(seg)
		if err != nil {
			return filled, err
		}
		if sv.firstBad == nil {
			continue
		}
		newest := i == len(segs)-1
		next := seg.nextSeq()
		if newest {
			// The newest segment's end is what survived after the damage.
			next = seg.first
			if n := len(sv.recs); n > 0 {
				next = sv.recs[n-1].seq + 1
			}
		}
		// The missing ranges.
		var gaps []Range
		at := seg.first
		for _, r := range sv.recs {
			if r.seq > at {
				gaps = append(gaps, Range{at, r.seq})
			}
			at = r.seq + 1
		}
		if at < next {
			gaps = append(gaps, Range{at, next})
		}
		fills := make(map[wire.Seq][][]byte, len(gaps))
		for _, g := range gaps {
			msgs, err := fetch(g)
			if err != nil {
				return filled, fmt.Errorf("journal: repair %s: fetch [%d, %d): %w", seg.path, g.From, g.To, err)
			}
			if len(msgs) != int(g.To-g.From) {
				return filled, fmt.Errorf("journal: repair %s: fetch [%d, %d) returned %d messages", seg.path, g.From, g.To, len(msgs))
			}
			fills[g.From] = msgs
		}
		before, after := int64(math.MinInt64), int64(math.MinInt64)
		if i > 0 && segs[i-1].loadIndex(&j.io) == nil {
			segs[i-1].mu.Lock()
			before = segs[i-1].maxTime
			segs[i-1].mu.Unlock()
		}
		if i+1 < len(segs) {
			if t := segs[i+1].firstTime(&j.io); t != 0 {
				after = t
			}
		}
		if err := j.rewrite(st, seg, sv, gaps, fills, next, newest, before, after); err != nil {
			return filled, err
		}
		filled = append(filled, gaps...)
		j.log.Info("journal: repaired segment", "path", seg.path, "ranges", len(gaps))
	}
	return filled, nil
}

// rewrite writes the repaired copy of seg and swaps it in.
// before and after are the times of the records just before and after
// the segment (MinInt64 when there is none).
func (j *Journal) rewrite(st *stream, seg *segment, sv salvaged, gaps []Range, fills map[wire.Seq][][]byte, next wire.Seq, newest bool, before, after int64) error {
	final := filepath.Join(st.dir, segName(seg.first, segExt))
	tmp := final + tmpExt
	h := seg.header()
	h.flags &^= flagZstd
	b := h.append(make([]byte, 0, SegmentHeaderLen))
	ts := before // time of the record before, MinInt64 if unknown
	ri := 0
	gi := 0
	for seq := seg.first; seq < next; {
		if gi < len(gaps) && gaps[gi].From == seq {
			hi := after
			if ri < len(sv.recs) {
				hi = sv.recs[ri].ts
			}
			fill := fills[seq]
			for k, m := range fill {
				b = appendMessage(b, seq+wire.Seq(k), interpolate(ts, hi, k, len(fill), h.created), m, PacketUnknown)
			}
			seq = gaps[gi].To
			gi++
			continue
		}
		r := sv.recs[ri]
		ri++
		b = appendMessage(b, r.seq, r.ts, r.data, r.mark)
		ts = r.ts
		seq++
	}
	if sv.ended {
		b = appendEnd(b, next, sv.endTime)
	} else if sv.sealed {
		b = appendSeal(b, next, sv.sealTime)
	}
	perm := j.cfg.Perm
	if fi, err := os.Lstat(seg.path); err == nil && fi.Mode().IsRegular() {
		perm = fi.Mode().Perm() // the repaired copy keeps the segment's mode
	}
	if err := writeFileSync(tmp, b, perm); err != nil {
		return fmt.Errorf("journal: repair %s: %w%s", seg.path, err, hint(err))
	}
	nseg := &segment{path: final, hdr: h, first: seg.first, minTime: math.MinInt64, maxTime: math.MinInt64}
	nseg.size.Store(int64(len(b)))
	nseg.end.Store(int64(len(b)))
	nseg.next.Store(uint64(next))
	res := scanSegment(bytesReaderAt(b), nil, final, h, int64(len(b)), false)
	if res.corrupt != nil || res.next != next {
		_ = os.Remove(tmp)
		return fmt.Errorf("journal: repair %s: the rewritten segment does not read back: %v", seg.path, res.corrupt)
	}
	nseg.idx, nseg.fine, nseg.minTime, nseg.maxTime, nseg.ended, nseg.indexed = res.idx, res.fine, res.minTime, res.maxTime, res.ended, true

	st.mu.Lock()
	defer st.mu.Unlock()
	i := sort.Search(len(st.segs), func(i int) bool { return st.segs[i].first >= seg.first })
	if i == len(st.segs) || st.segs[i] != seg || (newest && st.writer != nil) {
		_ = os.Remove(tmp)
		return fmt.Errorf("journal: repair %s: the stream changed meanwhile; run repair again", seg.path)
	}
	if err := os.Rename(tmp, final); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("journal: repair %s: %w", seg.path, err)
	}
	if seg.path != final {
		_ = os.Remove(seg.path) // the damaged compressed copy
	}
	if err := syncDir(st.dir); err != nil {
		return fmt.Errorf("journal: repair %s: %w", seg.path, err)
	}
	st.segs[i] = nseg
	if newest {
		st.bad = nil
	}
	return nil
}

type bytesReaderAt []byte

func (b bytesReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func writeFileSync(path string, b []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		_ = os.Remove(path)
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		_ = os.Remove(path)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		_ = os.Remove(path)
		return err
	}
	return f.Close()
}

// interpolate is the time of the k-th of n messages filled between the
// records timed lo and hi (MinInt64: none on that side), spread evenly
// strictly between them; with one side unknown, the other side's time,
// and with none, dflt.
func interpolate(lo, hi int64, k, n int, dflt int64) int64 {
	switch {
	case lo == math.MinInt64 && hi == math.MinInt64:
		return dflt
	case lo == math.MinInt64:
		return hi
	case hi == math.MinInt64 || hi <= lo:
		return lo
	}
	return lo + int64(float64(hi-lo)*float64(k+1)/float64(n+1))
}
