package journal

import (
	"errors"
	"os"
	"time"
)

// retain deletes the oldest sealed segments of st beyond cfg.RetainBytes,
// and those whose newest record is older than cfg.RetainAge. It deletes
// from the oldest end only, so a stream stays one contiguous range; the
// newest segment is never deleted. Readers that have a deleted segment
// open keep reading it.
func (j *Journal) retain(st *stream) {
	if j.cfg.ReadOnly || (j.cfg.RetainBytes == 0 && j.cfg.RetainAge == 0) {
		return
	}
	cutoff := int64(0)
	if j.cfg.RetainAge > 0 {
		cutoff = time.Now().Add(-j.cfg.RetainAge).UnixNano()
	}
	for {
		st.mu.Lock()
		if len(st.segs) < 2 {
			st.mu.Unlock()
			return
		}
		var total int64
		for _, s := range st.segs {
			total += s.size.Load()
		}
		oldest := st.segs[0]
		st.mu.Unlock()
		drop := j.cfg.RetainBytes > 0 && total > j.cfg.RetainBytes
		if !drop && cutoff != 0 {
			if oldest.loadIndex(&j.io) == nil {
				oldest.mu.Lock()
				drop = oldest.maxTime < cutoff
				oldest.mu.Unlock()
			}
		}
		if !drop {
			return
		}
		st.mu.Lock()
		if len(st.segs) < 2 || st.segs[0] != oldest {
			st.mu.Unlock()
			continue
		}
		// Mark the new oldest segment first, so that verify tells
		// retention from a deleted segment; a crash between the two
		// leaves a marked segment and the old one, which the next
		// retention removes.
		if err := j.markRetained(st.segs[1]); err != nil {
			st.mu.Unlock()
			j.log.Warn("journal: retention could not mark the new oldest segment; keeping the old one", "path", st.segs[1].path, "err", err)
			return
		}
		st.segs = append(st.segs[:0:0], st.segs[1:]...)
		st.mu.Unlock()
		if err := os.Remove(oldest.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			j.log.Warn("journal: retention could not remove a segment", "path", oldest.path, "err", err)
		} else {
			j.log.Info("journal: retention removed a segment", "path", oldest.path,
				"first", uint64(oldest.first), "next", oldest.next.Load(), "bytes", oldest.size.Load())
		}
	}
}

// markRetained sets flagRetained in seg's header on disk (one 72-byte
// write at offset 0, synced) and in memory. Segments of format 1 have no
// such flag (verify does not check their predecessors). st.mu is held, so
// compression does not swap the file meanwhile.
func (j *Journal) markRetained(seg *segment) error {
	h := seg.header()
	if h.version == 1 || h.flags&flagRetained != 0 {
		return nil
	}
	h.flags |= flagRetained
	f, err := openRegular(seg.path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var hb [SegmentHeaderLen]byte
	if _, err := f.WriteAt(h.append(hb[:0]), 0); err != nil {
		return err
	}
	if err := fdatasync(f); err != nil {
		return err
	}
	seg.mu.Lock()
	seg.hdr = h
	seg.mu.Unlock()
	return nil
}
