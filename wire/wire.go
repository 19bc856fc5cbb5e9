package wire

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
)

// Layout of the header shared by downstream packets and re-requests.
// Part of the wire format; do not change.
const (
	SessionOffset = 0
	SessionLen    = 10
	SeqOffset     = SessionOffset + SessionLen // 10
	SeqLen        = 8
	CountOffset   = SeqOffset + SeqLen // 18
	CountLen      = 2
	HeaderLen     = CountOffset + CountLen // 20
	// MsgLenLen is the size of the length prefix of each message block.
	MsgLenLen = 2
)

// Special message counts. Part of the wire format; do not change.
const (
	CountHeartbeat    = 0
	CountEndOfSession = 0xFFFF
	// MaxCount is the largest count that carries messages.
	MaxCount = 0xFFFE
)

// Payload sizes: the UDP payload that fits a 1500-byte Ethernet MTU after the
// IP and UDP headers.
const (
	DefaultPayloadSizeIPv4 = 1500 - 20 - 8 // 1472
	DefaultPayloadSizeIPv6 = 1500 - 40 - 8 // 1452
	// MaxPayloadSize is the largest UDP payload over IPv4.
	MaxPayloadSize = 65507
	// MinPayloadSize fits a header and one message of one byte.
	MinPayloadSize = HeaderLen + MsgLenLen + 1
)

// Seq is a MoldUDP64 sequence number: the number of a message in its session,
// counting from 1.
type Seq uint64

// InvalidSeq is the zero sequence number, which no message carries.
const InvalidSeq Seq = 0

// Sentinel errors returned by the decoders.
var (
	// ErrShortHeader: fewer than HeaderLen bytes.
	ErrShortHeader = errors.New("wire: datagram shorter than the 20-byte MoldUDP64 header")
	// ErrTruncatedMessage: a message length runs past the end of the datagram.
	ErrTruncatedMessage = errors.New("wire: message length runs past the end of the datagram")
	// ErrTrailingBytes: bytes remain after count messages (the count disagrees with the bytes).
	ErrTrailingBytes = errors.New("wire: bytes remain after the last counted message")
	// ErrEndOfSessionData: an end-of-session packet carries bytes after its header.
	ErrEndOfSessionData = errors.New("wire: end-of-session packet carries data")
	// ErrHeartbeatData: a heartbeat carries bytes after its header.
	ErrHeartbeatData = errors.New("wire: heartbeat carries data")
	// ErrZeroSeq: a packet or request names sequence 0, which no message has.
	ErrZeroSeq = errors.New("wire: sequence number 0")
	// ErrSeqOverflow: sequence plus count passes the largest sequence number.
	ErrSeqOverflow = errors.New("wire: sequence number range overflows")
	// ErrBadSession: the session holds a byte that is not printable ASCII.
	ErrBadSession = errors.New("wire: session is not printable ASCII")
	// ErrRequestLen: a re-request is not exactly RequestLen bytes.
	ErrRequestLen = errors.New("wire: re-request is not 20 bytes")
	// ErrZeroCount: a re-request asks for no messages, or for the end-of-session count.
	ErrZeroCount = errors.New("wire: re-request count is 0 or 0xFFFF")
)

// ErrPacketFull is returned by Encoder.Add when the message does not fit in
// the space left in the packet; it fits in an empty one.
var ErrPacketFull = errors.New("wire: packet full")

// ErrMessageTooLarge is returned by Encoder.Add for a message that cannot fit
// in any packet of the encoder's payload size.
var ErrMessageTooLarge = errors.New("wire: message too large for one packet")

// Session is a MoldUDP64 session: 10 bytes of ASCII, space padded.
type Session [SessionLen]byte

// ParseSession returns s as a Session. s must be 1 to 10 printable ASCII
// characters; shorter strings are padded with spaces.
func ParseSession(s string) (Session, error) {
	var sess Session
	if len(s) == 0 || len(s) > SessionLen {
		return sess, fmt.Errorf("wire: session %q: want 1 to %d characters", s, SessionLen)
	}
	for i := range sess {
		sess[i] = ' '
	}
	copy(sess[:], s)
	if !sess.Valid() {
		return sess, fmt.Errorf("wire: session %q: %w", s, ErrBadSession)
	}
	return sess, nil
}

// NewSession returns a random session of 10 upper-case letters and digits, as
// a publisher uses when none is configured.
func NewSession() Session {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	var raw [SessionLen]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails on Linux.
	var s Session
	for i, b := range raw {
		s[i] = alphabet[int(b)%len(alphabet)]
	}
	return s
}

// Valid reports whether every byte of s is printable ASCII.
func (s Session) Valid() bool {
	for _, c := range s {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// String returns the session with trailing spaces removed.
func (s Session) String() string {
	n := len(s)
	for n > 0 && s[n-1] == ' ' {
		n--
	}
	return string(s[:n])
}

// Header is the fixed part of a downstream packet or a re-request.
type Header struct {
	Session Session
	Seq     Seq
	Count   uint16
}

// AppendHeader appends the 20-byte encoding of h to b.
func AppendHeader(b []byte, h Header) []byte {
	b = append(b, h.Session[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(h.Seq))
	return binary.BigEndian.AppendUint16(b, h.Count)
}

// ParseHeader decodes the first HeaderLen bytes of b. It checks only the
// length; see ParsePacket and ParseRequest for validation.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderLen {
		return h, ErrShortHeader
	}
	copy(h.Session[:], b[SessionOffset:SessionOffset+SessionLen])
	h.Seq = Seq(binary.BigEndian.Uint64(b[SeqOffset:]))
	h.Count = binary.BigEndian.Uint16(b[CountOffset:])
	return h, nil
}

// IsHeartbeat reports whether h is a heartbeat.
func (h Header) IsHeartbeat() bool { return h.Count == CountHeartbeat }

// IsEndOfSession reports whether h marks the end of the session.
func (h Header) IsEndOfSession() bool { return h.Count == CountEndOfSession }

// MessageCount is the number of messages the header carries: 0 for
// heartbeats and end of session.
func (h Header) MessageCount() int {
	if h.Count == CountEndOfSession {
		return 0
	}
	return int(h.Count)
}

// Next is the sequence after the last message the header carries; for a
// heartbeat or end of session it is the header's own sequence.
func (h Header) Next() Seq { return h.Seq + Seq(h.MessageCount()) }

// CheckData checks the header of a data packet as ParsePacket does before
// it walks the messages: a printable session, a sequence other than 0, and
// Count messages from it that do not pass the largest sequence. Count is
// taken as a message count: call it for a header that is neither a
// heartbeat nor an end of session.
func (h Header) CheckData() error {
	if !h.Session.Valid() {
		return ErrBadSession
	}
	return h.checkRange()
}

// checkRange is CheckData without the session.
func (h Header) checkRange() error {
	if h.Seq == InvalidSeq {
		return ErrZeroSeq
	}
	if uint64(h.Seq)+uint64(h.Count) < uint64(h.Seq) {
		return ErrSeqOverflow
	}
	return nil
}
