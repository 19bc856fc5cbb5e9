package resume

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mdbus/mdbus/internal/cfgcheck"
	"github.com/mdbus/mdbus/wire"
)

// Defaults of CheckpointConfig.
const (
	DefaultInterval = 100 * time.Millisecond
	// MaxStreams bounds the streams a checkpoint holds (and loads).
	MaxStreams = 4096
	// maxFile bounds the checkpoint file read at open.
	maxFile = 1 << 20
	// MaxToken bounds the application token saved with the positions.
	MaxToken = 4096
)

// checkpointMagic opens a checkpoint file. Part of the file format; do
// not change.
const checkpointMagic = "mdbus-checkpoint 1\n"

// ErrCheckpoint wraps every unreadable checkpoint file.
var ErrCheckpoint = errors.New("resume: bad checkpoint file")

// ErrClosed is returned by a second Close of a Checkpoint.
var ErrClosed = errors.New("resume: closed")

// CheckpointConfig tunes a Checkpoint. The zero value of every field is its
// default; a negative Interval is refused (see Config's rule).
type CheckpointConfig struct {
	// Interval is the least time between two saves while messages are
	// delivered: default DefaultInterval (100 ms). It bounds both the write
	// rate and how much is delivered again after a crash.
	Interval time.Duration
	// Flush, if set, is called right before each snapshot, on the
	// goroutine that delivers messages: the application makes what it
	// did with the messages so far visible (flushes its output) and
	// returns a token describing it (an output offset), saved atomically
	// with the positions. On restart Token returns it, so the application
	// can cut its output back to exactly the checkpointed messages: that
	// is what makes delivery exactly-once across a crash.
	Flush func() ([]byte, error)
}

// position is where a stream stands.
type position struct {
	source netip.AddrPort
	next   wire.Seq // the sequence after the last delivered one
}

// Checkpoint records, per session, the sequence after the last message
// delivered (and the source it came from), and writes it to a file
// atomically (temporary file, fsync, rename, fsync of the directory) at
// most once per Interval while messages are delivered, and on Close.
//
// # Guarantee
//
// The file always holds a complete snapshot, never a torn one. A restart
// resumes at the snapshot, so messages delivered after it are delivered
// again: at-least-once. An application that keeps its effects in step with
// the snapshot (Flush returns the output offset, and on restart it cuts
// its output back to Token) gets exactly-once: the output then holds
// exactly the checkpointed messages and the resumed stream continues right
// after them. A process crash (SIGKILL) loses nothing acknowledged by the
// rename; a machine crash loses at most the last Interval, since both the
// file and its directory are fsynced.
//
// A save runs on the delivering goroutine (inside Delivered): it writes
// the small file and fsyncs it and its directory, typically well under a
// millisecond to a few milliseconds, once per Interval; the subscriber's
// socket buffer and NAK recovery cover the pause.
//
// Delivered, SetFlush and Save are called by the one goroutine that
// delivers messages; Position and Token may be called from any goroutine.
type Checkpoint struct {
	path string
	cfg  CheckpointConfig

	mu        sync.Mutex
	streams   map[wire.Session]position
	token     []byte
	last      time.Time // last snapshot
	dirty     bool
	buf       bytes.Buffer
	err       error // first save error, latched
	closeOnce sync.Once
}

// OpenCheckpoint loads the checkpoint at path, or starts an empty one when
// the file does not exist. A file that exists but is not a valid
// checkpoint is an error wrapping ErrCheckpoint (delete it to start over).
func OpenCheckpoint(path string, cfg CheckpointConfig) (*Checkpoint, error) {
	if err := cfgcheck.Negative(ErrConfig, cfgcheck.F("Interval", cfg.Interval)); err != nil {
		return nil, err
	}
	cfg.Interval = cmp.Or(cfg.Interval, DefaultInterval)
	c := &Checkpoint{path: path, cfg: cfg, streams: map[wire.Session]position{}, last: time.Now()}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("resume: open checkpoint: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, fmt.Errorf("resume: read checkpoint %s: %w", path, err)
	}
	if err := c.decode(b); err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrCheckpoint, path, err)
	}
	return c, nil
}

// SetFlush sets CheckpointConfig.Flush (before the first delivery).
func (c *Checkpoint) SetFlush(f func() ([]byte, error)) {
	c.mu.Lock()
	c.cfg.Flush = f
	c.mu.Unlock()
}

// Position returns where session stood: the sequence after the last
// message delivered and the source it came from.
func (c *Checkpoint) Position(s wire.Session) (source netip.AddrPort, next wire.Seq, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.streams[s]
	return p.source, p.next, ok
}

// Token returns the application token of the last snapshot (nil if none).
func (c *Checkpoint) Token() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.token)
}

// Delivered records that message seq of session s from source was
// delivered, and saves a snapshot when Interval has passed since the last.
// It returns the latched save error, if any.
func (c *Checkpoint) Delivered(s wire.Session, source netip.AddrPort, seq wire.Seq) error {
	c.mu.Lock()
	if _, ok := c.streams[s]; !ok && len(c.streams) >= MaxStreams {
		c.mu.Unlock()
		return fmt.Errorf("resume: checkpoint holds %d sessions already", MaxStreams)
	}
	c.streams[s] = position{source: source, next: seq + 1}
	c.dirty = true
	due := time.Since(c.last) >= c.cfg.Interval
	err := c.err
	c.mu.Unlock()
	if due && err == nil {
		return c.Save()
	}
	return err
}

// Forget drops session s (its end of session was delivered and a new
// incarnation should start from its beginning).
func (c *Checkpoint) Forget(s wire.Session) {
	c.mu.Lock()
	delete(c.streams, s)
	c.dirty = true
	c.mu.Unlock()
}

// Save writes a snapshot now (calling Flush first).
func (c *Checkpoint) Save() error {
	var tok []byte
	c.mu.Lock()
	flush := c.cfg.Flush
	c.mu.Unlock()
	if flush != nil {
		t, err := flush()
		if err != nil {
			return c.latch(fmt.Errorf("resume: checkpoint flush: %w", err))
		}
		if len(t) > MaxToken {
			return c.latch(fmt.Errorf("resume: checkpoint token of %d bytes (at most %d)", len(t), MaxToken))
		}
		tok = t
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if flush != nil {
		c.token = append(c.token[:0], tok...)
	}
	c.last = time.Now()
	c.dirty = false
	c.encode(&c.buf)
	if err := writeAtomic(c.path, c.buf.Bytes()); err != nil {
		if c.err == nil {
			c.err = err
		}
		return err
	}
	return nil
}

func (c *Checkpoint) latch(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
	return err
}

// Close saves a final snapshot. A second Close waits for the first and
// returns ErrClosed.
func (c *Checkpoint) Close() error {
	err := ErrClosed
	c.closeOnce.Do(func() { err = c.Save() })
	return err
}

// encode writes the snapshot: the magic line, "token HEX", one line
// "stream SESSIONHEX SOURCE NEXT" per session, and "crc32c HEX" over
// everything before it.
func (c *Checkpoint) encode(b *bytes.Buffer) {
	b.Reset()
	b.WriteString(checkpointMagic)
	fmt.Fprintf(b, "token %x\n", c.token)
	for s, p := range c.streams {
		src := "-"
		if p.source.IsValid() {
			src = p.source.String()
		}
		fmt.Fprintf(b, "stream %x %s %d\n", s[:], src, uint64(p.next))
	}
	fmt.Fprintf(b, "crc32c %08x\n", crc32.Checksum(b.Bytes(), castagnoli))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (c *Checkpoint) decode(b []byte) error {
	if len(b) > maxFile {
		return fmt.Errorf("larger than %d bytes", maxFile)
	}
	if !bytes.HasPrefix(b, []byte(checkpointMagic)) {
		return errors.New("no checkpoint header")
	}
	i := bytes.LastIndex(b, []byte("crc32c "))
	if i < 0 {
		return errors.New("no checksum line (torn file?)")
	}
	want, err := strconv.ParseUint(strings.TrimSpace(string(b[i+7:])), 16, 32)
	if err != nil || uint32(want) != crc32.Checksum(b[:i], castagnoli) {
		return fmt.Errorf("checksum mismatch at offset %d", i)
	}
	sc := bufio.NewScanner(bytes.NewReader(b[len(checkpointMagic):i]))
	for line := 2; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "token":
			tok, err := hex.DecodeString(f[1])
			if err != nil || len(tok) > MaxToken {
				return fmt.Errorf("line %d: bad token", line)
			}
			c.token = tok
		case len(f) == 1 && f[0] == "token":
		case len(f) == 4 && f[0] == "stream":
			raw, err := hex.DecodeString(f[1])
			var s wire.Session
			if err != nil || len(raw) != len(s) {
				return fmt.Errorf("line %d: bad session", line)
			}
			copy(s[:], raw)
			if !s.Valid() {
				return fmt.Errorf("line %d: bad session %q", line, raw)
			}
			var p position
			if f[2] != "-" {
				if p.source, err = netip.ParseAddrPort(f[2]); err != nil {
					return fmt.Errorf("line %d: bad source %q", line, f[2])
				}
			}
			n, err := strconv.ParseUint(f[3], 10, 64)
			if err != nil || n == 0 {
				return fmt.Errorf("line %d: bad sequence %q", line, f[3])
			}
			p.next = wire.Seq(n)
			if len(c.streams) >= MaxStreams {
				return fmt.Errorf("more than %d sessions", MaxStreams)
			}
			c.streams[s] = p
		default:
			return fmt.Errorf("line %d: unknown line", line)
		}
	}
	return sc.Err()
}

// writeAtomic replaces path by data: write a temporary file beside it,
// fsync it, rename it over path, fsync the directory.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("resume: checkpoint: %w", err)
	}
	name := tmp.Name()
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		os.Remove(name)
		return fmt.Errorf("resume: write checkpoint %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("resume: checkpoint directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("resume: sync checkpoint directory %s: %w", dir, err)
	}
	return nil
}
