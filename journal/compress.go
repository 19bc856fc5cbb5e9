package journal

import (
	"errors"
	"os"
)

// zstdIndex is the block index of a compressed segment.
type zstdIndex struct{}

// zstdCursor reads the records of a compressed segment block by block.
type zstdCursor struct {
	open bool
}

func (z *zstdCursor) openSeg(seg *segment) error {
	return errors.New("journal: compressed segments: not yet")
}
func (z *zstdCursor) seek(e idxEntry) error {
	return errors.New("journal: compressed segments: not yet")
}
func (z *zstdCursor) next() (frame, frameStatus, int64, bool, error) {
	return frame{}, frameOK, 0, false, errors.New("journal: compressed segments: not yet")
}
func (z *zstdCursor) advance(n int) {}
func (z *zstdCursor) close()        { z.open = false }

func (s *segment) openZstd(f *os.File, size int64) error {
	return &CorruptError{Path: s.path, Reason: "compressed segments are not supported yet"}
}

type compressor struct{}

func newCompressor(j *Journal) *compressor { return &compressor{} }
func (c *compressor) close()               {}

func (j *Journal) enqueue(st *stream, seg *segment) {}
func (j *Journal) enqueueSealed(st *stream)         {}
func (j *Journal) retain(st *stream)                {}
