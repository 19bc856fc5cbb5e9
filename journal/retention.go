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
