package retransmit

import "github.com/mdbus/mdbus/wire"

// Source is what a Server answers re-requests from. *Cache implements it;
// the journal will too, as the fallback for ranges older than the cache.
//
// A Source must be safe for concurrent use: the Server's goroutine reads it
// while a publisher or subscriber writes it.
type Source interface {
	// Bounds returns the range [first, next) of session s the source
	// holds now; ok is false when it does not know s.
	Bounds(s wire.Session) (first, next wire.Seq, ok bool)
	// AppendPacket appends to dst one downstream packet of session s
	// whose first message is from, holding as many consecutive messages
	// as fit in payloadSize bytes, at most max, and returns the extended
	// dst and the number of messages. It returns 0 messages and dst
	// unchanged when it does not hold from, and an error matching
	// wire.ErrMessageTooLarge when message from does not fit
	// payloadSize. It must not allocate when dst has payloadSize bytes of
	// room.
	AppendPacket(dst []byte, s wire.Session, from wire.Seq, max, payloadSize int) (pkt []byte, n int, err error)
}

// HoleySource is a Source whose held range may have holes: sequences
// between Bounds that it does not hold (lost before they reached it). The
// Server asks it where the next held sequence is, so that an answer skips
// a hole instead of ending at it. *Cache implements it.
type HoleySource interface {
	Source
	// NextHeld returns the smallest sequence at or after from that the
	// source holds for s; ok is false when there is none.
	NextHeld(s wire.Session, from wire.Seq) (seq wire.Seq, ok bool)
}
