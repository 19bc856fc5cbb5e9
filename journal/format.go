package journal

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"net/netip"

	"github.com/mdbus/mdbus/wire"
)

// Segment header layout. Part of the on-disk format; do not change.
const (
	segMagic         = "MDBUSJNL"
	FormatVersion    = 2 // the segment format this package writes; it reads 1 and 2
	hdrMagicOff      = 0
	hdrVersionOff    = 8
	hdrFlagsOff      = 10
	hdrSessionOff    = 12
	hdrFamilyOff     = 22
	hdrAddrOff       = 24
	hdrPortOff       = 40
	hdrIncOff        = 44
	hdrFirstOff      = 48
	hdrCreatedOff    = 56
	hdrCRCOff        = 64
	SegmentHeaderLen = 72

	flagZstd = 1 // the segment body is zstd blocks (see compress.go)
	// flagOrigin (format 2) marks the first segment of a stream, made by
	// Create: an oldest segment without it or flagRetained means the
	// segments before it are missing.
	flagOrigin = 2
	// flagRetained (format 2) marks a segment before which retention
	// removed the older ones.
	flagRetained = 4
	knownFlags   = flagZstd | flagOrigin | flagRetained
)

// Record framing. Part of the on-disk format; do not change.
const (
	recLenOff       = 0 // uint32 little endian: length of type+payload
	recCRCOff       = 4 // uint32 little endian: CRC-32C of type+payload
	RecordHeaderLen = 8
	recAlign        = 8 // every record starts at a multiple of 8 bytes in the segment

	recMessage = 1 // payload: seq uint64, time int64, message bytes
	recEnd     = 2 // payload: next seq uint64, time int64
	// Format 2 adds:
	recPacket = 3 // a message that starts a packet; payload as recMessage
	recSame   = 4 // a message in the same packet as the record before it
	recSeal   = 5 // payload: next seq uint64, time int64: the stream goes on in the next segment

	msgFixedLen = 1 + 8 + 8 // type, seq, time
	// MaxMessageLen is the largest message a record holds: a MoldUDP64
	// message block length is 16 bits.
	MaxMessageLen = 0xFFFF
	// maxBodyLen caps a record's length field: anything larger is
	// corruption, never an allocation.
	maxBodyLen = msgFixedLen + MaxMessageLen
	// minFrameLen is the smallest framed record.
	minFrameLen = RecordHeaderLen + (msgFixedLen+recAlign-1)/recAlign*recAlign
	// MaxRecordLen is the largest framed record, padding included.
	MaxRecordLen = RecordHeaderLen + (maxBodyLen+recAlign-1)/recAlign*recAlign
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

func align(n int) int { return (n + recAlign - 1) &^ (recAlign - 1) }

// frameLen is the framed size of a message record of n bytes.
func frameLen(n int) int { return RecordHeaderLen + align(msgFixedLen+n) }

// PacketMark says what a record knows of the packet its message came in.
type PacketMark uint8

// Packet marks.
const (
	// PacketUnknown: the grouping was not recorded (Writer.Append, and
	// journals of format 1).
	PacketUnknown PacketMark = iota
	// PacketStart: the message is the first (or only one) of its packet.
	PacketStart
	// PacketSame: the message was in the same packet as the record before
	// it.
	PacketSame
)

func (m PacketMark) recType() byte {
	switch m {
	case PacketStart:
		return recPacket
	case PacketSame:
		return recSame
	}
	return recMessage
}

// appendMessage appends the framed record of message seq to b.
func appendMessage(b []byte, seq wire.Seq, ts int64, msg []byte, mark PacketMark) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint32(b, uint32(msgFixedLen+len(msg)))
	b = append(b, 0, 0, 0, 0, mark.recType())
	b = binary.LittleEndian.AppendUint64(b, uint64(seq))
	b = binary.LittleEndian.AppendUint64(b, uint64(ts))
	b = append(b, msg...)
	body := b[start+RecordHeaderLen:]
	binary.LittleEndian.PutUint32(b[start+recCRCOff:], crc(body))
	for pad := align(len(body)) - len(body); pad > 0; pad-- {
		b = append(b, 0)
	}
	return b
}

// appendEnd appends the framed end-of-session record to b.
func appendEnd(b []byte, next wire.Seq, ts int64) []byte { return appendMark(b, recEnd, next, ts) }

// appendSeal appends the framed seal record to b: the stream goes on at
// next in the following segment.
func appendSeal(b []byte, next wire.Seq, ts int64) []byte { return appendMark(b, recSeal, next, ts) }

// sealLen is the framed length of a seal record.
const sealLen = RecordHeaderLen + (msgFixedLen+recAlign-1)/recAlign*recAlign

func appendMark(b []byte, typ byte, next wire.Seq, ts int64) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint32(b, uint32(msgFixedLen))
	b = append(b, 0, 0, 0, 0, typ)
	b = binary.LittleEndian.AppendUint64(b, uint64(next))
	b = binary.LittleEndian.AppendUint64(b, uint64(ts))
	binary.LittleEndian.PutUint32(b[start+recCRCOff:], crc(b[start+RecordHeaderLen:]))
	for pad := align(msgFixedLen) - msgFixedLen; pad > 0; pad-- {
		b = append(b, 0)
	}
	return b
}

// frame is one decoded record.
type frame struct {
	typ  byte       // recMessage (any of the message types), recEnd or recSeal
	mark PacketMark // of a message
	seq  wire.Seq   // message: its sequence; end, seal: the next sequence
	ts   int64
	data []byte // message bytes, a sub-slice of the input
	n    int    // framed length, padding included
}

// Outcomes of decodeFrame besides success.
type frameStatus uint8

const (
	frameOK      frameStatus = iota
	frameShort               // b ends before the record does
	frameZero                // length and CRC are zero: unwritten space
	frameBadLen              // length out of range
	frameBadCRC              // CRC mismatch
	frameBadBody             // CRC matched but the body is not a known record
)

func (s frameStatus) String() string {
	switch s {
	case frameShort:
		return "record runs past the end of the segment"
	case frameZero:
		return "zero-filled record header"
	case frameBadLen:
		return "record length out of range"
	case frameBadCRC:
		return "CRC-32C mismatch"
	case frameBadBody:
		return "unknown record type or malformed body"
	}
	return "ok"
}

// decodeFrame decodes the record at the start of b. It never allocates and
// never reads past b: a length field is checked against maxBodyLen before it
// is used, so a corrupt 4 GiB length costs nothing.
func decodeFrame(b []byte) (frame, frameStatus) {
	if len(b) < RecordHeaderLen {
		return frame{}, frameShort
	}
	l := binary.LittleEndian.Uint32(b[recLenOff:])
	sum := binary.LittleEndian.Uint32(b[recCRCOff:])
	if l == 0 && sum == 0 {
		return frame{}, frameZero
	}
	if l < msgFixedLen || l > maxBodyLen {
		return frame{}, frameBadLen
	}
	n := RecordHeaderLen + align(int(l))
	if len(b) < n {
		return frame{}, frameShort
	}
	body := b[RecordHeaderLen : RecordHeaderLen+int(l)]
	if crc(body) != sum {
		return frame{}, frameBadCRC
	}
	f := frame{
		typ: body[0],
		seq: wire.Seq(binary.LittleEndian.Uint64(body[1:])),
		ts:  int64(binary.LittleEndian.Uint64(body[9:])),
		n:   n,
	}
	switch f.typ {
	case recMessage, recPacket, recSame:
		f.mark = [...]PacketMark{recMessage: PacketUnknown, recPacket: PacketStart, recSame: PacketSame}[f.typ]
		f.typ = recMessage
		f.data = body[msgFixedLen:len(body):len(body)]
	case recEnd, recSeal:
		if l != msgFixedLen {
			return frame{}, frameBadBody
		}
	default:
		return frame{}, frameBadBody
	}
	if f.seq == wire.InvalidSeq {
		return frame{}, frameBadBody
	}
	return f, frameOK
}

// segHeader is the fixed header at the start of every segment file.
type segHeader struct {
	version uint16 // as read; append writes FormatVersion
	flags   uint16
	id      wire.StreamID
	first   wire.Seq
	created int64
}

func (h segHeader) append(b []byte) []byte {
	start := len(b)
	b = append(b, segMagic...)
	v := h.version
	if v == 0 {
		v = FormatVersion
	}
	b = binary.LittleEndian.AppendUint16(b, v)
	b = binary.LittleEndian.AppendUint16(b, h.flags)
	b = append(b, h.id.Session[:]...)
	var fam byte
	var a16 [16]byte
	if h.id.Source.IsValid() {
		a := h.id.Source.Addr()
		if a.Is4() {
			fam = 4
		} else {
			fam = 6
		}
		a16 = a.As16()
	}
	b = append(b, fam, 0)
	b = append(b, a16[:]...)
	b = binary.LittleEndian.AppendUint16(b, h.id.Source.Port())
	b = append(b, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, h.id.Incarnation)
	b = binary.LittleEndian.AppendUint64(b, uint64(h.first))
	b = binary.LittleEndian.AppendUint64(b, uint64(h.created))
	b = binary.LittleEndian.AppendUint32(b, crc(b[start:]))
	return append(b, 0, 0, 0, 0)
}

// header parse failures
type hdrStatus uint8

const (
	hdrOK hdrStatus = iota
	hdrShort
	hdrZero
	hdrBad
)

func parseHeader(b []byte) (segHeader, hdrStatus, string) {
	if len(b) < SegmentHeaderLen {
		return segHeader{}, hdrShort, "segment shorter than its 72-byte header"
	}
	b = b[:SegmentHeaderLen]
	if isZero(b) {
		return segHeader{}, hdrZero, "zero-filled segment header"
	}
	if string(b[:8]) != segMagic {
		return segHeader{}, hdrBad, "not a journal segment (bad magic)"
	}
	if crc(b[:hdrCRCOff]) != binary.LittleEndian.Uint32(b[hdrCRCOff:]) {
		return segHeader{}, hdrBad, "segment header CRC-32C mismatch"
	}
	v := binary.LittleEndian.Uint16(b[hdrVersionOff:])
	if v != 1 && v != FormatVersion {
		return segHeader{}, hdrBad, "unsupported segment format version " + itoa(int64(v))
	}
	h := segHeader{version: v}
	h.flags = binary.LittleEndian.Uint16(b[hdrFlagsOff:])
	copy(h.id.Session[:], b[hdrSessionOff:])
	var a16 [16]byte
	copy(a16[:], b[hdrAddrOff:])
	port := binary.LittleEndian.Uint16(b[hdrPortOff:])
	switch b[hdrFamilyOff] {
	case 0:
	case 4:
		h.id.Source = netip.AddrPortFrom(netip.AddrFrom16(a16).Unmap(), port)
	case 6:
		h.id.Source = netip.AddrPortFrom(netip.AddrFrom16(a16), port)
	default:
		return segHeader{}, hdrBad, "bad address family in segment header"
	}
	h.id.Incarnation = binary.LittleEndian.Uint32(b[hdrIncOff:])
	h.first = wire.Seq(binary.LittleEndian.Uint64(b[hdrFirstOff:]))
	h.created = int64(binary.LittleEndian.Uint64(b[hdrCreatedOff:]))
	if h.first == wire.InvalidSeq {
		return segHeader{}, hdrBad, "segment header names first sequence 0"
	}
	if h.flags&^knownFlags != 0 || (v == 1 && h.flags&^flagZstd != 0) {
		return segHeader{}, hdrBad, "unknown segment flags"
	}
	return h, hdrOK, ""
}

func isZero(b []byte) bool {
	var z [512]byte
	for len(b) > 0 {
		n := min(len(b), len(z))
		if !bytes.Equal(b[:n], z[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}
