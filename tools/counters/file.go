package counters

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Ext is the file name extension of counters files.
const Ext = ".ctr"

// DefaultInterval is the sampling interval when Config.Interval is 0.
const DefaultInterval = 100 * time.Millisecond

// ErrConfig marks a Config that Create refuses. Match with errors.Is.
var ErrConfig = errors.New("counters: invalid config")

// Config of a counters file. The zero value is the default: a file under
// DefaultDir() named after the role and the process id, sampled every
// 100 ms.
//
// One rule for the values of every field: the zero value means the
// default. A negative value means "none" only for the fields whose doc
// says "negative:" (Interval); for every other field a negative value is
// invalid and Create returns an error wrapping ErrConfig that names it.
type Config struct {
	// Dir is the directory of the file (default DefaultDir()), created
	// mode 0700 if missing. It must belong to this user and be writable
	// by nobody else (ErrNotPrivate otherwise).
	Dir string
	// Role names the process's role ("pub", "sub", "rewind"; default
	// "mdbus"), in the file name and header. At most RoleLen bytes.
	Role string
	// Slots is the number of counter slots (default DefaultSlots, at most
	// MaxSlots).
	Slots int
	// Off keeps the counters in this process's memory only: no file, so
	// nothing outside can read them, but the Prometheus handler and
	// Snapshot still work.
	Off bool
	// Interval is the sampling interval of the functions given to Sample
	// (default DefaultInterval; negative: no sampling goroutine, only
	// SampleNow).
	Interval time.Duration
	// Args is the command line recorded in the header (default os.Args).
	Args []string
}

func (c Config) withDefaults() (Config, error) {
	if c.Dir == "" {
		c.Dir = DefaultDir()
	}
	if c.Role == "" {
		c.Role = "mdbus"
	}
	if c.Slots == 0 {
		c.Slots = DefaultSlots
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Args == nil {
		c.Args = os.Args
	}
	switch {
	case c.Slots < 1 || c.Slots > MaxSlots:
		return c, fmt.Errorf("%w: Slots %d: want 1 to %d", ErrConfig, c.Slots, MaxSlots)
	case len(c.Role) > RoleLen || strings.ContainsAny(c.Role, "/\x00"):
		return c, fmt.Errorf("%w: Role %q: want at most %d bytes, no '/' or NUL", ErrConfig, c.Role, RoleLen)
	}
	return c, nil
}

// File is a process's counters: a memory-mapped file (or, with
// Config.Off, private memory) of fixed slots.
//
// Values are written by one writer per slot: the sampling goroutine for
// slots set from Sample functions, or the one goroutine that owns a slot
// it sets inline. Add, Free, Sample, Snapshot and Close are safe for
// concurrent use.
type File struct {
	cfg  Config
	mem  []byte
	path string // "" with Config.Off

	mu        sync.Mutex // guards slot allocation and descriptions, samplers
	free      []int      // freed slots, reused first
	next      int        // slots below next have been used
	samplers  []func(now time.Time)
	closed    bool
	closeOnce sync.Once

	stop chan struct{}
	done chan struct{}
	pass sync.Mutex // one sampling pass at a time
}

// Create creates the counters file of this process and starts sampling.
// Close removes it.
func Create(cfg Config) (*File, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	size := HeaderSize + cfg.Slots*SlotSize
	f := &File{cfg: cfg}
	if cfg.Off {
		f.mem = alignedBytes(size)
	} else {
		if err := mkdirPrivate(cfg.Dir); err != nil {
			return nil, fmt.Errorf("counters: %w (set another directory with --counters-dir, or turn counters off with --counters=false)", err)
		}
		f.path = filepath.Join(cfg.Dir, fmt.Sprintf("%s-%d%s", cfg.Role, os.Getpid(), Ext))
		os.Remove(f.path) // a file of an earlier process that had our pid
		fd, err := os.OpenFile(f.path, openCreateFlags, 0o600)
		if err != nil {
			return nil, fmt.Errorf("counters: %w (set another directory with --counters-dir, or turn counters off with --counters=false)", err)
		}
		defer fd.Close()
		if err := fd.Truncate(int64(size)); err != nil {
			os.Remove(f.path)
			return nil, fmt.Errorf("counters: size %s: %w", f.path, err)
		}
		f.mem, err = mapFile(fd, size, true)
		if err != nil {
			os.Remove(f.path)
			return nil, fmt.Errorf("counters: map %s: %w", f.path, err)
		}
	}
	f.writeHeader()
	if cfg.Interval > 0 {
		f.stop, f.done = make(chan struct{}), make(chan struct{})
		go f.sampleLoop()
	}
	return f, nil
}

func (f *File) writeHeader() {
	m := f.mem
	copy(m[offMagic:], Magic)
	le.PutUint32(m[offVersion:], Version)
	le.PutUint32(m[offHeaderSize:], HeaderSize)
	le.PutUint32(m[offSlotSize:], SlotSize)
	le.PutUint32(m[offNumSlots:], uint32(f.cfg.Slots))
	pid := os.Getpid()
	le.PutUint64(m[offPID:], uint64(pid))
	ticks, _ := StartTicks(pid)
	le.PutUint64(m[offStartTicks:], ticks)
	le.PutUint64(m[offCreated:], uint64(time.Now().UnixNano()))
	le.PutUint64(m[offInterval:], uint64(f.cfg.Interval))
	copy(m[offRole:offRole+RoleLen], f.cfg.Role)
	cmd := strings.Join(f.cfg.Args, " ")
	if len(cmd) > CmdlineLen {
		cmd = cmd[:CmdlineLen]
	}
	copy(m[offCmdline:offCmdline+CmdlineLen], cmd)
}

// Path is the file's path, "" with Config.Off.
func (f *File) Path() string { return f.path }

// Slot is one counter. Its methods are cheap atomic operations that never
// allocate; each slot has one writer.
type Slot struct {
	v    *atomic.Uint64
	idx  int // -1: detached (no slot was free)
	kind Kind
}

// Set stores v.
func (s *Slot) Set(v int64) { s.v.Store(uint64(v)) }

// SetUint stores v (wrapping above 2^63-1, which no counter reaches).
func (s *Slot) SetUint(v uint64) { s.v.Store(v) }

// Add adds d; with one writer it is as cheap as Set.
func (s *Slot) Add(d int64) { s.v.Add(uint64(d)) }

// Value is the value last stored.
func (s *Slot) Value() int64 { return int64(s.v.Load()) }

// Detached reports that the file had no free slot: the counter works but
// nothing outside sees it (the header's exhausted count says so).
func (s *Slot) Detached() bool { return s.idx < 0 }

// Add allocates a slot for a counter of kind k, with label and owner
// (truncated to LabelLen and OwnerLen bytes). typ Free means the kind's
// own type. When every slot is taken it returns a detached slot and counts
// it in the header, so callers never check.
func (f *File) Add(k Kind, typ Type, label, owner string) *Slot {
	if typ == Free {
		typ = k.Type()
		if typ == Free {
			typ = Gauge
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	i := -1
	switch {
	case f.closed:
	case len(f.free) > 0:
		i = f.free[len(f.free)-1]
		f.free = f.free[:len(f.free)-1]
	case f.next < f.cfg.Slots:
		i = f.next
		f.next++
	}
	if i < 0 {
		word(f.mem, offSlotsExhausted).Add(1)
		return &Slot{v: new(atomic.Uint64), idx: -1, kind: k}
	}
	base := HeaderSize + i*SlotSize
	m := f.mem[base : base+SlotSize]
	seq := word(m, slotSeq)
	seq.Add(1) // odd: changing
	label, owner = clip(label, LabelLen), clip(owner, OwnerLen)
	le.PutUint32(m[slotKind:], uint32(k))
	m[slotType] = byte(typ)
	m[slotLabelLen], m[slotOwnerLen] = byte(len(label)), byte(len(owner))
	clear(m[slotLabel:])
	copy(m[slotLabel:], label)
	copy(m[slotOwner:], owner)
	word(m, slotValue).Store(0)
	seq.Add(1)
	return &Slot{v: word(m, slotValue), idx: i, kind: k}
}

// Free gives s's slot back for reuse (a stream that went away). s must
// not be used afterwards.
func (f *File) Free(s *Slot) {
	if s == nil || s.idx < 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	m := f.mem[HeaderSize+s.idx*SlotSize:][:SlotSize]
	seq := word(m, slotSeq)
	seq.Add(1)
	m[slotType] = byte(Free)
	seq.Add(1)
	f.free = append(f.free, s.idx)
	s.idx = -1
	s.v = new(atomic.Uint64)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// Sample registers fn to run on every sampling pass, on the sampling
// goroutine: it copies a role's Stats snapshot into its slots. fn may call
// Add and Free.
func (f *File) Sample(fn func(now time.Time)) {
	f.mu.Lock()
	f.samplers = append(f.samplers, fn)
	f.mu.Unlock()
}

// SampleNow runs one sampling pass at once, e.g. before a final summary, so
// that the file shows the final values.
func (f *File) SampleNow() {
	f.pass.Lock()
	defer f.pass.Unlock()
	f.mu.Lock()
	fns := f.samplers
	closed := f.closed
	f.mu.Unlock()
	if closed {
		return
	}
	now := time.Now()
	ep := word(f.mem, offEpoch)
	ep.Add(1) // odd: a pass is writing
	for _, fn := range fns {
		fn(now)
	}
	word(f.mem, offSampled).Store(uint64(now.UnixNano()))
	ep.Add(1)
}

func (f *File) sampleLoop() {
	defer close(f.done)
	t := time.NewTicker(f.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
			f.SampleNow()
		}
	}
}

// Snapshot reads every slot in use, as another process would.
func (f *File) Snapshot() Snapshot {
	f.mu.Lock() // descriptions are written under mu: read them under it
	defer f.mu.Unlock()
	s, _ := read(f.mem)
	return s
}

// Close stops sampling and removes the file; its memory stays mapped, so
// slots kept by a role stay harmless. A second Close waits for the first
// and returns ErrClosed.
func (f *File) Close() error {
	err := ErrClosed
	f.closeOnce.Do(func() { err = f.close() })
	return err
}

func (f *File) close() error {
	if f.stop != nil {
		close(f.stop)
		<-f.done
	}
	f.pass.Lock()
	defer f.pass.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	if f.path == "" {
		return nil
	}
	// The mapping stays: a Slot kept by a role after Close must not fault.
	// Its memory goes with the process.
	if err := os.Remove(f.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("counters: close: %w", err)
	}
	return nil
}
