package wire

import (
	"encoding/binary"
	"errors"
)

// A Confirm (NCF, after PGM's NAK confirm, RFC 3208 section 5.3) is the
// retransmitter's word that it accepted a re-request: the range
// [Seq, Seq+Count) of Session is being answered now (ConfirmSending) or is
// queued and will be answered within After microseconds (ConfirmLater).
// The retransmitter sends it on the repair group, where every subscriber
// that misses the same range hears it and waits for the repair instead of
// asking too; a requester answered unicast gets it unicast. Group carries
// the retransmitter's estimate of how many subscribers ask it for repairs,
// which sizes the subscribers' NAK back-off (NORM's GSIZE, RFC 5740).
//
// It is not a MoldUDP64 message. Its layout keeps MoldUDP64 parsers from
// reading it as data: the 20-byte header (Count from 1 to MaxCount) is
// followed by the magic "NC", which a downstream parser reads as the first
// message's length (20035 bytes, longer than the datagram), so it fails
// with ErrTruncatedMessage. Part of the wire format; do not change.
//
//	 0          10         18     20   22  23   24      26          30
//	+----------+----------+------+----+---+----+-------+-----------+
//	| session  | sequence |count | NC | F |kind| group | after µs  |
//	+----------+----------+------+----+---+----+-------+-----------+
type Confirm struct {
	Session Session
	Seq     Seq
	Count   uint16
	Kind    ConfirmKind
	// Group is the number of distinct requesters the retransmitter heard
	// recently, at least 1 (0 is read as 1).
	Group uint16
	// After, for ConfirmLater, is how long until the answer leaves, in
	// microseconds (saturating).
	After uint32
}

// ConfirmKind says what the retransmitter does with a confirmed request.
type ConfirmKind uint8

// Kinds of Confirm. Part of the wire format; do not change.
const (
	// ConfirmSending: the answer leaves with this confirm.
	ConfirmSending ConfirmKind = 1
	// ConfirmLater: the request is queued behind the retransmitter's rate
	// limit and is answered within After microseconds; ask again only if
	// nothing came by then.
	ConfirmLater ConfirmKind = 2
)

// Layout of a Confirm after the header. Part of the wire format; do not change.
const (
	confirmMagicOff = HeaderLen     // "NCF"
	confirmKindOff  = HeaderLen + 3 // kind
	confirmGroupOff = HeaderLen + 4 // uint16
	confirmAfterOff = HeaderLen + 6 // uint32
	// ConfirmLen is the size of a Confirm datagram.
	ConfirmLen = HeaderLen + 10
)

var confirmMagic = [3]byte{'N', 'C', 'F'}

// ErrNotConfirm is returned by ParseConfirm for a datagram that is not a
// Confirm (wrong size or magic): most likely an ordinary packet.
var ErrNotConfirm = errors.New("wire: not a NAK confirm")

// ErrBadConfirm is returned by ParseConfirm for a datagram that has a
// Confirm's size and magic but an invalid field.
var ErrBadConfirm = errors.New("wire: invalid NAK confirm")

// IsConfirm reports whether b has the size and magic of a Confirm; it is
// the cheap test a receiver makes before ParseConfirm.
func IsConfirm(b []byte) bool {
	return len(b) == ConfirmLen && [3]byte(b[confirmMagicOff:confirmKindOff]) == confirmMagic
}

// AppendConfirm appends the ConfirmLen-byte encoding of c to b.
func AppendConfirm(b []byte, c Confirm) []byte {
	b = AppendHeader(b, Header{Session: c.Session, Seq: c.Seq, Count: c.Count})
	b = append(b, confirmMagic[:]...)
	b = append(b, byte(c.Kind))
	b = binary.BigEndian.AppendUint16(b, c.Group)
	return binary.BigEndian.AppendUint32(b, c.After)
}

// ParseConfirm decodes and validates a Confirm: ConfirmLen bytes with its
// magic (else ErrNotConfirm), a printable session, a sequence other than 0,
// a count from 1 to MaxCount that does not overflow, and a known kind
// (else ErrBadConfirm, or the request errors ErrBadSession, ErrZeroSeq,
// ErrZeroCount, ErrSeqOverflow).
func ParseConfirm(b []byte) (Confirm, error) {
	if !IsConfirm(b) {
		return Confirm{}, ErrNotConfirm
	}
	r, err := ParseRequest(b[:RequestLen])
	if err != nil {
		return Confirm{}, err
	}
	c := Confirm{
		Session: r.Session, Seq: r.Seq, Count: r.Count,
		Kind:  ConfirmKind(b[confirmKindOff]),
		Group: binary.BigEndian.Uint16(b[confirmGroupOff:]),
		After: binary.BigEndian.Uint32(b[confirmAfterOff:]),
	}
	if c.Kind != ConfirmSending && c.Kind != ConfirmLater {
		return Confirm{}, ErrBadConfirm
	}
	return c, nil
}

// Length is the encoded size of c.
func (c Confirm) Length() int { return ConfirmLen }
