package wire

import (
	"encoding/binary"
	"fmt"
)

// Encoder builds one downstream packet at a time in a caller-owned buffer,
// adding messages until the next one does not fit the payload size. It does
// not allocate as long as the buffer has capacity for the payload size.
// An Encoder is not safe for concurrent use.
type Encoder struct {
	buf   []byte
	off   int // offset of the packet's header in buf
	limit int
	count int
}

// Reset starts a packet of session s whose first message will be seq,
// appending to buf (usually buf[:0]). payloadSize limits the packet's size
// and is clamped to [MinPayloadSize, MaxPayloadSize].
func (e *Encoder) Reset(buf []byte, s Session, seq Seq, payloadSize int) {
	e.limit = clampPayload(payloadSize)
	e.count = 0
	e.off = len(buf)
	e.buf = AppendHeader(buf, Header{Session: s, Seq: seq})
}

// clampPayload limits a payload size to [MinPayloadSize, MaxPayloadSize].
func clampPayload(payloadSize int) int {
	return min(max(payloadSize, MinPayloadSize), MaxPayloadSize)
}

// MaxMessageLen is the largest message that fits in a packet of payloadSize,
// the largest an Encoder reset with payloadSize accepts. payloadSize is
// clamped as by Reset, so the result is from 1 to MaxPayloadSize-22.
func MaxMessageLen(payloadSize int) int {
	return clampPayload(payloadSize) - HeaderLen - MsgLenLen
}

// Fits reports whether a message of n bytes fits in the packet now.
func (e *Encoder) Fits(n int) bool {
	return e.count < MaxCount && len(e.buf)-e.off+MsgLenLen+n <= e.limit
}

// Add appends msg to the packet. It returns ErrPacketFull when msg does not
// fit in what is left (start a new packet and add it there), and an error
// matching ErrMessageTooLarge when msg cannot fit in any packet of this size.
func (e *Encoder) Add(msg []byte) error {
	if !e.Fits(len(msg)) {
		// e.limit is clamped by Reset (0 only before the first Reset, when
		// nothing fits), so this equals MaxMessageLen(e.limit).
		if most := e.limit - HeaderLen - MsgLenLen; len(msg) > most {
			return fmt.Errorf("%w: %d bytes, at most %d fit in a %d-byte payload",
				ErrMessageTooLarge, len(msg), most, e.limit)
		}
		return ErrPacketFull
	}
	e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(len(msg)))
	e.buf = append(e.buf, msg...)
	e.count++
	binary.BigEndian.PutUint16(e.buf[e.off+CountOffset:], uint16(e.count))
	return nil
}

// Count is the number of messages in the packet so far.
func (e *Encoder) Count() int { return e.count }

// Len is the size of the packet so far.
func (e *Encoder) Len() int { return len(e.buf) - e.off }

// Bytes returns the buffer passed to Reset with the packet appended.
func (e *Encoder) Bytes() []byte { return e.buf }
