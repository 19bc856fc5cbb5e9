package journal

// This file fixes the journal's public API so that the packages built on it
// (recorder, replay, pcap) can be written at the same time as the journal
// itself. The bodies are filled in by the journal's implementation; the
// signatures and documented behaviour are the contract.

import (
	"errors"
	"log/slog"
	"net/netip"
	"time"

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

// Config tunes a Journal. The zero value of every field is its default.
type Config struct {
	Sync         SyncPolicy
	SyncInterval time.Duration // default 10 ms
	SegmentBytes int64         // rotate a segment at this size; default 64 MiB
	Compress     bool          // zstd-compress sealed segments
	BlockBytes   int           // uncompressed bytes per independently decodable zstd block; default 64 KiB
	RetainBytes  int64         // delete the oldest sealed segments beyond this many bytes per stream; 0 keeps all
	RetainAge    time.Duration // delete sealed segments whose newest record is older; 0 keeps all
	ReadOnly     bool          // open for reading only: no recovery writes, no writers
	Logger       *slog.Logger  // default: discard
}

// StreamID names one recorded stream incarnation: the messages of one
// MoldUDP64 session from one source, from one start of that session. A
// publisher restarted under the same session name is a new incarnation.
type StreamID struct {
	Session     wire.Session
	Source      netip.AddrPort // the publisher's address and port; zero when unknown
	Incarnation uint32         // 1, 2, ... assigned by the journal per (Session, Source)
}

// StreamInfo describes a stream on disk.
type StreamInfo struct {
	ID                  StreamID
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
	Seq  wire.Seq
	Time int64 // ns since the Unix epoch (send or receive time)
	Data []byte
}

// Errors.
var (
	ErrClosed     = errors.New("journal: closed")
	ErrOutOfOrder = errors.New("journal: sequence out of order") // Append of a sequence other than Next
	ErrCorrupt    = errors.New("journal: corrupt record")        // matched by *CorruptError
	ErrNotFound   = errors.New("journal: no such stream or sequence")
	ErrSession    = errors.New("journal: segment belongs to another session")
)

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

var errTODO = errors.New("journal: not implemented yet")

// Journal is a directory of recorded streams. Open recovers every stream's
// torn tail (truncating it, logging what was cut). Methods are safe for
// concurrent use; each Writer has one user at a time.
type Journal struct{}

// Open opens (creating it if missing, unless ReadOnly) the journal in dir.
func Open(dir string, cfg Config) (*Journal, error) { return nil, errTODO }

// Close closes every Writer and Reader it handed out, syncing writers.
func (j *Journal) Close() error { return errTODO }

// Streams lists the streams on disk, oldest first.
func (j *Journal) Streams() []StreamInfo { return nil }

// Create starts a new incarnation of (session, source) whose first record
// will be first.
func (j *Journal) Create(session wire.Session, source netip.AddrPort, first wire.Seq) (*Writer, error) {
	return nil, errTODO
}

// Resume reopens stream id for appending at its Next (after a restart).
func (j *Journal) Resume(id StreamID) (*Writer, error) { return nil, errTODO }

// Latest returns the newest incarnation of (session, source); with a zero
// source, the newest incarnation of session from any source.
func (j *Journal) Latest(session wire.Session, source netip.AddrPort) (StreamID, bool) {
	return StreamID{}, false
}

// OpenReader opens stream id for reading, positioned at its first record.
func (j *Journal) OpenReader(id StreamID) (*Reader, error) { return nil, errTODO }

// Bounds and AppendPacket make a Journal a retransmit.Source: re-requests
// for session s are answered from its newest incarnation.
func (j *Journal) Bounds(s wire.Session) (first, next wire.Seq, ok bool) { return 0, 0, false }

// AppendPacket appends one downstream packet of session s starting at
// message from, as retransmit.Source documents.
func (j *Journal) AppendPacket(dst []byte, s wire.Session, from wire.Seq, max, payloadSize int) ([]byte, int, error) {
	return dst, 0, errTODO
}

// Writer appends to one stream. Not safe for concurrent use.
type Writer struct{}

// ID names the stream.
func (w *Writer) ID() StreamID { return StreamID{} }

// Append adds message seq, which must be Next() (ErrOutOfOrder
// otherwise), timestamped ts (ns since the Unix epoch). It allocates
// nothing. The record is durable per the Config's SyncPolicy.
func (w *Writer) Append(seq wire.Seq, ts int64, msg []byte) error { return errTODO }

// AppendPacket appends every message of a MoldUDP64 data packet. Messages
// below Next are skipped (already held); a packet starting beyond Next is
// ErrOutOfOrder.
func (w *Writer) AppendPacket(pkt []byte, ts int64) error { return errTODO }

// SentPacket makes a Writer a publisher.Sink: it appends pkt stamped with
// the current time and latches any error (see Err).
func (w *Writer) SentPacket(pkt []byte) {}

// End records the end of session: next is the sequence after the last.
func (w *Writer) End(next wire.Seq) error { return errTODO }

// Next is the sequence the next Append must carry.
func (w *Writer) Next() wire.Seq { return 0 }

// Durable is the sequence after the last record known to be fsynced.
func (w *Writer) Durable() wire.Seq { return 0 }

// Sync fsyncs everything appended so far.
func (w *Writer) Sync() error { return errTODO }

// Err returns the first error latched by SentPacket or the background sync.
func (w *Writer) Err() error { return nil }

// Close syncs and closes the writer; a second Close returns ErrClosed.
func (w *Writer) Close() error { return errTODO }

// Reader reads one stream in sequence order. Not safe for concurrent use.
type Reader struct{}

// Bounds is the range of sequences held, [first, next).
func (r *Reader) Bounds() (first, next wire.Seq) { return 0, 0 }

// SeekSeq positions the reader at seq (O(log n) via the sparse index).
func (r *Reader) SeekSeq(seq wire.Seq) error { return errTODO }

// SeekTime positions the reader at the first record with Time >= ns.
func (r *Reader) SeekTime(ns int64) error { return errTODO }

// Next returns the next record, io.EOF after the last one; a corrupt
// record returns a *CorruptError, never the record.
func (r *Reader) Next() (Record, error) { return Record{}, errTODO }

// Close releases the reader.
func (r *Reader) Close() error { return errTODO }
