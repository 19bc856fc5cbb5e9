package fanout

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdbus/mdbus/fetch"
	"github.com/mdbus/mdbus/internal/cfgcheck"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
)

// Defaults of ReaderConfig.
const (
	DefaultSpin       = 20 * time.Microsecond
	DefaultMaxStreams = 64
	// idleCheck is the longest a reader sleeps on the futex before it
	// looks at the header again (a replaced file, Close).
	idleCheck = 100 * time.Millisecond
	// scratchLen is the most a reader copies out of the ring per batch:
	// room for the largest record. batchLen is what it copies when the
	// records are smaller.
	scratchLen = 80 << 10
	batchLen   = 16 << 10
)

// ReaderConfig configures a Reader. Path and OnMessage are required.
//
// One rule for the values of every field, here and in WriterConfig: the
// zero value means the default. A negative value means "none" or "off"
// only for the fields whose doc says "negative:" (Spin); for every other
// field a negative value is invalid and OpenReader, NewReader and
// NewWriter return an error wrapping ErrConfig that names it.
type ReaderConfig struct {
	// Path is the ring file (Path(dir, name) gives the usual one).
	Path string
	// StartSeq is the first sequence expected of every stream, as in
	// subscriber.Config: 0 joins live (the first record read of a stream
	// starts it); a positive StartSeq makes what comes before the first
	// record read of a stream a gap, fetched from the Retransmitter.
	StartSeq wire.Seq
	// Retransmitter is the re-request address (a retransmit.Server,
	// a rewinder, a recorder) that a reader asks for what it missed:
	// the history before its first record (StartSeq), and what the writer
	// overwrote before the reader read it (a lap) or never wrote (a
	// writer restart). Invalid: what is missed is reported to OnLoss.
	Retransmitter netip.AddrPort
	// Fetch tunes the re-requests (Wait, Tries, MaxPerRequest, Idle, by
	// fetch.Config's rule); Server and Session are filled in.
	Fetch fetch.Config
	// OnMessage receives every message of every stream in the file, in
	// sequence order per stream, once per sequence; Data is valid only
	// until it returns (it is a reader's own copy, never the shared
	// memory). Required.
	OnMessage func(subscriber.Message)
	// OnLoss, OnResync and OnEnd are the writer's subscriber notices,
	// passed on in order with the messages, and OnLoss also receives what
	// the reader missed and could not fetch.
	OnLoss   func(subscriber.Loss)
	OnResync func(subscriber.Resync)
	OnEnd    func(subscriber.StreamID, wire.Seq)
	// OnLap is told when the writer overwrote what the reader had not read
	// yet: the reader rejoins at the writer's position and fetches, stream
	// by stream, what it skipped.
	OnLap func(Lap)
	// OnRestart is told when a new writer took the file over (its
	// generation changed): the records lost between the two are fetched
	// like a lap's.
	OnRestart func(generation uint64)
	// OnError receives errors that do not stop the reader (a fetch that
	// failed) and the one that does (a corrupt file).
	OnError func(error)
	// Spin is how long an idle reader polls the tail before it sleeps on
	// the futex; default DefaultSpin; negative: none, never spins.
	Spin time.Duration
	// MaxStreams bounds the streams whose next sequence a reader tracks;
	// default DefaultMaxStreams. One more forgets the least recently
	// started.
	MaxStreams int
}

// withDefaults checks c and returns it with defaults applied.
func (c ReaderConfig) withDefaults() (ReaderConfig, error) {
	if c.OnMessage == nil {
		return c, fmt.Errorf("%w: ReaderConfig.OnMessage is required", ErrConfig)
	}
	if c.Path == "" {
		return c, fmt.Errorf("%w: ReaderConfig.Path is required (fanout.Path(dir, name))", ErrConfig)
	}
	if err := cfgcheck.Negative(ErrConfig, cfgcheck.F("MaxStreams", c.MaxStreams),
		cfgcheck.F("Fetch.Wait", c.Fetch.Wait), cfgcheck.F("Fetch.Tries", c.Fetch.Tries),
		cfgcheck.F("Fetch.MaxPerRequest", c.Fetch.MaxPerRequest), cfgcheck.F("Fetch.Idle", c.Fetch.Idle)); err != nil {
		return c, err
	}
	if c.Spin == 0 {
		c.Spin = DefaultSpin
	}
	c.MaxStreams = cmp.Or(c.MaxStreams, DefaultMaxStreams)
	return c, nil
}

// Lap describes a reader overtaken by the writer.
type Lap struct {
	At     uint64 // the reader's position in the file
	Behind uint64 // how far the writer was ahead, in bytes (more than the capacity)
}

// ReaderStats counts what a Reader did.
type ReaderStats struct {
	Messages   uint64 // delivered from the ring
	Fetched    uint64 // delivered from the Retransmitter
	Duplicates uint64 // records of sequences already delivered
	Lost       uint64 // messages reported to OnLoss (the writer's and the reader's own)
	Laps       uint64
	Restarts   uint64 // writer generations seen change
	Wakeups    uint64 // futex sleeps
	Generation uint64
	// Writer is what the header says of the writer: "live", "closed"
	// (it ended cleanly; a restart continues the file), "gone" (live, but
	// its process no longer exists: it crashed, and nothing is written
	// until a writer starts again) or "replaced".
	Writer   string
	Position uint64 // the reader's position in the file
	Behind   uint64 // the writer's position less the reader's, at the last look
}

type streamState struct {
	id   subscriber.StreamID
	next wire.Seq
}

// Reader reads a ring file: it delivers the writer's stream through the
// callbacks of the subscriber API, with no system call per message.
//
// A Reader made by NewReader runs its own goroutine, which calls the
// callbacks one at a time; Close stops it and waits. A Reader made by
// OpenReader runs none: the caller calls Poll (and Wait) from one
// goroutine, on which the callbacks run, and closes it from there too (Close
// unmaps the file a Poll would read). Stats may be called from any
// goroutine, and Close of a NewReader's Reader too; the callbacks must not
// call Close.
type Reader struct {
	cfg  ReaderConfig
	m    *mapping
	tail *atomic.Uint64
	intn *atomic.Uint64
	gen  *atomic.Uint64

	cursor  uint64
	seenGen uint64
	scratch []byte
	fence   uint64
	stamp   int64
	origin  uint64
	streams []streamState
	last    int
	ids     idCache
	err     error

	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex // Close against Stats' look at the mapping
	closed   bool
	stopping atomic.Bool

	messages, fetched, dups, lost, laps, restarts, wakeups, position atomic.Uint64
}

// OpenReader opens the ring file of cfg.Path for reading, joined at the
// writer's current position. It starts no goroutine: call Poll.
func OpenReader(cfg ReaderConfig) (*Reader, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := openMapping(cfg.Path)
	if err != nil {
		return nil, err
	}
	r := &Reader{cfg: cfg, scratch: make([]byte, scratchLen), streams: make([]streamState, 0, cfg.MaxStreams)}
	r.attach(m)
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

// NewReader opens the ring file like OpenReader and starts the goroutine
// that reads it.
func NewReader(cfg ReaderConfig) (*Reader, error) {
	r, err := OpenReader(cfg)
	if err != nil {
		return nil, err
	}
	r.wg.Add(1)
	go r.run()
	return r, nil
}

func (r *Reader) attach(m *mapping) {
	r.m = m
	r.tail, r.intn, r.gen = m.u64(offTail), m.u64(offIntent), m.u64(offGeneration)
	r.seenGen = r.gen.Load()
	r.origin = m.u64(offOrigin).Load()
	r.cursor = r.tail.Load()
	r.position.Store(r.cursor)
}

// Stamp returns the time the writer received the message being delivered
// (Unix ns: the writer's monotonic clock from its origin in the header),
// 0 for a fetched one. Call it from OnMessage.
func (r *Reader) Stamp() int64 {
	if r.stamp == 0 {
		return 0
	}
	return int64(r.origin) + r.stamp
}

// Poll delivers what the ring holds beyond the reader's position, up to
// one batch (16 KiB of records, or one larger record), and returns the
// messages delivered. It makes no system call unless it must fetch what it missed.
// An error (a corrupt file, ErrClosed) stops the reader: every later call
// returns it.
func (r *Reader) Poll() (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if g := r.gen.Load(); g != r.seenGen {
		r.seenGen = g
		r.origin = r.m.u64(offOrigin).Load()
		r.restarts.Add(1)
		if r.cfg.OnRestart != nil {
			r.cfg.OnRestart(g)
		}
	}
	c := r.cursor
	t := r.tail.Load()
	if t == c {
		return 0, nil
	}
	capacity := r.m.capacity
	if t < c || t-c > capacity {
		r.lapped(t)
		return 0, nil
	}
	if c%8 != 0 {
		// Positions the writer publishes are aligned; this one came from a
		// damaged header (the tail or a mark).
		r.err = fmt.Errorf("fanout: %s: %w: position %d is not aligned", r.cfg.Path, ErrCorrupt, c)
		if r.cfg.OnError != nil {
			r.cfg.OnError(r.err)
		}
		return 0, r.err
	}
	idx := c & r.m.mask
	// A batch is at most batchLen (the copy stays in the L1 cache), or
	// the first record when it is longer. Its length is read before the
	// copy and checked with it: a length the writer was overwriting only
	// sizes a copy that the intent check then throws away.
	first := uint64(binary.LittleEndian.Uint32(r.m.data[idx:]))
	n := min(t-c, capacity-idx, uint64(len(r.scratch)), max(batchLen, align8(first)))
	buf := r.scratch[:n]
	copy(buf, r.m.data[idx:idx+n])
	// The copy is good if the writer has not begun to overwrite it: it
	// writes only below its intent, and position p is overwritten by the
	// write of p + capacity.
	loadFence(&r.fence)
	if r.intn.Load() > c+capacity {
		r.lapped(t)
		return 0, nil
	}
	delivered := 0
	var off uint64
	for off < n {
		rec, size, err := parseRecord(buf[off:], capacity-idx-off, &r.ids)
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) && off > 0 {
				break // the rest of a record cut by the batch's end: next time
			}
			if errors.Is(err, io.ErrUnexpectedEOF) {
				// At the start of a batch the copy holds all the tail
				// published, up to the end of the data area, and room for
				// the largest record: a record cut there runs past the tail.
				err = fmt.Errorf("%w: runs past the tail %d", ErrCorrupt, t)
			}
			r.err = fmt.Errorf("fanout: %s at position %d: %w", r.cfg.Path, c+off, err)
			if r.cfg.OnError != nil {
				r.cfg.OnError(r.err)
			}
			return delivered, r.err
		}
		off += size
		if rec.Type != TypePadding {
			delivered += r.handle(&rec)
		}
		if r.stopping.Load() {
			break
		}
	}
	r.cursor = c + off
	r.position.Store(r.cursor)
	r.messages.Add(uint64(delivered))
	return delivered, nil
}

// lapped rejoins the ring after the writer overwrote what the reader had
// not read: at the oldest record start (a segment mark) that is still
// two segments clear of the writer's intent, or at the tail when there is
// none. Each stream's next sequence stays: the next record of each stream
// shows what was skipped, and that is fetched. Should the writer overwrite
// the rejoin point before the reader reads it, the copy's check finds it
// and this runs again.
func (r *Reader) lapped(t uint64) {
	r.laps.Add(1)
	if r.cfg.OnLap != nil {
		r.cfg.OnLap(Lap{At: r.cursor, Behind: t - r.cursor})
	}
	capacity := r.m.capacity
	seg := capacity / NumMarks
	intent, tail := r.intn.Load(), r.tail.Load()
	best := tail
	if intent+2*seg > capacity {
		low := intent + 2*seg - capacity
		for k := range NumMarks {
			if m := r.m.u64(offMarks + 8*k).Load(); m >= low && m < best && m%8 == 0 {
				best = m
			}
		}
	}
	r.cursor = best
	r.position.Store(r.cursor)
}

// stream finds (or starts) the state of id; first is the first sequence
// its record names.
func (r *Reader) stream(id subscriber.StreamID, first wire.Seq) *streamState {
	if r.last < len(r.streams) && r.streams[r.last].id == id {
		return &r.streams[r.last]
	}
	for i := range r.streams {
		if r.streams[i].id == id {
			r.last = i
			return &r.streams[i]
		}
	}
	if len(r.streams) == r.cfg.MaxStreams {
		r.streams = append(r.streams[:0], r.streams[1:]...)
	}
	next := first
	if r.cfg.StartSeq > 0 {
		next = r.cfg.StartSeq
	}
	r.streams = append(r.streams, streamState{id: id, next: next})
	r.last = len(r.streams) - 1
	return &r.streams[r.last]
}

func (r *Reader) forget(id subscriber.StreamID) {
	for i := range r.streams {
		if r.streams[i].id == id {
			r.streams = append(r.streams[:i], r.streams[i+1:]...)
			r.last = 0
			return
		}
	}
}

// handle delivers one record and returns the messages delivered from the
// ring (fetched ones are counted apart).
func (r *Reader) handle(rec *Record) int {
	st := r.stream(rec.Stream, rec.Seq)
	switch rec.Type {
	case TypeMessage:
		if rec.Seq < st.next {
			r.dups.Add(1)
			return 0
		}
		if rec.Seq > st.next {
			r.catchUp(st, rec.Seq)
		}
		r.stamp = rec.Stamp
		r.cfg.OnMessage(subscriber.Message{Stream: rec.Stream, Seq: rec.Seq, Data: rec.Data})
		st.next = rec.Seq + 1
		return 1
	case TypeLoss, TypeResync:
		if rec.To <= st.next {
			return 0
		}
		if rec.Seq > st.next {
			r.catchUp(st, rec.Seq)
		}
		from := max(rec.Seq, st.next)
		st.next = rec.To
		if rec.Type == TypeLoss {
			r.lost.Add(uint64(rec.To - from))
			if r.cfg.OnLoss != nil {
				r.cfg.OnLoss(subscriber.Loss{Stream: rec.Stream, From: from, To: rec.To})
			}
		} else if r.cfg.OnResync != nil {
			r.cfg.OnResync(subscriber.Resync{Stream: rec.Stream, From: from, To: rec.To})
		}
	case TypeEnd:
		if rec.Seq > st.next {
			r.catchUp(st, rec.Seq)
		}
		id := rec.Stream
		r.forget(id)
		if r.cfg.OnEnd != nil {
			r.cfg.OnEnd(id, rec.Seq)
		}
	}
	return 0
}

// catchUp fetches [st.next, to) from the Retransmitter and delivers it;
// what it cannot fetch is reported lost. Afterwards st.next is to.
func (r *Reader) catchUp(st *streamState, to wire.Seq) {
	id, from := st.id, st.next
	if r.cfg.Retransmitter.IsValid() {
		fc := r.cfg.Fetch
		fc.Server, fc.Session = r.cfg.Retransmitter, id.Session
		r.stamp = 0
		got, err := fetch.Stream(r.ctx, fc, from, to, func(seq wire.Seq, msg []byte) error {
			r.cfg.OnMessage(subscriber.Message{Stream: id, Seq: seq, Data: msg})
			r.fetched.Add(1)
			return nil
		})
		from = max(from, got)
		if err != nil && r.ctx.Err() == nil && r.cfg.OnError != nil {
			r.cfg.OnError(fmt.Errorf("fanout: catch up %s [%d, %d) from %s: %w", id, st.next, to, r.cfg.Retransmitter, err))
		}
	}
	if from < to && r.ctx.Err() == nil {
		r.lost.Add(uint64(to - from))
		if r.cfg.OnLoss != nil {
			r.cfg.OnLoss(subscriber.Loss{Stream: id, From: from, To: to})
		}
	}
	st.next = to
}

// Wait blocks until the writer publishes past the reader's position, the
// file changes hands, ctx ends, or a while passes (callers poll again
// anyway): it spins for Spin, then sleeps on the futex in the header.
func (r *Reader) Wait(ctx context.Context) {
	c := r.cursor
	if r.cfg.Spin > 0 {
		start := time.Now()
		for i := 0; ; i++ {
			if r.tail.Load() != c {
				return
			}
			if i%64 == 63 {
				if time.Since(start) > r.cfg.Spin {
					break
				}
				runtime.Gosched()
			}
		}
	}
	if ctx.Err() != nil {
		return
	}
	wakeW, sleepers := r.m.u32(offWake), r.m.u32(offSleepers)
	sleepers.Store(1)
	v := wakeW.Load()
	if r.tail.Load() != c || ctx.Err() != nil {
		return
	}
	r.wakeups.Add(1)
	futexWait(wakeW, v, idleCheck)
	if r.m.u32(offState).Load() == StateReplaced {
		r.reopen()
	}
}

// reopen moves to the file that replaced the one mapped (a writer of
// another capacity), joined at its writer's position; each stream's
// next sequence stays, so what was skipped is fetched.
func (r *Reader) reopen() {
	m, err := openMapping(r.cfg.Path)
	if err != nil {
		if r.cfg.OnError != nil {
			r.cfg.OnError(err)
		}
		return
	}
	if m.u32(offState).Load() == StateReplaced {
		m.close() // the path still names the old file: the new one is not renamed in yet
		return
	}
	r.mu.Lock()
	old := r.m
	r.attach(m)
	r.mu.Unlock()
	old.close()
	r.restarts.Add(1)
	if r.cfg.OnRestart != nil {
		r.cfg.OnRestart(r.seenGen)
	}
}

func (r *Reader) run() {
	defer r.wg.Done()
	for r.ctx.Err() == nil {
		n, err := r.Poll()
		if err != nil {
			<-r.ctx.Done()
			return
		}
		if n == 0 && r.tail.Load() == r.cursor {
			r.Wait(r.ctx)
		}
	}
}

// ErrClosed is returned by a closed Reader's Poll.
var ErrClosed = errors.New("fanout: reader closed")

// Close stops the reader's goroutine (if any), waits for it and unmaps the
// file. A second Close does nothing and returns nil.
func (r *Reader) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.stopping.Store(true)
	r.cancel()
	// Wake our own sleeper: bumping the word makes its futex wait return
	// at once (other readers of the file wake too, look, and sleep again).
	r.m.u32(offWake).Add(1)
	futexWake(r.m.u32(offWake))
	r.mu.Unlock()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = ErrClosed
	}
	if err := r.m.close(); err != nil {
		return fmt.Errorf("fanout: close %s: %w", r.cfg.Path, err)
	}
	return nil
}

// Stats returns the counts so far and the writer's state (one kill(2)
// with signal 0 to see whether its process is alive).
func (r *Reader) Stats() ReaderStats {
	s := ReaderStats{Messages: r.messages.Load(), Fetched: r.fetched.Load(), Duplicates: r.dups.Load(),
		Lost: r.lost.Load(), Laps: r.laps.Load(), Restarts: r.restarts.Load(), Wakeups: r.wakeups.Load(),
		Position: r.position.Load()}
	r.mu.Lock()
	if !r.closed {
		s.Generation = r.gen.Load()
		switch r.m.u32(offState).Load() {
		case StateLive:
			s.Writer = "live"
			if !processAlive(int(binary.LittleEndian.Uint32(r.m.hdr[offPID:]))) {
				s.Writer = "gone"
			}
		case StateClosed:
			s.Writer = "closed"
		case StateReplaced:
			s.Writer = "replaced"
		}
		if t := r.tail.Load(); t > s.Position {
			s.Behind = t - s.Position
		}
	}
	r.mu.Unlock()
	return s
}
