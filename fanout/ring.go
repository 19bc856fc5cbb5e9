package fanout

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
)

// mapping is a ring file mapped into memory: the header read-write (the
// wake-up words are written by readers too) and the data area.
type mapping struct {
	f        *os.File
	hdr      []byte
	data     []byte
	whole    []byte // the writer maps the file in one piece
	capacity uint64
	mask     uint64
}

func (m *mapping) u64(off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&m.hdr[off]))
}

func (m *mapping) u32(off int) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&m.hdr[off]))
}

func (m *mapping) close() error {
	var err error
	if m.whole != nil {
		err = unmapFile(m.whole)
	} else {
		if m.data != nil {
			err = unmapFile(m.data)
		}
		if m.hdr != nil {
			err = errors.Join(err, unmapFile(m.hdr))
		}
	}
	if m.f != nil {
		err = errors.Join(err, m.f.Close())
	}
	*m = mapping{}
	return err
}

// checkFile checks that f is a regular file of ours that no one else may
// write to, and returns its size.
func checkFile(path string, f *os.File) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("fanout: %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%w: %s is not a regular file", ErrNotPrivate, path)
	}
	if err := checkOwner(path, fi); err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// openMapping opens and maps an existing ring file for a reader: the
// header read-write (the wake-up words), the data area read-only.
func openMapping(path string) (*mapping, error) {
	if !supported {
		_, err := mapFile(nil, 0, 0, false)
		return nil, err
	}
	f, err := os.OpenFile(path, openReadFlags, 0)
	if err != nil {
		return nil, fmt.Errorf("fanout: open %s (is mdbus fanout running?): %w", path, err)
	}
	m := &mapping{f: f}
	size, err := checkFile(path, f)
	if err != nil {
		m.close()
		return nil, err
	}
	if size < HeaderLen {
		m.close()
		return nil, fmt.Errorf("fanout: %s: %w: %d bytes", path, ErrBadHeader, size)
	}
	if m.hdr, err = mapFile(f, 0, HeaderLen, true); err != nil {
		m.close()
		return nil, fmt.Errorf("fanout: map %s: %w", path, err)
	}
	h, err := ParseHeader(m.hdr, size)
	if err != nil {
		m.close()
		return nil, fmt.Errorf("fanout: %s: %w", path, err)
	}
	m.capacity, m.mask = h.Capacity, h.Capacity-1
	if m.data, err = mapFile(f, HeaderLen, int(h.Capacity), false); err != nil {
		m.close()
		return nil, fmt.Errorf("fanout: map %s: %w", path, err)
	}
	return m, nil
}

// Ring is the writing side of a ring file: it appends records and wakes
// the readers that sleep. One goroutine at a time may call its methods
// (the subscriber's callbacks are never concurrent); Stats and Generation
// may be called from any goroutine.
type Ring struct {
	path     string
	m        *mapping
	tail     uint64 // every record below it is complete
	intent   uint64 // the writer may write below it
	slack    uint64
	gen      uint64
	segShift uint // log2 of the segment size (capacity / NumMarks)
	origin   time.Time
	lastSeg  uint64

	tailW, intentW  *atomic.Uint64
	wakeW, sleepers *atomic.Uint32

	idBuf                      [RecordHeaderLen]byte // the last stream's header bytes
	lastID                     subscriber.StreamID
	haveID                     bool
	count                      uint64 // messages written; messages holds it as of the last 64th
	messages, wakeups, dropped atomic.Uint64
	closed                     bool
	mu                         sync.RWMutex // Close (write) against Stats (read) of the mapping
	final                      uint64       // the position at Close
}

// RingStats counts what a Ring wrote.
type RingStats struct {
	Generation uint64 // writers started on this file, this one included
	Position   uint64 // bytes written to the file since it was made
	Messages   uint64 // message records (counted in steps of 64 until Close)
	Wakeups    uint64 // times sleeping readers were woken
	Dropped    uint64 // messages too long for a record (none from a subscriber)
}

// Create opens the ring file at path for writing, creating it (and its
// directory, mode 0700) if needed, with a data area of capacity bytes (a
// power of two within [MinCapacity, MaxCapacity]; 0 for DefaultCapacity).
//
// A file already there of the same capacity is continued: the generation
// is raised (readers see that the writer restarted), positions go on from
// where the last writer stopped, and a record that writer left half
// written is covered with padding. A file of another capacity, or not a
// ring file, is replaced (its readers are told to reopen). A file held by
// a running writer is an error: one writer per file.
func Create(path string, capacity int) (*Ring, error) {
	if !supported {
		_, err := mapFile(nil, 0, 0, false)
		return nil, err
	}
	if capacity == 0 {
		capacity = DefaultCapacity
	}
	c := uint64(capacity)
	if capacity < 0 || c < MinCapacity || c > MaxCapacity || c&(c-1) != 0 {
		return nil, fmt.Errorf("fanout: capacity %d: want a power of two from %d (1 MiB) to %d (4 GiB)", capacity, MinCapacity, uint64(MaxCapacity))
	}
	if err := mkdirPrivate(filepath.Dir(path)); err != nil {
		return nil, err
	}
	r := &Ring{path: path}
	m, err := r.continueFile(c)
	if err != nil {
		return nil, err
	}
	if m == nil {
		if m, err = r.newFile(c); err != nil {
			return nil, err
		}
	}
	r.m = m
	r.tailW, r.intentW = m.u64(offTail), m.u64(offIntent)
	r.wakeW, r.sleepers = m.u32(offWake), m.u32(offSleepers)
	r.slack = min(64<<10, c/16)
	r.segShift = uint(bits.TrailingZeros64(c / NumMarks))
	r.lastSeg = ^uint64(0)
	binary.LittleEndian.PutUint32(m.hdr[offPID:], uint32(os.Getpid()))
	r.origin = time.Now()
	m.u64(offOrigin).Store(uint64(r.origin.UnixNano()))
	r.gen = m.u64(offGeneration).Add(1)
	// A writer that died between its intent and its tail may have left a
	// record half written in [tail, intent): cover it with padding before
	// the new tail makes it readable.
	r.tail, r.intent = r.tailW.Load(), r.intentW.Load()
	if r.intent < r.tail || r.intent-r.tail > c || r.intent%8 != 0 || r.tail%8 != 0 {
		m.close()
		return nil, fmt.Errorf("fanout: %s: %w: tail %d, intent %d", path, ErrCorrupt, r.tail, r.intent)
	}
	for p := r.tail; p < r.intent; {
		idx := p & m.mask
		n := min(r.intent-p, c-idx)
		putPadding(m.data[idx:], n)
		p += n
	}
	r.tail = r.intent
	r.tailW.Store(r.tail)
	m.u32(offState).Store(StateLive)
	r.wake()
	return r, nil
}

// continueFile maps an existing ring file of capacity c for writing, or
// returns nil when there is none to continue (missing, another capacity,
// not a ring file: those are marked replaced when they can be).
func (r *Ring) continueFile(c uint64) (*mapping, error) {
	f, err := os.OpenFile(r.path, openWriteFlags, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fanout: open %s: %w", r.path, err)
	}
	m := &mapping{f: f}
	size, err := checkFile(r.path, f)
	if err != nil {
		m.close()
		return nil, err
	}
	if err := lockFile(f); err != nil {
		m.close()
		if errors.Is(err, errLocked) {
			return nil, fmt.Errorf("fanout: %s: %w (one writer per ring file: stop it, or give another name)", r.path, err)
		}
		return nil, fmt.Errorf("fanout: lock %s: %w", r.path, err)
	}
	if size < HeaderLen {
		m.close()
		return nil, nil
	}
	if m.whole, err = mapFile(f, 0, int(min(size, HeaderLen+MaxCapacity)), true); err != nil {
		m.close()
		return nil, fmt.Errorf("fanout: map %s: %w", r.path, err)
	}
	m.hdr = m.whole[:HeaderLen]
	h, err := ParseHeader(m.hdr, size)
	if err != nil {
		m.close()
		return nil, nil
	}
	if h.Capacity != c {
		// Readers of the old file must move to the new one.
		m.u32(offState).Store(StateReplaced)
		m.u32(offWake).Add(1)
		futexWake(m.u32(offWake))
		m.close()
		return nil, nil
	}
	m.data = m.whole[HeaderLen:]
	m.capacity, m.mask = c, c-1
	return m, nil
}

// newFile makes a fresh ring file beside path and renames it over path,
// so that a reader never opens a file whose header is half written.
func (r *Ring) newFile(c uint64) (*mapping, error) {
	tmp := r.path + ".new-" + strconv.Itoa(os.Getpid())
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, openCreateFlags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("fanout: create %s: %w", tmp, err)
	}
	m := &mapping{f: f}
	fail := func(err error) (*mapping, error) {
		m.close()
		os.Remove(tmp)
		return nil, err
	}
	if err := f.Truncate(int64(HeaderLen + c)); err != nil {
		return fail(fmt.Errorf("fanout: size %s: %w", tmp, err))
	}
	if err := lockFile(f); err != nil {
		return fail(fmt.Errorf("fanout: lock %s: %w", tmp, err))
	}
	if m.whole, err = mapFile(f, 0, int(HeaderLen+c), true); err != nil {
		return fail(fmt.Errorf("fanout: map %s: %w", tmp, err))
	}
	m.hdr, m.data = m.whole[:HeaderLen], m.whole[HeaderLen:]
	m.capacity, m.mask = c, c-1
	putHeader(m.hdr, c)
	if err := os.Rename(tmp, r.path); err != nil {
		return fail(fmt.Errorf("fanout: rename %s to %s: %w", tmp, r.path, err))
	}
	return m, nil
}

// Path returns the ring file's path.
func (r *Ring) Path() string { return r.path }

// Generation returns the generation this writer publishes.
func (r *Ring) Generation() uint64 { return r.gen }

// Stats returns the counts so far.
func (r *Ring) Stats() RingStats {
	r.mu.RLock()
	pos := r.final
	if r.m != nil {
		pos = r.tailW.Load()
	}
	r.mu.RUnlock()
	return RingStats{Generation: r.gen, Position: pos, Messages: r.messages.Load(),
		Wakeups: r.wakeups.Load(), Dropped: r.dropped.Load()}
}

// Now returns the time to stamp a message with: ns since the ring's
// origin on the monotonic clock (one clock read, where time.Now takes two).
func (r *Ring) Now() int64 { return int64(time.Since(r.origin)) }

// Message appends a message with stamp, the time the writer received it
// (Ring.Now). m.Data is copied.
func (r *Ring) Message(m subscriber.Message, stamp int64) {
	if len(m.Data) > MaxDataLen {
		r.dropped.Add(1)
		return
	}
	rec := Record{Type: TypeMessage, Stream: m.Stream, Seq: m.Seq, Stamp: stamp, Data: m.Data}
	r.append(&rec)
	// Published in steps, so that a message costs no locked instruction
	// for a counter; Close publishes the last count.
	if r.count++; r.count%64 == 0 {
		r.messages.Store(r.count)
	}
}

// Loss appends a loss notice: readers pass it to their OnLoss.
func (r *Ring) Loss(l subscriber.Loss) {
	r.append(&Record{Type: TypeLoss, Stream: l.Stream, Seq: l.From, To: l.To})
}

// Resync appends a resync notice: readers pass it to their OnResync.
func (r *Ring) Resync(rs subscriber.Resync) {
	r.append(&Record{Type: TypeResync, Stream: rs.Stream, Seq: rs.From, To: rs.To})
}

// End appends an end of session: next is the sequence after its last
// message.
func (r *Ring) End(id subscriber.StreamID, next wire.Seq) {
	r.append(&Record{Type: TypeEnd, Stream: id, Seq: next})
}

// append writes rec at the tail. The order is the whole protocol: raise
// the intent over every byte about to be written (an atomic swap, a full
// barrier, so the record's bytes cannot be seen before it), write the
// bytes, publish them with the tail (a release store), then wake the
// readers that said they sleep.
func (r *Ring) append(rec *Record) {
	if r.closed {
		return
	}
	need := recordSpace(len(rec.Data))
	idx := r.tail & r.m.mask
	end := r.tail + need
	var pad uint64
	if idx+need > r.m.capacity {
		pad = r.m.capacity - idx
		end += pad
	}
	if end > r.intent {
		// The intent runs ahead by a slack, so that it is stored once per
		// slack bytes rather than once per record; it costs readers that
		// much of the capacity.
		r.intent = end + r.slack
		r.intentW.Swap(r.intent)
	}
	if pad > 0 {
		putPadding(r.m.data[idx:], pad)
		idx = 0
	}
	r.put(r.m.data[idx:idx+need], rec)
	if seg := (end - need) >> r.segShift; seg != r.lastSeg {
		r.lastSeg = seg
		r.m.u64(offMarks + 8*int(seg%NumMarks)).Store(end - need)
	}
	r.tail = end
	r.tailW.Store(end)
	if r.sleepers.Load() != 0 {
		r.wake()
	}
}

// put writes rec into b like putRecord, with the stream's bytes copied
// from those of the previous record when it is of the same stream.
func (r *Ring) put(b []byte, rec *Record) {
	if !r.haveID || rec.Stream != r.lastID {
		putStream(r.idBuf[:], rec.Stream)
		r.lastID, r.haveID = rec.Stream, true
	}
	length := RecordHeaderLen + len(rec.Data)
	binary.LittleEndian.PutUint32(b[recLength:], uint32(length))
	binary.LittleEndian.PutUint16(b[recType:], uint16(rec.Type))
	b[recFamily], b[recFamily+1] = r.idBuf[recFamily], r.idBuf[recFamily+1]
	binary.LittleEndian.PutUint64(b[recSeq:], uint64(rec.Seq))
	stamp := uint64(rec.Stamp)
	if rec.Type == TypeLoss || rec.Type == TypeResync {
		stamp = uint64(rec.To)
	}
	binary.LittleEndian.PutUint64(b[recStamp:], stamp)
	copy(b[recAddr:RecordHeaderLen], r.idBuf[recAddr:])
	copy(b[RecordHeaderLen:], rec.Data)
}

// wake wakes every sleeping reader. The sleepers word is set by a reader
// before it checks the tail a last time and sleeps; the writer stores the
// tail before it reads the word (both sequentially consistent), so either
// the reader sees the new tail or the writer sees it sleeping.
func (r *Ring) wake() {
	if r.sleepers.Swap(0) != 0 {
		r.wakeW.Add(1)
		futexWake(r.wakeW)
		r.wakeups.Add(1)
	}
}

// Close marks the file closed (readers wait for a restarted writer), wakes
// the readers and unmaps it. The file stays: a writer started on it again
// continues it. A second Close does nothing.
func (r *Ring) Close() error {
	if r.closed || r.m == nil {
		return nil
	}
	r.closed = true
	r.m.u32(offState).Store(StateClosed)
	r.wakeW.Add(1)
	futexWake(r.wakeW)
	r.messages.Store(r.count)
	r.mu.Lock()
	r.final = r.tail
	err := r.m.close()
	r.m = nil
	r.mu.Unlock()
	if err != nil {
		return fmt.Errorf("fanout: close %s: %w", r.path, err)
	}
	return nil
}
