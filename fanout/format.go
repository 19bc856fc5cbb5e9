package fanout

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"

	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
)

// The ring file's header. Offsets and lengths are part of the file format;
// do not change them without raising Version. Words written while readers
// run (generation, state, the positions, the wake-up words) are 8-byte
// aligned and accessed atomically; the positions and the wake-up words sit
// on cache lines of their own so that readers polling the tail do not
// share a line with anything the writer changes more often.
const (
	Magic   = "MDBUSFAN" // part of the file format; do not change
	Version = 1

	HeaderLen = 4096 // the data area starts here (a page, so it maps apart)

	offMagic      = 0
	offVersion    = 8
	offHeaderLen  = 12
	offCapacity   = 16
	offGeneration = 24   // atomic: writers started on this file
	offPID        = 32   // the writer's process ID
	offState      = 36   // atomic: StateLive, StateClosed, StateReplaced
	offOrigin     = 40   // atomic: the writer's clock origin, Unix ns (stamps count from it)
	offIntent     = 64   // atomic: the writer may be writing below this position
	offTail       = 128  // atomic: every record below this position is complete
	offWake       = 192  // atomic uint32: the futex word, bumped on a wake-up
	offSleepers   = 196  // atomic uint32: 1 when a reader may be asleep on offWake
	offMarks      = 1024 // atomic [NumMarks]uint64: record starts, one per segment
)

// NumMarks is the number of segments the data area is cut into. The
// writer stores the position of the first record it starts in each
// segment in the segment's mark, so that a lapped reader can rejoin at the
// oldest record still intact instead of at the tail (where a quiet feed
// would never show it what it skipped).
const NumMarks = 64

// Writer states (the header's state word).
const (
	StateLive     = 1 // a writer has the file
	StateClosed   = 2 // the writer closed cleanly; a restart continues the file
	StateReplaced = 3 // a writer replaced the file with another (a new capacity): reopen the path
)

// Capacity bounds of the data area (a power of two).
const (
	MinCapacity     = 1 << 20
	MaxCapacity     = 1 << 32
	DefaultCapacity = 64 << 20
)

// Records. Every record starts 8-byte aligned; a record never wraps: when
// the next one does not fit before the end of the data area, a padding
// record fills the rest. Lengths are part of the file format.
//
//	 0       4       6   7   8               16              24
//	+-------+-------+---+---+---------------+---------------+
//	|length |type   |fam|   | seq (From)    | stamp (To)    |
//	+-------+-------+---+---+---------------+---------------+
//	24                      40      42              52      56
//	+-----------------------+-------+---------------+-------+--------
//	| source address (16)   | port  | session (10)  | inc.  | data ...
//	+-----------------------+-------+---------------+-------+--------
//
// length counts the header and the data, not the padding to the next 8
// bytes. A padding record has only length and type (8 bytes at least) and
// is skipped whole: it fills the data area to its end, or covers what a
// crashed writer left half written.
const (
	RecordHeaderLen = 56
	MaxDataLen      = 65535 // a MoldUDP64 message length is a uint16
	MaxRecordLen    = RecordHeaderLen + MaxDataLen

	recLength  = 0
	recType    = 4
	recFamily  = 6
	recSeq     = 8
	recStamp   = 16
	recAddr    = 24
	recPort    = 40
	recSession = 42
	recInc     = 52
)

// RecordType says what a record carries.
type RecordType uint16

// Record types: part of the file format; do not change.
const (
	TypeMessage RecordType = 1 // a message: Seq, Stamp (the writer's delivery time), Data
	TypeLoss    RecordType = 2 // subscriber.Loss [Seq, To)
	TypeResync  RecordType = 3 // subscriber.Resync [Seq, To)
	TypeEnd     RecordType = 4 // end of session: Seq is the sequence after the last
	TypePadding RecordType = 5 // fills the data area to its end
)

// Record is one decoded record. Data aliases the buffer it was parsed from.
type Record struct {
	Type   RecordType
	Stream subscriber.StreamID
	Seq    wire.Seq
	// Stamp is the writer's delivery time of a message, in ns on the
	// writer's monotonic clock since the origin in the header (Reader.Stamp
	// adds the origin: Unix ns); To ends a Loss or Resync range.
	Stamp int64
	To    wire.Seq
	Data  []byte
}

// Errors of the file format. Match with errors.Is.
var (
	ErrBadHeader = errors.New("fanout: not a ring file (bad header)")
	ErrCorrupt   = errors.New("fanout: corrupt record")
)

func align8(n uint64) uint64 { return (n + 7) &^ 7 }

// recordSpace is the bytes a record with n data bytes takes in the ring.
func recordSpace(n int) uint64 { return align8(uint64(RecordHeaderLen + n)) }

// ParseRecord decodes the record at the start of b, where room is how far
// the data area runs from b's start to its end (a padding record must end
// there exactly; other records must fit in it). It returns the bytes the
// record takes in the ring (aligned), io.ErrUnexpectedEOF when b holds
// only part of a valid record, and ErrCorrupt for anything else that is
// not a record. A padding record (at the end of the data area, or over
// what a crashed writer left half written) may be longer than b: its
// contents are never read.
func ParseRecord(b []byte, room uint64) (Record, uint64, error) {
	return parseRecord(b, room, nil)
}

// idCache keeps the last stream decoded, keyed by its bytes in the record
// header, so that a run of records of one stream decodes its identity once.
type idCache struct {
	key [2 + 32]byte
	id  subscriber.StreamID
	ok  bool
}

func parseRecord(b []byte, room uint64, cache *idCache) (Record, uint64, error) {
	var r Record
	if len(b) < 8 {
		return r, 0, io.ErrUnexpectedEOF
	}
	length := uint64(binary.LittleEndian.Uint32(b[recLength:]))
	r.Type = RecordType(binary.LittleEndian.Uint16(b[recType:]))
	if r.Type == TypePadding {
		if length < 8 || length%8 != 0 || length > room {
			return r, 0, fmt.Errorf("%w: padding of %d bytes with %d to the end", ErrCorrupt, length, room)
		}
		return r, length, nil
	}
	if length < RecordHeaderLen || length > MaxRecordLen || align8(length) > room {
		return r, 0, fmt.Errorf("%w: length %d (room %d)", ErrCorrupt, length, room)
	}
	if uint64(len(b)) < length {
		return r, 0, io.ErrUnexpectedEOF
	}
	r.Seq = wire.Seq(binary.LittleEndian.Uint64(b[recSeq:]))
	stamp := binary.LittleEndian.Uint64(b[recStamp:])
	if cache != nil && cache.ok && string(b[recFamily:recFamily+2]) == string(cache.key[:2]) &&
		string(b[recAddr:RecordHeaderLen]) == string(cache.key[2:]) {
		r.Stream = cache.id
	} else if err := parseStream(b, &r.Stream); err != nil {
		return r, 0, err
	} else if cache != nil {
		copy(cache.key[:2], b[recFamily:recFamily+2])
		copy(cache.key[2:], b[recAddr:RecordHeaderLen])
		cache.id, cache.ok = r.Stream, true
	}
	switch r.Type {
	case TypeMessage:
		r.Stamp = int64(stamp)
		r.Data = b[RecordHeaderLen:length:length]
	case TypeLoss, TypeResync:
		r.To = wire.Seq(stamp)
		if length != RecordHeaderLen || r.To < r.Seq {
			return r, 0, fmt.Errorf("%w: range [%d, %d) of %d bytes", ErrCorrupt, r.Seq, r.To, length)
		}
	case TypeEnd:
		if length != RecordHeaderLen {
			return r, 0, fmt.Errorf("%w: end of session of %d bytes", ErrCorrupt, length)
		}
	default:
		return r, 0, fmt.Errorf("%w: type %d", ErrCorrupt, r.Type)
	}
	return r, align8(length), nil
}

// putRecord writes r into b (which has room for it) and returns the bytes
// it takes. Data longer than MaxDataLen is the caller's error.
func putRecord(b []byte, r *Record) uint64 {
	length := RecordHeaderLen + len(r.Data)
	binary.LittleEndian.PutUint32(b[recLength:], uint32(length))
	binary.LittleEndian.PutUint16(b[recType:], uint16(r.Type))
	binary.LittleEndian.PutUint64(b[recSeq:], uint64(r.Seq))
	stamp := uint64(r.Stamp)
	if r.Type == TypeLoss || r.Type == TypeResync {
		stamp = uint64(r.To)
	}
	binary.LittleEndian.PutUint64(b[recStamp:], stamp)
	putStream(b, r.Stream)
	copy(b[RecordHeaderLen:], r.Data)
	return align8(uint64(length))
}

// putStream writes id's bytes (family, address, port, session,
// incarnation) into the record header b.
func putStream(b []byte, id subscriber.StreamID) {
	src := id.Source
	a := src.Addr()
	switch {
	case !src.IsValid():
		b[recFamily] = 0
		clear(b[recAddr : recAddr+16])
	case a.Is4():
		b[recFamily] = 4
		a4 := a.As4()
		copy(b[recAddr:], a4[:])
		clear(b[recAddr+4 : recAddr+16])
	default:
		b[recFamily] = 6
		a16 := a.As16()
		copy(b[recAddr:], a16[:])
	}
	b[recFamily+1] = 0
	binary.LittleEndian.PutUint16(b[recPort:], src.Port())
	copy(b[recSession:], id.Session[:])
	binary.LittleEndian.PutUint32(b[recInc:], id.Incarnation)
}

func putPadding(b []byte, n uint64) {
	binary.LittleEndian.PutUint32(b[recLength:], uint32(n))
	binary.LittleEndian.PutUint16(b[recType:], uint16(TypePadding))
}

// Header is the decoded fixed part of a ring file's header.
type Header struct {
	Version  uint32
	Capacity uint64
}

// ParseHeader checks the fixed part of a ring file's header: magic,
// version, header length and a capacity that is a power of two within
// [MinCapacity, MaxCapacity]. size is the file's size, which must be the
// header plus the capacity.
func ParseHeader(b []byte, size int64) (Header, error) {
	var h Header
	if len(b) < HeaderLen {
		return h, fmt.Errorf("%w: %d bytes, want %d", ErrBadHeader, len(b), HeaderLen)
	}
	if string(b[offMagic:offMagic+8]) != Magic {
		return h, fmt.Errorf("%w: magic %q", ErrBadHeader, b[offMagic:offMagic+8])
	}
	h.Version = binary.LittleEndian.Uint32(b[offVersion:])
	if h.Version != Version {
		return h, fmt.Errorf("%w: version %d, this mdbus reads %d", ErrBadHeader, h.Version, Version)
	}
	if hl := binary.LittleEndian.Uint32(b[offHeaderLen:]); hl != HeaderLen {
		return h, fmt.Errorf("%w: header length %d, want %d", ErrBadHeader, hl, HeaderLen)
	}
	h.Capacity = binary.LittleEndian.Uint64(b[offCapacity:])
	if h.Capacity < MinCapacity || h.Capacity > MaxCapacity || h.Capacity&(h.Capacity-1) != 0 {
		return h, fmt.Errorf("%w: capacity %d, want a power of two from %d to %d", ErrBadHeader, h.Capacity, MinCapacity, MaxCapacity)
	}
	if size >= 0 && uint64(size) != HeaderLen+h.Capacity {
		return h, fmt.Errorf("%w: file of %d bytes, the header says %d", ErrBadHeader, size, HeaderLen+h.Capacity)
	}
	return h, nil
}

func putHeader(b []byte, capacity uint64) {
	copy(b[offMagic:], Magic)
	binary.LittleEndian.PutUint32(b[offVersion:], Version)
	binary.LittleEndian.PutUint32(b[offHeaderLen:], HeaderLen)
	binary.LittleEndian.PutUint64(b[offCapacity:], capacity)
}

// parseStream decodes the stream identity of the record header b.
func parseStream(b []byte, id *subscriber.StreamID) error {
	switch fam := b[recFamily]; fam {
	case 0:
		*id = subscriber.StreamID{}
	case 4:
		id.Source = netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[recAddr:recAddr+4])), binary.LittleEndian.Uint16(b[recPort:]))
	case 6:
		id.Source = netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[recAddr:recAddr+16])), binary.LittleEndian.Uint16(b[recPort:]))
	default:
		return fmt.Errorf("%w: address family %d", ErrCorrupt, fam)
	}
	copy(id.Session[:], b[recSession:recSession+wire.SessionLen])
	id.Incarnation = binary.LittleEndian.Uint32(b[recInc:])
	return nil
}
