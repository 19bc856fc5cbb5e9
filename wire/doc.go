// Package wire encodes and decodes MoldUDP64, the sequenced-UDP framing that
// NASDAQ specifies in "MoldUDP64 Protocol Specification" version 1.00.
//
// The package does no I/O and never panics on input: every decoder checks
// bounds before it indexes, caps what it reads by the datagram it was given,
// and returns a sentinel error (match with errors.Is) for each kind of
// malformed input. Nothing here allocates per message: encoders append into a
// caller-owned buffer and the decoder hands out sub-slices of the datagram.
//
// # Downstream packet
//
// All integers are big endian. Offsets are in bytes.
//
//	 0                   10                  18        20
//	+-------------------+-------------------+---------+
//	| session (10)      | sequence (8)      | count(2)|   header, HeaderLen = 20
//	+-------------------+-------------------+---------+
//	| length (2) | message bytes (length) |             repeated count times
//	+------------+------------------------+
//
// The sequence is that of the first message in the packet; messages are
// numbered consecutively from it. Sequence numbers count messages, not
// packets, and start at 1 for a session. A count of 0 is a heartbeat (its
// sequence is the next one to be sent); a count of 0xFFFF marks the end of
// the session and carries no messages.
//
// # Re-request
//
// A re-request is a header with nothing after it, sent to the retransmitter:
// the session, the first sequence wanted and the number of messages wanted.
// The answer is ordinary downstream packets.
//
//	+-------------------+-------------------+---------+
//	| session (10)      | first seq (8)     | count(2)|   RequestLen = 20
//	+-------------------+-------------------+---------+
//
// The layout constants below are part of the wire format; do not change them.
//
// # Streams and incarnations
//
// StreamID is the one identity of a stream across the bus: source
// address and port, session, and incarnation (numbered from 1; 0 is
// NoIncarnation). StreamPos.Fit is the one rule for when a stream starts a
// new incarnation: its own source's sequence goes back in a way
// reordering does not explain (to 1, in a heartbeat, or more than
// RestartDistance back), or data follows its end of session; a session
// from a new source address or port is another stream altogether. The
// subscriber, the recorder (through the subscriber's StreamID) and the
// capture importer apply it.
//
// # Usage
//
//	var enc wire.Encoder
//	enc.Reset(buf[:0], session, seq, wire.DefaultPayloadSizeIPv4)
//	if err := enc.Add(msg); errors.Is(err, wire.ErrPacketFull) { /* send enc.Bytes(), start a new packet */ }
//
//	p, err := wire.ParsePacket(datagram)
//	if err != nil { /* drop the datagram, count it by reason (errors.Is) */ }
//	for it := p.Messages(); ; {
//		msg, seq, ok := it.Next()
//		if !ok { break }
//		_, _ = msg, seq // msg is valid as long as datagram is
//	}
package wire
