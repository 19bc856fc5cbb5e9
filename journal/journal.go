package journal

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/mdbus/mdbus/internal/regfile"

	"github.com/mdbus/mdbus/wire"
)

// Journal is a directory of recorded streams. Open recovers every stream's
// torn tail (truncating it, logging what was cut). Methods are safe for
// concurrent use; each Writer has one user at a time.
type Journal struct {
	dir string
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	streams []*stream // oldest first
	readers map[*Reader]struct{}
	closed  bool
	torn    []TornTail
	damaged []Damage

	io   ioStats
	lock *os.File      // holds the directory's write lock; nil when ReadOnly
	comp *compressor   // nil unless cfg.Compress
	dec  *zstd.Decoder // made on first read of a compressed segment
}

// TornTail reports a torn tail that Open cut from a segment.
type TornTail struct {
	Path   string
	Offset int64 // the segment was truncated to this size
	Bytes  int64 // bytes cut
}

// stream is one stream incarnation on disk.
type stream struct {
	id      wire.StreamID
	dir     string
	created int64

	mu     sync.RWMutex // guards segs and writer
	segs   []*segment   // by first sequence
	writer *Writer
	bad    error // corruption found at open in the newest segment

	// cursor answers AppendPacket (retransmit.Source) without allocating.
	curMu sync.Mutex
	cur   *Reader
}

// Open opens (creating it if missing, unless ReadOnly) the journal in dir.
func Open(dir string, cfg Config) (*Journal, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	j := &Journal{dir: dir, cfg: cfg, log: cfg.Logger, readers: map[*Reader]struct{}{}}
	if !cfg.ReadOnly {
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(dir, dirPerm(cfg.Perm)); err != nil {
				return nil, fmt.Errorf("journal: create directory %s: %w", dir, err)
			}
			if err := os.Chmod(dir, dirPerm(cfg.Perm)); err != nil { // not masked by the umask
				return nil, fmt.Errorf("journal: create directory %s: %w", dir, err)
			}
		}
	}
	if !cfg.ReadOnly {
		lock, err := lockDir(dir, cfg.Perm)
		if err != nil {
			return nil, err
		}
		j.lock = lock
	}
	// ReadDir opens without O_NONBLOCK: look first, so that a FIFO named
	// as the journal is refused instead of blocking.
	if fi, err := os.Stat(dir); err != nil {
		j.unlock()
		return nil, fmt.Errorf("journal: open %s: %w", dir, err)
	} else if !fi.IsDir() {
		j.unlock()
		return nil, fmt.Errorf("journal: open %s: %s, not a directory: %w", dir, regfile.Kind(fi.Mode()), ErrNotRegular)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		j.unlock()
		return nil, fmt.Errorf("journal: open %s: %w", dir, err)
	}
	for _, e := range ents {
		if e.Name() == lockName {
			continue
		}
		path := filepath.Join(dir, e.Name())
		id, ok := parseStreamDir(e.Name())
		switch {
		case e.Type()&fs.ModeType != 0 && !e.IsDir():
			// Never followed: a link could point anywhere, a FIFO blocks.
			j.damage(path, id, regfile.Kind(e.Type())+" in the journal directory, where only stream directories belong; not read")
			continue
		case !e.IsDir():
			if ok {
				j.damage(path, id, "a file where a stream directory belongs; not read")
			}
			continue // somebody's notes: not the journal's
		case !ok:
			j.damage(path, id, "a directory whose name is not a stream's (SESSIONHEX_SOURCEHEX_INCARNATION); its segments are not read")
			continue
		}
		st, err := j.openStream(path, id)
		if err != nil {
			j.unlock()
			return nil, err
		}
		if st != nil {
			j.streams = append(j.streams, st)
		}
	}
	sortStreams(j.streams)
	if cfg.Compress && !cfg.ReadOnly {
		j.comp = newCompressor(j)
	}
	for _, st := range j.streams {
		j.retain(st)
		j.enqueueSealed(st)
	}
	return j, nil
}

func sortStreams(ss []*stream) {
	sort.SliceStable(ss, func(a, b int) bool {
		if ss[a].created != ss[b].created {
			return ss[a].created < ss[b].created
		}
		return ss[a].id.Incarnation < ss[b].id.Incarnation
	})
}

// streamDirName is the directory of a stream: session and source in hex (a
// session may hold any printable byte, '/' included) and the incarnation.
func streamDirName(id wire.StreamID) string {
	src := "0"
	if id.Source.IsValid() {
		b, _ := id.Source.MarshalBinary()
		src = hex.EncodeToString(b)
	}
	return hex.EncodeToString(id.Session[:]) + "_" + src + "_" + strconv.FormatUint(uint64(id.Incarnation), 10)
}

func parseStreamDir(name string) (wire.StreamID, bool) {
	var id wire.StreamID
	parts := strings.Split(name, "_")
	if len(parts) != 3 {
		return id, false
	}
	s, err := hex.DecodeString(parts[0])
	if err != nil || len(s) != wire.SessionLen {
		return id, false
	}
	copy(id.Session[:], s)
	if parts[1] != "0" {
		b, err := hex.DecodeString(parts[1])
		if err != nil || id.Source.UnmarshalBinary(b) != nil || !id.Source.IsValid() {
			return id, false
		}
	}
	inc, err := strconv.ParseUint(parts[2], 10, 32)
	if err != nil || inc == 0 {
		return id, false
	}
	id.Incarnation = uint32(inc)
	return id, true
}

// openStream loads the segments of one stream directory and recovers the
// newest one. It returns nil (and removes the directory) for a stream that
// holds no segment, as a crash between mkdir and the first header leaves.
func (j *Journal) openStream(dir string, id wire.StreamID) (*stream, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("journal: open stream %s: %w", dir, err)
	}
	st := &stream{id: id, dir: dir}
	type file struct {
		first wire.Seq
		ext   string
	}
	var files []file
	for _, e := range ents {
		name := e.Name()
		path := filepath.Join(dir, name)
		if strings.HasSuffix(name, tmpExt) {
			j.removeFile(path, "unfinished temporary file")
			continue
		}
		first, ext, ok := parseSegName(name)
		if !ok {
			j.damage(path, id, "not a segment name (20 decimal digits of its first sequence, .seg or .zst): a renamed segment? not read")
			continue
		}
		if !e.Type().IsRegular() {
			err := fmt.Errorf("journal: segment %s is %s: %w", path, regfile.Kind(e.Type()), ErrNotRegular)
			if !j.cfg.ReadOnly {
				return nil, fmt.Errorf("%w; replace it by the segment file or move it away", err)
			}
			j.damage(path, id, regfile.Kind(e.Type())+" in place of a segment; not read")
			continue
		}
		files = append(files, file{first, ext})
	}
	sort.Slice(files, func(a, b int) bool {
		if files[a].first != files[b].first {
			return files[a].first < files[b].first
		}
		return files[a].ext == segExt // .seg before .zst
	})
	for i := 0; i < len(files); i++ {
		f := files[i]
		if i+1 < len(files) && files[i+1].first == f.first {
			// Both forms: a crash after the compressed copy was renamed
			// into place, before the original was removed. Both are whole.
			j.removeFile(filepath.Join(dir, segName(f.first, zstdExt)), "duplicate of "+segName(f.first, segExt))
			files = append(files[:i+1], files[i+2:]...)
		}
		last := i == len(files)-1
		path := filepath.Join(dir, segName(f.first, f.ext))
		seg, err := j.openSegment(path, id, f.first, last)
		if err != nil {
			if !j.cfg.ReadOnly {
				return nil, err
			}
			j.damage(path, id, damageReason(err)+"; not read")
			continue
		}
		if seg == nil {
			continue
		}
		if n := len(st.segs); n > 0 {
			prev := st.segs[n-1]
			prev.next.Store(uint64(seg.first))
			if seg.first <= prev.first {
				return nil, &CorruptError{Path: seg.path, Offset: 0, Reason: "segment overlaps the one before it"}
			}
		}
		st.segs = append(st.segs, seg)
	}
	if len(st.segs) == 0 {
		if !j.cfg.ReadOnly {
			j.log.Warn("journal: removing a stream directory without segments", "dir", dir)
			_ = os.Remove(dir)
		} else {
			j.damage(dir, id, "stream directory holds no readable segment (emptied, or a crash before its first segment was written)")
		}
		return nil, nil
	}
	if h := st.segs[0].header(); h.version != 1 && h.flags&(flagOrigin|flagRetained) == 0 {
		j.damage(st.segs[0].path, id, fmt.Sprintf(
			"oldest segment was neither the stream's first nor left by retention: the segments before sequence %d are missing (deleted?)", st.segs[0].first))
	}
	st.created = st.segs[0].header().created
	// Sealed segments end at their sizes; the newest one's end is found by
	// a scan that cuts a torn tail.
	for _, s := range st.segs {
		if !s.zstd {
			s.end.Store(s.size.Load())
		}
	}
	newest := st.segs[len(st.segs)-1]
	if !newest.zstd {
		if err := j.recover(newest); err != nil {
			return nil, err
		}
		if newest.sealed && newest.bad == nil {
			// The writer seals a segment only after its successor is on
			// disk: this one's successor was removed or emptied.
			newest.bad = &CorruptError{Path: newest.path, Offset: newest.end.Load(), Reason: fmt.Sprintf(
				"segment is sealed, the stream goes on at sequence %d, but the segment after it is missing (deleted or emptied?)", newest.nextSeq())}
			j.damage(newest.path, id, newest.bad.(*CorruptError).Reason)
		}
	}
	st.bad = newest.bad
	return st, nil
}

// openSegment reads a segment's header, checks it belongs to stream id,
// and, for the stream's newest segment, scans it and cuts a torn tail. It
// returns nil for a newest segment without a complete header (a crash
// while it was being created).
func (j *Journal) openSegment(path string, id wire.StreamID, first wire.Seq, newest bool) (*segment, error) {
	f, err := openRegular(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("journal: open segment %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("journal: open segment %s: %w", path, err)
	}
	size := fi.Size()
	var hb [SegmentHeaderLen]byte
	n, _ := f.ReadAt(hb[:], 0)
	h, hst, reason := parseHeader(hb[:n])
	if hst != hdrOK {
		if newest && (hst == hdrShort || hst == hdrZero) && (size <= SegmentHeaderLen || isZeroFile(f, size)) {
			j.log.Warn("journal: removing a segment whose header was never completely written", "path", path)
			if !j.cfg.ReadOnly {
				_ = os.Remove(path)
			}
			return nil, nil
		}
		return nil, &CorruptError{Path: path, Offset: 0, Reason: reason}
	}
	if h.id.Session != id.Session {
		return nil, fmt.Errorf("journal: segment %s holds session %q, but its directory is session %q's; move it away: %w",
			path, h.id.Session.String(), id.Session.String(), ErrSession)
	}
	if h.id != id {
		return nil, fmt.Errorf("journal: segment %s holds stream %s, but its directory is stream %s's; move it away: %w",
			path, h.id, id, ErrSession)
	}
	if h.first != first {
		return nil, &CorruptError{Path: path, Offset: hdrFirstOff, Reason: fmt.Sprintf(
			"header names first sequence %d, file name %d", h.first, first)}
	}
	seg := &segment{path: path, hdr: h, first: first, zstd: h.flags&flagZstd != 0,
		minTime: math.MinInt64, maxTime: math.MinInt64}
	seg.size.Store(size)
	seg.next.Store(uint64(first))
	if seg.zstd {
		if err := seg.openZstd(f, &j.io, size); err != nil {
			return nil, err
		}
		return seg, nil
	}
	return seg, nil
}

// recover scans the newest segment of a stream, cutting a torn tail.
func (j *Journal) recover(seg *segment) error {
	path := seg.path
	flag := os.O_RDWR
	if j.cfg.ReadOnly {
		flag = os.O_RDONLY
	}
	f, err := openRegular(path, flag, 0)
	if err != nil {
		return fmt.Errorf("journal: open segment %s: %w%s", path, err, hint(err))
	}
	defer f.Close()
	size := seg.size.Load()
	res := scanSegment(f, &j.io, path, seg.hdr, size, true)
	seg.idx, seg.fine, seg.minTime, seg.maxTime, seg.ended, seg.sealed = res.idx, res.fine, res.minTime, res.maxTime, res.ended, res.sealed
	seg.end.Store(res.end)
	seg.next.Store(uint64(res.next))
	switch {
	case res.corrupt != nil:
		// Never cut acknowledged data: leave the file as it is, let
		// readers stop at the bad record and writers refuse to append.
		seg.bad = res.corrupt
		seg.end.Store(size)
		j.log.Error("journal: corrupt record in the newest segment; the stream is read-only until repaired",
			"path", path, "offset", res.corrupt.Offset, "reason", res.corrupt.Reason)
	case res.torn:
		cut := size - res.end
		j.log.Warn("journal: cutting a torn tail", "path", path, "offset", res.end, "bytes", cut)
		j.torn = append(j.torn, TornTail{Path: path, Offset: res.end, Bytes: cut})
		if !j.cfg.ReadOnly {
			if err := f.Truncate(res.end); err != nil {
				return fmt.Errorf("journal: cut torn tail of %s at offset %d: %w", path, res.end, err)
			}
			if err := f.Sync(); err != nil {
				return fmt.Errorf("journal: cut torn tail of %s: sync: %w", path, err)
			}
			seg.size.Store(res.end)
		}
	}
	seg.indexed = seg.bad == nil
	return nil
}

func isZeroFile(f *os.File, size int64) bool {
	r := io.NewSectionReader(f, 0, size)
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if !isZero(buf[:n]) {
			return false
		}
		if err != nil {
			return err == io.EOF
		}
	}
}

func (j *Journal) removeFile(path, why string) {
	if j.cfg.ReadOnly {
		return
	}
	j.log.Warn("journal: removing "+why, "path", path)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		j.log.Warn("journal: remove failed", "path", path, "err", err)
	}
}

// TornTails lists the torn tails Open cut (or, ReadOnly, would cut).
func (j *Journal) TornTails() []TornTail {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]TornTail(nil), j.torn...)
}

// Dir is the journal's directory.
func (j *Journal) Dir() string { return j.dir }

// Close closes every Writer and Reader it handed out, syncing writers.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return ErrClosed
	}
	j.closed = true
	streams := append([]*stream(nil), j.streams...)
	readers := make([]*Reader, 0, len(j.readers))
	for r := range j.readers {
		readers = append(readers, r)
	}
	j.mu.Unlock()
	var first error
	for _, st := range streams {
		st.mu.RLock()
		w := st.writer
		st.mu.RUnlock()
		if w != nil {
			if err := w.Close(); err != nil && !errors.Is(err, ErrClosed) && first == nil {
				first = err
			}
		}
		st.curMu.Lock()
		if st.cur != nil {
			st.cur.closeFile()
			st.cur = nil
		}
		st.curMu.Unlock()
	}
	for _, r := range readers {
		_ = r.Close()
	}
	if j.comp != nil {
		j.comp.close()
	}
	j.mu.Lock()
	if j.dec != nil {
		j.dec.Close()
		j.dec = nil
	}
	j.mu.Unlock()
	j.unlock()
	return first
}

func (j *Journal) isClosed() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.closed
}

// Streams lists the streams on disk, oldest first.
func (j *Journal) Streams() []StreamInfo {
	j.mu.Lock()
	streams := append([]*stream(nil), j.streams...)
	j.mu.Unlock()
	out := make([]StreamInfo, 0, len(streams))
	for _, st := range streams {
		out = append(out, st.info(&j.io))
	}
	return out
}

func (st *stream) info(io *ioStats) StreamInfo {
	st.mu.RLock()
	defer st.mu.RUnlock()
	in := StreamInfo{ID: st.id, Segments: len(st.segs)}
	if len(st.segs) == 0 {
		return in
	}
	in.First = st.segs[0].first
	newest := st.segs[len(st.segs)-1]
	in.Next = newest.nextSeq()
	for _, s := range st.segs {
		in.Bytes += s.size.Load()
		if s.zstd {
			in.Compressed++
		}
	}
	in.FirstTime = st.segs[0].firstTime(io)
	newest.mu.Lock()
	in.LastTime = newest.maxTime
	in.Ended = newest.ended
	newest.mu.Unlock()
	if in.LastTime == math.MinInt64 {
		in.LastTime = 0
		// An empty newest segment: the last time is the sealed one's.
		if n := len(st.segs); n > 1 {
			p := st.segs[n-2]
			if p.loadIndex(io) == nil {
				p.mu.Lock()
				in.LastTime = max(p.maxTime, 0)
				p.mu.Unlock()
			}
		}
	}
	return in
}

// firstTime is the time of the segment's first record, 0 if unknown.
func (s *segment) firstTime(io *ioStats) int64 {
	s.mu.Lock()
	t := s.minTime
	s.mu.Unlock()
	if t != math.MinInt64 {
		return t
	}
	if s.zstd {
		return 0
	}
	f, err := openRegular(s.path, os.O_RDONLY, 0)
	if err != nil {
		return 0
	}
	defer f.Close()
	b := make([]byte, MaxRecordLen)
	n, _ := f.ReadAt(b, SegmentHeaderLen)
	io.read(n)
	if fr, st := decodeFrame(b[:n]); st == frameOK && fr.typ == recMessage {
		s.mu.Lock()
		s.minTime = fr.ts
		s.mu.Unlock()
		return fr.ts
	}
	return 0
}

func (j *Journal) find(id wire.StreamID) *stream {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, st := range j.streams {
		if st.id == id {
			return st
		}
	}
	return nil
}

// Create starts a new incarnation of (session, source) whose first record
// will be first.
func (j *Journal) Create(session wire.Session, source netip.AddrPort, first wire.Seq) (*Writer, error) {
	if j.cfg.ReadOnly {
		return nil, fmt.Errorf("journal: create in %s: the journal was opened read-only", j.dir)
	}
	if first == wire.InvalidSeq {
		return nil, fmt.Errorf("journal: create: first sequence 0: %w", wire.ErrZeroSeq)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil, ErrClosed
	}
	id := wire.StreamID{Session: session, Source: source}
	for _, st := range j.streams {
		if st.id.Session == session && st.id.Source == source {
			id.Incarnation = max(id.Incarnation, st.id.Incarnation)
		}
	}
	id.Incarnation++
	dir := filepath.Join(j.dir, streamDirName(id))
	if err := os.Mkdir(dir, dirPerm(j.cfg.Perm)); err != nil {
		return nil, fmt.Errorf("journal: create stream %s: %w%s", id, err, hint(err))
	}
	if err := os.Chmod(dir, dirPerm(j.cfg.Perm)); err != nil {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("journal: create stream %s: %w", id, err)
	}
	created := time.Now().UnixNano()
	seg, f, err := j.createSegment(dir, segHeader{flags: flagOrigin, id: id, first: first, created: created})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := syncDir(j.dir); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: create stream %s: %w", id, err)
	}
	st := &stream{id: id, dir: dir, created: created, segs: []*segment{seg}}
	w := newWriter(j, st, seg, f)
	st.writer = w
	j.streams = append(j.streams, st)
	return w, nil
}

func hint(err error) string {
	switch {
	case errors.Is(err, fs.ErrPermission):
		return " (is the journal directory writable? open it ReadOnly to read it)"
	case errors.Is(err, fs.ErrNotExist):
		return " (was the journal directory removed?)"
	}
	return ""
}

// createSegment writes a new segment file holding only its header, synced
// with its directory.
func (j *Journal) createSegment(dir string, h segHeader) (*segment, *os.File, error) {
	h.version = FormatVersion
	path := filepath.Join(dir, segName(h.first, segExt))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, j.cfg.Perm)
	if err != nil {
		return nil, nil, fmt.Errorf("journal: create segment %s: %w%s", path, err, hint(err))
	}
	if err := f.Chmod(j.cfg.Perm); err != nil { // not masked by the umask
		f.Close()
		_ = os.Remove(path)
		return nil, nil, fmt.Errorf("journal: create segment %s: %w", path, err)
	}
	var hb [SegmentHeaderLen]byte
	if _, err := f.Write(h.append(hb[:0])); err != nil {
		f.Close()
		_ = os.Remove(path)
		return nil, nil, fmt.Errorf("journal: write header of %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		_ = os.Remove(path)
		return nil, nil, fmt.Errorf("journal: sync %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("journal: create segment %s: %w", path, err)
	}
	seg := &segment{path: path, hdr: h, first: h.first, minTime: math.MinInt64, maxTime: math.MinInt64, indexed: true}
	seg.end.Store(SegmentHeaderLen)
	seg.size.Store(SegmentHeaderLen)
	seg.next.Store(uint64(h.first))
	return seg, f, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// Resume reopens stream id for appending at its Next (after a restart).
func (j *Journal) Resume(id wire.StreamID) (*Writer, error) {
	if j.cfg.ReadOnly {
		return nil, fmt.Errorf("journal: resume %s: the journal was opened read-only", id)
	}
	if j.isClosed() {
		return nil, ErrClosed
	}
	st := j.find(id)
	if st == nil {
		return nil, fmt.Errorf("journal: resume %s: %w", id, ErrNotFound)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.writer != nil {
		return nil, fmt.Errorf("journal: resume %s: %w", id, ErrBusy)
	}
	if st.bad != nil {
		return nil, fmt.Errorf("journal: resume %s: repair it first (mdbus journal repair): %w", id, st.bad)
	}
	seg := st.segs[len(st.segs)-1]
	if seg.ended {
		return nil, fmt.Errorf("journal: resume %s: %w", id, ErrEnded)
	}
	if seg.zstd {
		return nil, fmt.Errorf("journal: resume %s: its newest segment is compressed", id)
	}
	f, err := openRegular(seg.path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("journal: resume %s: %w%s", id, err, hint(err))
	}
	if _, err := f.Seek(seg.end.Load(), io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: resume %s: %w", id, err)
	}
	w := newWriter(j, st, seg, f)
	st.writer = w
	return w, nil
}

// Latest returns the newest incarnation of (session, source); with a zero
// source, the newest incarnation of session from any source.
func (j *Journal) Latest(session wire.Session, source netip.AddrPort) (wire.StreamID, bool) {
	st := j.latest(session, source)
	if st == nil {
		return wire.StreamID{}, false
	}
	return st.id, true
}

func (j *Journal) latest(session wire.Session, source netip.AddrPort) *stream {
	j.mu.Lock()
	defer j.mu.Unlock()
	for i := len(j.streams) - 1; i >= 0; i-- { // oldest first: search from the newest
		st := j.streams[i]
		if st.id.Session == session && (!source.IsValid() || st.id.Source == source) {
			return st
		}
	}
	return nil
}

// OpenReader opens stream id for reading, positioned at its first record.
func (j *Journal) OpenReader(id wire.StreamID) (*Reader, error) {
	st := j.find(id)
	if st == nil {
		return nil, fmt.Errorf("journal: read %s: %w", id, ErrNotFound)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil, ErrClosed
	}
	r := newReader(j, st)
	j.readers[r] = struct{}{}
	return r, nil
}

func (j *Journal) forget(r *Reader) {
	j.mu.Lock()
	delete(j.readers, r)
	j.mu.Unlock()
}

func (st *stream) bounds() (first, next wire.Seq) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	if len(st.segs) == 0 {
		return 0, 0
	}
	return st.segs[0].first, st.segs[len(st.segs)-1].nextSeq()
}

// Bounds and AppendPacket make a Journal a retransmit.Source: re-requests
// for session s are answered from its newest incarnation.
func (j *Journal) Bounds(s wire.Session) (first, next wire.Seq, ok bool) {
	st := j.latest(s, netip.AddrPort{})
	if st == nil {
		return 0, 0, false
	}
	first, next = st.bounds()
	return first, next, true
}

// AppendPacket appends one downstream packet of session s starting at
// message from, as retransmit.Source documents.
func (j *Journal) AppendPacket(dst []byte, s wire.Session, from wire.Seq, count, payloadSize int) ([]byte, int, error) {
	if count <= 0 {
		return dst, 0, nil
	}
	st := j.latest(s, netip.AddrPort{})
	if st == nil {
		return dst, 0, nil
	}
	first, next := st.bounds()
	if from < first || from >= next {
		return dst, 0, nil
	}
	st.curMu.Lock()
	defer st.curMu.Unlock()
	if st.cur == nil {
		if j.isClosed() {
			return dst, 0, ErrClosed
		}
		st.cur = newReader(j, st)
	}
	r := st.cur
	// Positioned reads: a seek reads the headers of at most fineEvery
	// bytes of records before from, then about what the answer carries;
	// never the read-ahead of a sequential scan (see Stats).
	r.want = min(payloadSize, count*minFrameLen)
	if r.expect != from || r.err != nil {
		if err := r.SeekSeq(from); err != nil {
			return dst, 0, err
		}
	}
	var enc wire.Encoder
	enc.Reset(dst, s, from, payloadSize)
	k := 0
	for k < count && k < wire.MaxCount {
		// Read no further than the rest of the answer can need: a
		// framed record is longer than what it adds to the packet, and
		// at least minFrameLen.
		r.want = max(RecordHeaderLen, min(payloadSize-enc.Len(), (count-k)*minFrameLen))
		rec, err := r.peek()
		if err != nil {
			if err == io.EOF {
				break
			}
			if k == 0 {
				return dst, 0, err
			}
			break
		}
		if !enc.Fits(len(rec.Data)) {
			if k == 0 {
				return dst, 0, fmt.Errorf("journal: session %q sequence %d: %d bytes in a %d-byte payload: %w",
					s.String(), from, len(rec.Data), payloadSize, wire.ErrMessageTooLarge)
			}
			break
		}
		_ = enc.Add(rec.Data) // Fits checked
		r.advance()
		k++
	}
	if k == 0 {
		return dst, 0, nil
	}
	return enc.Bytes(), k, nil
}

// lockName is the file whose flock marks a journal open for writing.
const lockName = "LOCK"

// lockDir takes the journal's write lock: one read-write Open at a time
// across processes, because recovery cuts torn tails and a second writer
// would cut the first one's records in flight. ReadOnly opens take none.
func lockDir(dir string, perm fs.FileMode) (*os.File, error) {
	f, err := openRegular(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, perm)
	if err != nil {
		return nil, fmt.Errorf("journal: lock %s: %w%s", dir, err, hint(err))
	}
	if held, err := tryLock(f); err != nil {
		f.Close()
		if held {
			return nil, fmt.Errorf("journal: %s is open for writing elsewhere (another recorder, or mdbus journal compact/repair); open it ReadOnly to read: %w", dir, ErrLocked)
		}
		return nil, fmt.Errorf("journal: lock %s: %w", dir, err)
	}
	return f, nil
}

func (j *Journal) unlock() {
	if j.lock != nil {
		j.lock.Close() // releases the flock
		j.lock = nil
	}
}
