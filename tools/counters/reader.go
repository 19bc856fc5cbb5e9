package counters

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/mdbus/mdbus/internal/regfile"
)

// Errors of reading a counters file. They mark input that is not a
// counters file of this version; match with errors.Is.
var (
	ErrMagic   = errors.New("counters: not a counters file (bad magic)")
	ErrVersion = errors.New("counters: unsupported version")
	ErrLayout  = errors.New("counters: bad layout")
)

// ErrClosed is returned by a second Close of a File or Reader, and by a
// Reader's Snapshot after Close.
var ErrClosed = errors.New("counters: closed")

// Header describes the process that writes a file.
type Header struct {
	PID        int
	StartTicks uint64 // the process's start time, clock ticks after boot (/proc/PID/stat)
	Created    time.Time
	Role       string
	Cmdline    string
	Interval   time.Duration
	Slots      int
	// Sampled is the time of the last sampling pass; Epoch counts passes
	// times two (odd while one writes).
	Sampled time.Time
	Epoch   uint64
	// Exhausted counts counters that found no free slot.
	Exhausted uint64
}

// Value is one slot in use.
type Value struct {
	Slot  int
	Kind  Kind
	Type  Type
	Label string
	Owner string
	Value int64
}

// Snapshot is what a reader saw of a file.
type Snapshot struct {
	Header
	Values []Value
	// Consistent reports that every value is of the same sampling pass
	// (the epoch was even and unchanged around the read). Otherwise each
	// value is still one the writer stored, but values may be of two
	// consecutive passes.
	Consistent bool
	// BadSlots counts slots whose description did not validate (a
	// corrupt file) or kept changing during the read; they are skipped.
	BadSlots int
}

// Parse reads a counters file image: the file's bytes as another process
// wrote them. It checks the header and each slot and never trusts a length
// in the data.
func Parse(b []byte) (Snapshot, error) {
	if len(b) > 0 && !aligned(b) {
		c := alignedBytes(len(b))
		copy(c, b)
		b = c
	}
	return read(b)
}

func aligned(b []byte) bool { return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%8 == 0 }

func parseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		if len(b) >= len(Magic) && string(b[:len(Magic)]) != Magic {
			return h, ErrMagic
		}
		return h, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrLayout, len(b), HeaderSize)
	}
	if string(b[offMagic:offMagic+len(Magic)]) != Magic {
		return h, ErrMagic
	}
	if v := le.Uint32(b[offVersion:]); v != Version {
		return h, fmt.Errorf("%w %d (this reader knows %d; use the mdbus that wrote it)", ErrVersion, v, Version)
	}
	if hs, ss := le.Uint32(b[offHeaderSize:]), le.Uint32(b[offSlotSize:]); hs != HeaderSize || ss != SlotSize {
		return h, fmt.Errorf("%w: header %d bytes, slots %d bytes", ErrLayout, hs, ss)
	}
	n := le.Uint32(b[offNumSlots:])
	if n > MaxSlots {
		return h, fmt.Errorf("%w: %d slots, more than %d", ErrLayout, n, MaxSlots)
	}
	if need := HeaderSize + int(n)*SlotSize; len(b) < need {
		return h, fmt.Errorf("%w: %d bytes, %d slots need %d", ErrLayout, len(b), n, need)
	}
	pid := le.Uint64(b[offPID:])
	if pid == 0 || pid > 1<<22 {
		return h, fmt.Errorf("%w: pid %d", ErrLayout, pid)
	}
	h.PID = int(pid)
	h.StartTicks = le.Uint64(b[offStartTicks:])
	h.Created = time.Unix(0, int64(le.Uint64(b[offCreated:])))
	h.Interval = time.Duration(le.Uint64(b[offInterval:]))
	h.Role = cstring(b[offRole : offRole+RoleLen])
	h.Cmdline = cstring(b[offCmdline : offCmdline+CmdlineLen])
	h.Slots = int(n)
	return h, nil
}

func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return strings.ToValidUTF8(string(b), "?")
}

// read parses b, retrying a bounded number of times for a snapshot of one
// sampling pass. b is 8-byte aligned.
func read(b []byte) (Snapshot, error) {
	h, err := parseHeader(b)
	if err != nil {
		return Snapshot{Header: h}, err
	}
	var s Snapshot
	for try := 0; ; try++ {
		e1 := load(b, offEpoch)
		s = Snapshot{Header: h, Values: s.Values[:0]}
		readSlots(b, &s)
		e2 := load(b, offEpoch)
		s.Consistent = e1 == e2 && e1%2 == 0
		if s.Consistent || try == 8 {
			s.Epoch = e2
			break
		}
		time.Sleep(time.Duration(try+1) * 50 * time.Microsecond) // a pass takes microseconds
	}
	s.Sampled = time.Unix(0, int64(load(b, offSampled)))
	s.Exhausted = load(b, offSlotsExhausted)
	return s, nil
}

func readSlots(b []byte, s *Snapshot) {
	for i := range s.Header.Slots {
		m := b[HeaderSize+i*SlotSize:][:SlotSize]
		ok := false
		for range 4 {
			q1 := load(m, slotSeq)
			if q1 == 0 {
				ok = true // never used
				break
			}
			if q1%2 == 1 {
				runtime.Gosched()
				continue
			}
			typ := Type(m[slotType])
			if typ == Free {
				ok = true
				break
			}
			ll, ol := int(m[slotLabelLen]), int(m[slotOwnerLen])
			if typ > Gauge || ll > LabelLen || ol > OwnerLen {
				break // corrupt: skip the slot
			}
			v := Value{Slot: i, Kind: Kind(le.Uint32(m[slotKind:])), Type: typ,
				Label: strings.ToValidUTF8(string(m[slotLabel:slotLabel+ll]), "?"),
				Owner: strings.ToValidUTF8(string(m[slotOwner:slotOwner+ol]), "?"),
				Value: int64(load(m, slotValue))}
			if load(m, slotSeq) != q1 {
				continue
			}
			s.Values = append(s.Values, v)
			ok = true
			break
		}
		if !ok {
			s.BadSlots++
		}
	}
}

// Reader reads a file another process writes, through a read-only
// mapping: the writer never waits for it.
type Reader struct {
	path string
	mem  []byte
}

// Open maps the counters file at path for reading. It opens only a
// regular file (never following a symbolic link, never blocking on a
// FIFO or a device) that belongs to the owner of its directory
// (ErrNotRegular, ErrForeign).
func Open(path string) (*Reader, error) {
	dirOwner := -1
	if fi, err := os.Stat(filepath.Dir(path)); err == nil {
		dirOwner = regOwner(fi)
	}
	fd, fi, err := openRegular(path, dirOwner)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	size := fi.Size()
	if size < HeaderSize || size > HeaderSize+MaxSlots*SlotSize {
		return nil, fmt.Errorf("%s: %w: %d bytes", path, ErrLayout, size)
	}
	mem, err := mapFile(fd, int(size), false)
	if err != nil {
		return nil, fmt.Errorf("counters: map %s: %w", path, err)
	}
	return &Reader{path: path, mem: mem}, nil
}

// Errors of what a directory holds besides counters files. Match with
// errors.Is.
var (
	// ErrNotRegular: a FIFO, symbolic link, device, socket or directory
	// named like a counters file. It is never opened (a FIFO would block
	// a reader, a device could act on being opened).
	ErrNotRegular = errors.New("counters: not a regular file")
	// ErrForeign: a file owned by another user than its directory's
	// owner, or naming a process that runs as another user.
	ErrForeign = errors.New("counters: foreign file")
)

// fileOwner is the uid of fi's owner, -1 if unknown.
func fileOwner(fi os.FileInfo) int {
	return regOwner(fi)
}

// openRegular opens path for reading without following a symbolic link
// or blocking (internal/regfile), and checks on the open file that it is
// a regular file owned by owner (any owner when owner is negative). The
// caller closes the file.
func openRegular(path string, owner int) (*os.File, os.FileInfo, error) {
	fd, fi, err := regfile.Open(path, os.O_RDONLY, 0)
	if e, ok := errors.AsType[*regfile.Error](err); ok {
		return nil, nil, fmt.Errorf("%w: %s is %s", ErrNotRegular, path, e.Kind)
	}
	if err != nil {
		return nil, nil, err
	}
	if u := fileOwner(fi); owner >= 0 && u != owner {
		fd.Close()
		return nil, nil, fmt.Errorf("%w: %s belongs to %s, not to the directory's owner %s", ErrForeign, path, UserName(u), UserName(owner))
	}
	return fd, fi, nil
}

// Path is the file's path.
func (r *Reader) Path() string { return r.path }

// Snapshot reads the file now. A file cut short under the mapping (by a
// hostile writer) gives an error, not a crash.
func (r *Reader) Snapshot() (s Snapshot, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("counters: read %s: %v", r.path, p)
		}
	}()
	if r.mem == nil {
		return Snapshot{}, ErrClosed
	}
	s, err = read(r.mem)
	if err != nil {
		err = fmt.Errorf("%s: %w", r.path, err)
	}
	return s, err
}

// Close unmaps the file. A second Close returns ErrClosed.
func (r *Reader) Close() error {
	if r.mem == nil {
		return ErrClosed
	}
	err := unmapFile(r.mem)
	r.mem = nil
	return err
}

// State is what a scan found a file to be.
type State uint8

// States of a scanned file.
const (
	// Live: the writing process runs.
	Live State = iota
	// Stale: the writing process is gone (or its pid now belongs to a
	// process started at another time).
	Stale
	// Unreadable: permissions (another user's file) or an I/O error.
	Unreadable
	// Invalid: not a counters file of this version.
	Invalid
	// Skipped: not a regular file (ErrNotRegular) or another user's
	// (ErrForeign); never read.
	Skipped
)

func (s State) String() string {
	return [...]string{"live", "stale", "unreadable", "invalid", "skipped"}[s]
}

// Entry is one file found by Scan.
type Entry struct {
	Path   string
	State  State
	Header Header
	// Owner is the uid of the file's owner (-1 when it could not be
	// known).
	Owner int
	Err   error // why Unreadable, Invalid or Skipped
}

// Scan lists the counters files in dir, sorted by role then pid, and says
// which are live. A missing dir is an empty list.
//
// Scan trusts nothing it finds. dir must be a directory (not a link)
// that only its owner may write to, and that owner must be the caller
// (any user for root, who sees every user's directory); a directory
// named DirPrefix+UID must belong to UID. Otherwise Scan returns
// ErrNotPrivate. Each "*.ctr" name is checked before it is opened: a
// FIFO, link, device or socket, or a file of another owner than the
// directory's, is listed as Skipped and never read (so a FIFO cannot
// block Scan); a file that names a live process running as another user
// is Skipped too (ErrForeign). Scan never blocks on what it finds.
func Scan(dir string) ([]Entry, error) {
	owner, err := checkDir(dir, readerOwner())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("counters: list %s: %w", dir, err)
	}
	var out []Entry
	for _, de := range des {
		if strings.HasSuffix(de.Name(), Ext) {
			out = append(out, scanFile(filepath.Join(dir, de.Name()), owner))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Header.Role != out[j].Header.Role {
			return out[i].Header.Role < out[j].Header.Role
		}
		if out[i].Header.PID != out[j].Header.PID {
			return out[i].Header.PID < out[j].Header.PID
		}
		return out[i].Path < out[j].Path
	})
	return out, nil
}

// scanFile reads the header of the file at p, which should belong to
// owner.
func scanFile(p string, owner int) Entry {
	e := Entry{Path: p, Owner: -1}
	e.Header.Role, e.Header.PID = nameParts(filepath.Base(p)) // all we know until the header is read
	fi, err := os.Lstat(p)
	if err != nil {
		e.State, e.Err = Unreadable, err
		return e
	}
	e.Owner = fileOwner(fi)
	if !fi.Mode().IsRegular() {
		e.State, e.Err = Skipped, fmt.Errorf("%w: %s", ErrNotRegular, regfile.Kind(fi.Mode()))
		return e
	}
	fd, _, err := openRegular(p, owner) // checks again on the open file: it may have been swapped since
	switch {
	case errors.Is(err, ErrNotRegular) || errors.Is(err, ErrForeign):
		e.State, e.Err = Skipped, err
		return e
	case err != nil:
		e.State, e.Err = Unreadable, err
		return e
	}
	b := alignedBytes(HeaderSize)
	_, err = io.ReadFull(fd, b)
	fd.Close()
	if err != nil {
		e.State, e.Err = Invalid, fmt.Errorf("%w: %v", ErrLayout, err)
		return e
	}
	h, err := parseHeaderOnly(b)
	if err != nil {
		e.State, e.Err = Invalid, err
		return e
	}
	e.Header = h
	switch {
	case !Alive(h.PID, h.StartTicks):
		e.State = Stale
	default:
		if u, ok := procOwner(h.PID); ok && e.Owner >= 0 && u != e.Owner {
			e.State, e.Err = Skipped, fmt.Errorf("%w: pid %d runs as %s, the file belongs to %s", ErrForeign, h.PID, UserName(u), UserName(e.Owner))
		}
	}
	return e
}

// procOwner is the uid that process pid runs as (the owner of /proc/PID).
func procOwner(pid int) (int, bool) {
	fi, err := os.Stat("/proc/" + strconv.Itoa(pid))
	if err != nil {
		return 0, false
	}
	u := fileOwner(fi)
	return u, u >= 0
}

// nameParts splits a file name "ROLE-PID.ctr"; zero values when it is
// not one.
func nameParts(name string) (role string, pid int) {
	base := strings.TrimSuffix(name, Ext)
	i := strings.LastIndexByte(base, '-')
	if i <= 0 {
		return "", 0
	}
	n, err := strconv.Atoi(base[i+1:])
	if err != nil || n <= 0 {
		return "", 0
	}
	return base[:i], n
}

// parseHeaderOnly checks a header without the slots that follow it.
func parseHeaderOnly(b []byte) (Header, error) {
	c := alignedBytes(HeaderSize)
	copy(c, b)
	le.PutUint32(c[offNumSlots:], 0) // the slots are not in b
	h, err := parseHeader(c)
	if err == nil {
		h.Slots = int(le.Uint32(b[offNumSlots:]))
		if h.Slots > MaxSlots {
			return h, fmt.Errorf("%w: %d slots", ErrLayout, h.Slots)
		}
	}
	return h, err
}

// Alive reports whether process pid runs and started at startTicks (clock
// ticks after boot, as /proc/PID/stat says; 0 skips that check). A pid
// reused by another process has another start time.
func Alive(pid int, startTicks uint64) bool {
	t, err := StartTicks(pid)
	if err != nil {
		return errors.Is(err, os.ErrPermission) // exists, not ours to read
	}
	return startTicks == 0 || t == startTicks
}

// StartTicks returns the start time of process pid in clock ticks after
// boot: field 22 of /proc/PID/stat.
func StartTicks(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces or
	// parentheses: the fields after it start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("counters: /proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 { // field 3 is f[0]; field 22 is f[19]
		return 0, fmt.Errorf("counters: /proc/%d/stat: %d fields", pid, len(f)+2)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// Clean removes the stale files of dir and returns their paths.
func Clean(dir string) ([]string, error) {
	es, err := Scan(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range es {
		if e.State != Stale {
			continue
		}
		if err := os.Remove(e.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return out, fmt.Errorf("counters: remove stale %s: %w", e.Path, err)
		}
		out = append(out, e.Path)
	}
	return out, nil
}
