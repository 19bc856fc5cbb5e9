package journal

import (
	"errors"
	"io/fs"
	"log/slog"
	"time"

	"github.com/mdbus/mdbus/internal/cfgcheck"
	"github.com/mdbus/mdbus/wire"
)

// SyncPolicy says when appended records are made durable (fsync).
type SyncPolicy uint8

// Sync policies.
const (
	// SyncInterval (the default) fsyncs at most Config.SyncInterval after
	// a record was appended: a crash loses at most that much.
	SyncInterval SyncPolicy = iota
	// SyncNone leaves flushing to the OS: a process crash loses nothing
	// written, a machine crash may lose anything not yet written back.
	SyncNone
	// SyncEvery fsyncs before Append returns.
	SyncEvery
)

// Config tunes a Journal.
//
// One rule for the values of every field: the zero value means the
// default, so the zero Config is a working journal. A negative value
// means "none" only for the fields whose doc says "negative: none"
// (RetainBytes, RetainAge); for every other field a negative value is
// invalid and Open returns an error wrapping ErrConfig that names it.
type Config struct {
	Sync         SyncPolicy
	SyncInterval time.Duration // default 10 ms
	SegmentBytes int64         // rotate a segment at this size; default 64 MiB
	Compress     bool          // zstd-compress sealed segments
	BlockBytes   int           // uncompressed bytes per independently decodable zstd block; default 64 KiB
	RetainBytes  int64         // delete the oldest sealed segments beyond this many bytes per stream; default (0) and negative: none, keep all
	RetainAge    time.Duration // delete sealed segments whose newest record is older; default (0) and negative: none, keep all
	ReadOnly     bool          // open for reading only: no recovery writes, no writers
	// Perm is the permission of the files the journal creates (segments,
	// the lock file); directories it creates get the matching execute
	// bits. Default 0600 (0700): market data is often licensed to one
	// user. It is set exactly (not masked by the umask), and compaction
	// and repair keep the mode of the segment they rewrite.
	Perm   fs.FileMode
	Logger *slog.Logger // default: discard
}

// StreamID is the identity of a journal stream: wire.StreamID, the one
// every role uses. A journal stream is one incarnation of a (Session,
// Source): the messages of one MoldUDP64 session from one source, from one
// start of that session, without a hole. The journal numbers the
// incarnations of each (Session, Source) from 1 (Create), on disk and
// across restarts; Source is zero when unknown. The alias keeps the
// journal.StreamID spelling compiling; new code names wire.StreamID.
type StreamID = wire.StreamID

// StreamInfo describes a stream on disk.
type StreamInfo struct {
	ID                  wire.StreamID
	First, Next         wire.Seq // records held: [First, Next)
	FirstTime, LastTime int64    // record timestamps, ns since the Unix epoch
	Ended               bool     // the end of session was recorded
	Segments            int
	Compressed          int   // sealed segments stored zstd-compressed
	Bytes               int64 // on disk
}

// Record is one journaled message. Data is valid until the next call on
// the Reader that returned it.
type Record struct {
	Seq    wire.Seq
	Time   int64 // ns since the Unix epoch (send or receive time)
	Data   []byte
	Packet PacketMark // whether it started a packet or shared the one before; PacketUnknown if not recorded
}

// Errors.
var (
	ErrClosed     = errors.New("journal: closed")
	ErrOutOfOrder = errors.New("journal: sequence out of order") // Append of a sequence other than Next
	ErrCorrupt    = errors.New("journal: corrupt record")        // matched by *CorruptError
	ErrNotFound   = errors.New("journal: no such stream or sequence")
	ErrSession    = errors.New("journal: segment belongs to another session")
	// ErrEnded: an append to a stream whose end of session is recorded.
	ErrEnded = errors.New("journal: stream has ended")
	// ErrBusy: Resume of a stream that already has a Writer.
	ErrBusy = errors.New("journal: stream already has a writer")
	// ErrLocked: a read-write Open of a journal another Journal (in this
	// or another process) has open read-write.
	ErrLocked = errors.New("journal: directory is locked by another writer")
	// ErrTooLarge: a message longer than MaxMessageLen.
	ErrTooLarge = errors.New("journal: message longer than 65535 bytes")
	// ErrConfig: a Config that Open refuses (a negative field that has no
	// "none").
	ErrConfig = errors.New("journal: invalid config")
)

// IsCorrupt reports whether err is (or wraps) a *CorruptError.
func IsCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

// Defaults of Config fields.
const (
	DefaultSyncInterval = 10 * time.Millisecond
	DefaultSegmentBytes = 64 << 20
	DefaultBlockBytes   = 64 << 10
	DefaultPerm         = 0o600
	// MinSegmentBytes is the smallest SegmentBytes: a segment holds at
	// least one record of any size.
	MinSegmentBytes = 4 * MaxRecordLen
)

// withDefaults checks c and returns it with defaults applied.
func (c Config) withDefaults() (Config, error) {
	if err := cfgcheck.Negative(ErrConfig, cfgcheck.F("SyncInterval", c.SyncInterval),
		cfgcheck.F("SegmentBytes", c.SegmentBytes), cfgcheck.F("BlockBytes", c.BlockBytes)); err != nil {
		return c, err
	}
	if c.SyncInterval == 0 {
		c.SyncInterval = DefaultSyncInterval
	}
	if c.SegmentBytes == 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	c.SegmentBytes = max(c.SegmentBytes, MinSegmentBytes)
	if c.BlockBytes == 0 {
		c.BlockBytes = DefaultBlockBytes
	}
	c.BlockBytes = min(max(c.BlockBytes, 4<<10), 16<<20)
	if c.RetainBytes < 0 {
		c.RetainBytes = 0
	}
	if c.RetainAge < 0 {
		c.RetainAge = 0
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Perm &= fs.ModePerm; c.Perm == 0 {
		c.Perm = DefaultPerm
	}
	return c, nil
}

// CorruptError reports corruption before a segment's tail: it names the
// file and the byte offset of the bad record. errors.Is(err, ErrCorrupt).
type CorruptError struct {
	Path   string
	Offset int64
	Reason string
}

func (e *CorruptError) Error() string {
	return "journal: corrupt record in " + e.Path + " at offset " + itoa(e.Offset) + ": " + e.Reason
}

func (e *CorruptError) Unwrap() error { return ErrCorrupt }

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	neg := n < 0
	if neg {
		n = -n
	}
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// dirPerm is the permission of a directory holding files of perm: each
// class that may read them may also enter it.
func dirPerm(perm fs.FileMode) fs.FileMode {
	return perm | (perm&0o444)>>2
}
