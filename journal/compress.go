package journal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/klauspost/compress/zstd"

	"github.com/mdbus/mdbus/wire"
)

// Compressed segment layout (after the segment header, whose flags carry
// flagZstd). Part of the on-disk format; do not change.
const (
	blkCLenOff   = 0  // uint32: compressed length
	blkULenOff   = 4  // uint32: uncompressed length
	blkCRCOff    = 8  // uint32: CRC-32C of the compressed bytes
	blkCountOff  = 12 // uint32: records in the block
	blkFirstOff  = 16 // uint64: sequence of its first message
	blockHdrLen  = 24
	idxEntryLen  = 24 // first seq uint64, block offset uint64, tmax int64
	zFooterLen   = 48
	zFooterMagic = "MDBZ"
	zFlagEnded   = 1

	// maxBlockLen caps a block's uncompressed length read from disk.
	maxBlockLen = 16<<20 + MaxRecordLen
	// decoderMaxMemory bounds what the zstd decoder may allocate for one
	// block (its default is 64 GiB).
	decoderMaxMemory = 2 * maxBlockLen
)

// zstdIndex is what a compressed segment's footer says.
type zstdIndex struct {
	idxOff int64 // end of the last block
}

// openZstd reads the footer and block index of a compressed segment.
func (s *segment) openZstd(f *os.File, st *ioStats, size int64) error {
	bad := func(off int64, why string) error { return &CorruptError{Path: s.path, Offset: off, Reason: why} }
	if size < SegmentHeaderLen+zFooterLen {
		return bad(size, "compressed segment shorter than header and footer")
	}
	var ft [zFooterLen]byte
	if _, err := f.ReadAt(ft[:], size-zFooterLen); err != nil {
		return fmt.Errorf("journal: read %s: %w", s.path, err)
	}
	st.read(len(ft))
	if string(ft[44:48]) != zFooterMagic {
		return bad(size-zFooterLen, "compressed segment footer has a bad magic (unfinished compression?)")
	}
	idxOff := int64(binary.LittleEndian.Uint64(ft[0:]))
	n := int64(binary.LittleEndian.Uint32(ft[8:]))
	if idxOff < SegmentHeaderLen || idxOff+n*idxEntryLen != size-zFooterLen {
		return bad(size-zFooterLen, "compressed segment footer: index out of range")
	}
	ib := make([]byte, n*idxEntryLen+zFooterLen-8) // bounded by the file size
	if _, err := f.ReadAt(ib, idxOff); err != nil {
		return fmt.Errorf("journal: read %s: %w", s.path, err)
	}
	st.read(len(ib))
	if crc(ib) != binary.LittleEndian.Uint32(ft[40:]) {
		return bad(idxOff, "compressed segment index CRC-32C mismatch")
	}
	s.idx = make([]idxEntry, n)
	for i := range s.idx {
		e := ib[i*idxEntryLen:]
		s.idx[i] = idxEntry{
			seq:  wire.Seq(binary.LittleEndian.Uint64(e)),
			off:  int64(binary.LittleEndian.Uint64(e[8:])),
			tmax: int64(binary.LittleEndian.Uint64(e[16:])),
		}
		if s.idx[i].off < SegmentHeaderLen || s.idx[i].off >= idxOff || (i > 0 && s.idx[i].off <= s.idx[i-1].off) {
			return bad(idxOff+int64(i*idxEntryLen), "compressed segment index entry out of range")
		}
	}
	flags := binary.LittleEndian.Uint32(ft[12:])
	s.next.Store(binary.LittleEndian.Uint64(ft[16:]))
	s.minTime = int64(binary.LittleEndian.Uint64(ft[24:]))
	s.maxTime = int64(binary.LittleEndian.Uint64(ft[32:]))
	s.ended = flags&zFlagEnded != 0
	s.zb = &zstdIndex{idxOff: idxOff}
	s.indexed = true
	return nil
}

// decoder returns the journal's zstd decoder, made on first use. DecodeAll
// is safe for concurrent use.
func (j *Journal) decoder() (*zstd.Decoder, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.dec == nil {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(2),
			zstd.WithDecoderMaxMemory(decoderMaxMemory))
		if err != nil {
			return nil, fmt.Errorf("journal: zstd decoder: %w", err)
		}
		j.dec = d
	}
	return j.dec, nil
}

// zstdCursor reads the records of a compressed segment one block at a
// time: a seek decompresses the one block holding the sequence.
type zstdCursor struct {
	open  bool
	j     *Journal
	seg   *segment
	f     *os.File
	cbuf  []byte // compressed block
	block []byte // decompressed block
	boff  int64  // file offset of the block's header
	bend  int64  // file offset after the block
	pos   int    // offset of the next record in block
}

func (z *zstdCursor) openSeg(j *Journal, seg *segment) error {
	z.close()
	f, err := openRegular(seg.path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("journal: read %s: %w", seg.path, err)
	}
	z.j, z.seg, z.f, z.open = j, seg, f, true
	z.block, z.boff, z.bend, z.pos = z.block[:0], 0, 0, 0
	return nil
}

func (z *zstdCursor) close() {
	if z.f != nil {
		z.f.Close()
		z.f = nil
	}
	z.open = false
}

// seek loads the block starting at e.off and skips to sequence e.seq
// (the block's first record when e is a block index entry).
func (z *zstdCursor) seek(e idxEntry) error {
	if e.off == SegmentHeaderLen && len(z.seg.idx) > 0 {
		e.off = z.seg.idx[0].off
	}
	return z.load(e.off)
}

// load reads and decompresses the block at off; the block already loaded
// is only rewound, so requests within one block read it once.
func (z *zstdCursor) load(off int64) error {
	if off == z.boff && z.bend != 0 {
		z.pos = 0
		return nil
	}
	z.block, z.bend, z.pos = z.block[:0], 0, 0 // nothing loaded until this load succeeds
	bad := func(why string) error { return &CorruptError{Path: z.seg.path, Offset: off, Reason: why} }
	var h [blockHdrLen]byte
	if _, err := z.f.ReadAt(h[:], off); err != nil {
		return bad("reading block header: " + err.Error())
	}
	z.j.io.read(blockHdrLen)
	clen := int64(binary.LittleEndian.Uint32(h[blkCLenOff:]))
	ulen := int(binary.LittleEndian.Uint32(h[blkULenOff:]))
	if clen == 0 || off+blockHdrLen+clen > z.seg.zb.idxOff || ulen == 0 || ulen > maxBlockLen {
		return bad("block length out of range")
	}
	if int64(cap(z.cbuf)) < clen {
		z.cbuf = make([]byte, clen)
	}
	z.cbuf = z.cbuf[:clen]
	if _, err := z.f.ReadAt(z.cbuf, off+blockHdrLen); err != nil {
		return bad("reading block: " + err.Error())
	}
	z.j.io.read(len(z.cbuf))
	z.j.io.blocks.Add(1)
	if crc(z.cbuf) != binary.LittleEndian.Uint32(h[blkCRCOff:]) {
		return bad("block CRC-32C mismatch")
	}
	dec, err := z.j.decoder()
	if err != nil {
		return err
	}
	if cap(z.block) < ulen {
		z.block = make([]byte, 0, ulen)
	}
	out, err := dec.DecodeAll(z.cbuf, z.block[:0])
	if err != nil || len(out) != ulen {
		return bad(fmt.Sprintf("block does not decompress to %d bytes: %v", ulen, err))
	}
	z.block, z.boff, z.bend, z.pos = out, off, off+blockHdrLen+int64(align(int(clen))), 0
	return nil
}

// next decodes the record at the cursor; atEnd after the segment's last.
func (z *zstdCursor) next() (fr frame, st frameStatus, at int64, atEnd bool, err error) {
	if z.pos >= len(z.block) {
		if z.bend == 0 || z.bend >= z.seg.zb.idxOff {
			if z.bend == 0 && len(z.seg.idx) > 0 {
				if err := z.load(z.seg.idx[0].off); err != nil {
					return fr, 0, 0, false, err
				}
				return z.next()
			}
			return fr, frameOK, 0, true, nil
		}
		if err := z.load(z.bend); err != nil {
			return fr, 0, 0, false, err
		}
	}
	fr, st = decodeFrame(z.block[z.pos:])
	return fr, st, z.boff, false, nil
}

func (z *zstdCursor) advance(n int) { z.pos += n }

// compressor compresses sealed segments in the background, one at a time,
// with one reused encoder. The Journal owns its goroutine; Close stops it.
type compressor struct {
	j    *Journal
	work chan compressJob
	quit chan struct{}
	done chan struct{}
}

type compressJob struct {
	st  *stream
	seg *segment
}

func newCompressor(j *Journal) *compressor {
	c := &compressor{j: j, work: make(chan compressJob, 256), quit: make(chan struct{}), done: make(chan struct{})}
	go c.loop()
	return c
}

func (c *compressor) loop() {
	defer close(c.done)
	var z zstdWriter
	defer z.close()
	for {
		select {
		case <-c.quit:
			return
		case job := <-c.work:
			if err := c.j.compress(&z, job.st, job.seg); err != nil {
				c.j.log.Error("journal: compress sealed segment", "path", job.seg.path, "err", err)
			}
		}
	}
}

func (c *compressor) close() {
	close(c.quit)
	<-c.done
}

// enqueue asks the background compressor (if any) to compress seg, just
// sealed. A full queue skips it: Compact or the next Open catches up.
func (j *Journal) enqueue(st *stream, seg *segment) {
	if j.comp == nil {
		return
	}
	select {
	case j.comp.work <- compressJob{st, seg}:
	default:
	}
}

// enqueueSealed enqueues every sealed uncompressed segment of st.
func (j *Journal) enqueueSealed(st *stream) {
	if j.comp == nil {
		return
	}
	for _, seg := range st.sealed() {
		if !seg.zstd {
			j.enqueue(st, seg)
		}
	}
}

// sealed returns the stream's segments that take no more appends: all but
// the newest, and the newest too once the end of session is recorded and
// no writer holds it.
func (st *stream) sealed() []*segment {
	st.mu.RLock()
	defer st.mu.RUnlock()
	n := len(st.segs)
	if n > 0 && st.newestSealed() {
		return append([]*segment(nil), st.segs...)
	}
	if n < 2 {
		return nil
	}
	return append([]*segment(nil), st.segs[:n-1]...)
}

// newestSealed reports whether the newest segment is final; st.mu held.
func (st *stream) newestSealed() bool {
	if st.writer != nil || st.bad != nil || len(st.segs) == 0 {
		return false
	}
	s := st.segs[len(st.segs)-1]
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// Compact compresses every sealed segment that is not compressed yet,
// synchronously, and returns how many it compressed.
func (j *Journal) Compact() (int, error) {
	if j.cfg.ReadOnly {
		return 0, fmt.Errorf("journal: compact %s: the journal was opened read-only", j.dir)
	}
	j.mu.Lock()
	streams := append([]*stream(nil), j.streams...)
	j.mu.Unlock()
	var z zstdWriter
	defer z.close()
	n := 0
	for _, st := range streams {
		for _, seg := range st.sealed() {
			if seg.zstd {
				continue
			}
			if err := j.compress(&z, st, seg); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// zstdWriter holds the reused encoder and buffers of a compressor.
type zstdWriter struct {
	enc  *zstd.Encoder
	ubuf []byte
	cbuf []byte
}

func (z *zstdWriter) close() {
	if z.enc != nil {
		z.enc.Close()
		z.enc = nil
	}
}

// compress writes seg as a compressed segment beside it (a temporary file,
// synced, renamed into place, directory synced) and then replaces it in the
// stream and removes the original. A corrupt segment is left as it is.
func (j *Journal) compress(z *zstdWriter, st *stream, seg *segment) error {
	if err := seg.loadIndex(&j.io); err != nil {
		return err
	}
	if z.enc == nil {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
		if err != nil {
			return fmt.Errorf("journal: zstd encoder: %w", err)
		}
		z.enc = enc
	}
	src, err := openRegular(seg.path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("journal: compress %s: %w", seg.path, err)
	}
	defer src.Close()
	final := filepath.Join(filepath.Dir(seg.path), segName(seg.first, zstdExt))
	tmp := final + tmpExt
	perm := j.cfg.Perm
	if fi, err := src.Stat(); err == nil {
		perm = fi.Mode().Perm() // the compressed copy keeps the segment's mode
	}
	out, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return fmt.Errorf("journal: compress %s: %w%s", seg.path, err, hint(err))
	}
	if err := out.Chmod(perm); err != nil {
		out.Close()
		_ = os.Remove(tmp)
		return fmt.Errorf("journal: compress %s: %w", seg.path, err)
	}
	ok := false
	defer func() {
		if !ok {
			out.Close()
			_ = os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(out, 1<<20)
	h := seg.header()
	h.flags |= flagZstd
	var hb [SegmentHeaderLen]byte
	bw.Write(h.append(hb[:0]))
	off := int64(SegmentHeaderLen)

	var (
		idx      []idxEntry
		win      window
		count    uint32
		firstSeq wire.Seq
		tmax     = int64(math.MinInt64)
		blkTmax  = int64(math.MinInt64)
		ended    bool
		next     = seg.first
		minTime  = int64(math.MinInt64)
	)
	blockLen := j.cfg.BlockBytes
	flush := func() error {
		if len(z.ubuf) == 0 {
			return nil
		}
		z.cbuf = z.enc.EncodeAll(z.ubuf, z.cbuf[:0])
		var bh [blockHdrLen]byte
		binary.LittleEndian.PutUint32(bh[blkCLenOff:], uint32(len(z.cbuf)))
		binary.LittleEndian.PutUint32(bh[blkULenOff:], uint32(len(z.ubuf)))
		binary.LittleEndian.PutUint32(bh[blkCRCOff:], crc(z.cbuf))
		binary.LittleEndian.PutUint32(bh[blkCountOff:], count)
		binary.LittleEndian.PutUint64(bh[blkFirstOff:], uint64(firstSeq))
		idx = append(idx, idxEntry{seq: firstSeq, off: off, tmax: blkTmax})
		bw.Write(bh[:])
		bw.Write(z.cbuf)
		var pad [recAlign]byte
		p := align(len(z.cbuf)) - len(z.cbuf)
		bw.Write(pad[:p])
		off += int64(blockHdrLen + len(z.cbuf) + p)
		z.ubuf, count = z.ubuf[:0], 0
		return nil
	}
	win.init(src, readBufLen)
	win.st = &j.io
	end := seg.end.Load()
	for roff := int64(SegmentHeaderLen); roff < end; {
		b, err := win.get(roff, end, 0)
		if err != nil {
			return fmt.Errorf("journal: compress %s: %w", seg.path, err)
		}
		fr, fst := decodeFrame(b)
		if fst != frameOK {
			return &CorruptError{Path: seg.path, Offset: roff, Reason: fst.String()}
		}
		if len(z.ubuf)+fr.n > blockLen && len(z.ubuf) > 0 {
			flush()
		}
		if len(z.ubuf) == 0 {
			firstSeq, blkTmax = fr.seq, tmax
		}
		z.ubuf = append(z.ubuf, b[:fr.n]...)
		count++
		switch fr.typ {
		case recEnd:
			ended = true
		case recSeal:
		default:
			if minTime == math.MinInt64 {
				minTime = fr.ts
			}
			tmax = max(tmax, fr.ts)
			next = fr.seq + 1
		}
		roff += int64(fr.n)
	}
	flush()
	// Index and footer.
	ib := make([]byte, 0, len(idx)*idxEntryLen+zFooterLen)
	for _, e := range idx {
		ib = binary.LittleEndian.AppendUint64(ib, uint64(e.seq))
		ib = binary.LittleEndian.AppendUint64(ib, uint64(e.off))
		ib = binary.LittleEndian.AppendUint64(ib, uint64(e.tmax))
	}
	ib = binary.LittleEndian.AppendUint64(ib, uint64(off))
	ib = binary.LittleEndian.AppendUint32(ib, uint32(len(idx)))
	var flags uint32
	if ended {
		flags |= zFlagEnded
	}
	ib = binary.LittleEndian.AppendUint32(ib, flags)
	ib = binary.LittleEndian.AppendUint64(ib, uint64(next))
	ib = binary.LittleEndian.AppendUint64(ib, uint64(minTime))
	ib = binary.LittleEndian.AppendUint64(ib, uint64(tmax))
	ib = binary.LittleEndian.AppendUint32(ib, crc(ib))
	ib = append(ib, zFooterMagic...)
	bw.Write(ib)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("journal: compress %s: write %s: %w%s", seg.path, tmp, err, hint(err))
	}
	if err := out.Sync(); err != nil {
		return fmt.Errorf("journal: compress %s: sync %s: %w", seg.path, tmp, err)
	}
	size := off + int64(len(ib))
	nseg := &segment{path: final, hdr: h, first: seg.first, zstd: true}
	if err := nseg.openZstd(out, nil, size); err != nil {
		return fmt.Errorf("journal: compress %s: the compressed copy does not read back: %w", seg.path, err)
	}
	nseg.size.Store(size)
	if err := out.Close(); err != nil {
		return fmt.Errorf("journal: compress %s: close %s: %w", seg.path, tmp, err)
	}
	ok = true

	st.mu.Lock()
	i := sort.Search(len(st.segs), func(i int) bool { return st.segs[i].first >= seg.first })
	if i == len(st.segs) || st.segs[i] != seg || (i == len(st.segs)-1 && !st.newestSealed()) || seg.header().flags != h.flags&^flagZstd {
		st.mu.Unlock()
		_ = os.Remove(tmp) // removed or marked by retention meanwhile
		return nil
	}
	if err := os.Rename(tmp, final); err != nil {
		st.mu.Unlock()
		_ = os.Remove(tmp)
		return fmt.Errorf("journal: compress %s: %w", seg.path, err)
	}
	if err := syncDir(st.dir); err != nil {
		st.mu.Unlock()
		return fmt.Errorf("journal: compress %s: %w", seg.path, err)
	}
	nseg.next.Store(seg.next.Load())
	st.segs[i] = nseg
	st.mu.Unlock()
	if err := os.Remove(seg.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("journal: compress: remove %s: %w", seg.path, err)
	}
	_ = syncDir(st.dir)
	return nil
}
