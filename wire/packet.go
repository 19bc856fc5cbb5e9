package wire

import "encoding/binary"

// Packet is a validated downstream packet. Its messages are sub-slices of
// the datagram it was parsed from and are valid as long as that is.
type Packet struct {
	Header
	body []byte // the message blocks, exactly Count of them
}

// ParsePacket validates a downstream datagram: the header, every message
// length against the datagram size, and that exactly Count messages fill it.
// It does not allocate. The returned Packet refers to b.
func ParsePacket(b []byte) (Packet, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return Packet{}, err
	}
	if !h.Session.Valid() {
		return Packet{}, ErrBadSession
	}
	body := b[HeaderLen:]
	switch h.Count {
	case CountHeartbeat:
		if len(body) != 0 {
			return Packet{}, ErrHeartbeatData
		}
	case CountEndOfSession:
		if len(body) != 0 {
			return Packet{}, ErrEndOfSessionData
		}
	default:
		if err := h.checkRange(); err != nil {
			return Packet{}, err
		}
		// One bounds check per message: a message cut short shows as a
		// length field past the end or, for the last one, as off past it
		// (off stays below 65,535 × 65,537, no overflow).
		off := 0
		for range int(h.Count) {
			if off+MsgLenLen > len(body) {
				return Packet{}, ErrTruncatedMessage
			}
			off += MsgLenLen + (int(body[off])<<8 | int(body[off+1]))
		}
		switch {
		case off > len(body):
			return Packet{}, ErrTruncatedMessage
		case off < len(body):
			return Packet{}, ErrTrailingBytes
		}
	}
	return Packet{Header: h, body: body}, nil
}

// Len is the encoded size of the packet in bytes.
func (p Packet) Len() int { return HeaderLen + len(p.body) }

// Body returns the message blocks (length-prefixed messages) of the packet.
func (p Packet) Body() []byte { return p.body }

// Messages returns an iterator over the packet's messages.
func (p Packet) Messages() MessageIter { return MessageIter{body: p.body, seq: p.Seq} }

// MessageIter walks the messages of a validated packet. The zero value
// yields nothing.
//
// It checks each length prefix against what is left, so walking message
// blocks that ParsePacket did not validate (see MessagesOf) yields their
// whole messages and stops at the first that does not fit; it never reads
// past them.
type MessageIter struct {
	body []byte
	seq  Seq
}

// MessagesOf returns an iterator over body, message blocks
// (length-prefixed messages) whose first has sequence number first. It
// does not validate body: it is for blocks already validated, such as a
// copy of a Packet's Body, walked again later without paying the check
// twice. Blocks that were not validated are walked safely too (see
// MessageIter), but may yield fewer messages than their header counts.
func MessagesOf(body []byte, first Seq) MessageIter { return MessageIter{body: body, seq: first} }

// Next returns the next message and its sequence number; ok is false after
// the last one. msg is a sub-slice of the datagram.
func (it *MessageIter) Next() (msg []byte, seq Seq, ok bool) {
	if len(it.body) < MsgLenLen {
		return nil, InvalidSeq, false
	}
	n := int(binary.BigEndian.Uint16(it.body))
	if len(it.body)-MsgLenLen < n { // only on a Packet not made by ParsePacket
		it.body = nil
		return nil, InvalidSeq, false
	}
	msg = it.body[MsgLenLen : MsgLenLen+n : MsgLenLen+n]
	it.body = it.body[MsgLenLen+n:]
	seq = it.seq
	it.seq++
	return msg, seq, true
}

// Rest returns the sequence of the next message and the message blocks
// (length-prefixed messages) not read yet, without advancing.
func (it *MessageIter) Rest() (Seq, []byte) { return it.seq, it.body }

// Skip advances past n messages without returning them.
func (it *MessageIter) Skip(n int) {
	for range n {
		if _, _, ok := it.Next(); !ok {
			return
		}
	}
}

// AppendHeartbeat appends a heartbeat packet announcing next as the next
// sequence to be sent.
func AppendHeartbeat(b []byte, s Session, next Seq) []byte {
	return AppendHeader(b, Header{Session: s, Seq: next, Count: CountHeartbeat})
}

// AppendEndOfSession appends an end-of-session packet; next is the sequence
// after the last message of the session.
func AppendEndOfSession(b []byte, s Session, next Seq) []byte {
	return AppendHeader(b, Header{Session: s, Seq: next, Count: CountEndOfSession})
}

// PacketLen is the encoded size of a packet carrying messages whose lengths
// add up to payload bytes.
func PacketLen(messages, payload int) int { return HeaderLen + messages*MsgLenLen + payload }
