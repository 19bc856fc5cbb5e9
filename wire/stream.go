package wire

import (
	"net/netip"
	"strconv"
)

// StreamID names one incarnation of a stream: the messages of one session
// from one source address and port, from one start of that session.
// Subscribers, journals, recorders and capture importers all name streams
// with it. It is comparable.
//
// Source is the zero AddrPort where the source is not part of the
// identity or not known (a subscriber's A/B feeds, whose two copies come
// from two sources; a journal stream recorded without one).
//
// Incarnation numbers the incarnations from 1; NoIncarnation (0) means
// none was assigned. Whoever tells incarnations apart numbers them: a
// subscriber counts the incarnations of a session it has seen (from any
// source), a journal those of a (session, source) it holds, on disk and
// across restarts. So the same publisher run may be incarnation 2 to a
// subscriber and 5 to a journal; each number is stable where it was given.
type StreamID struct {
	Source      netip.AddrPort
	Session     Session
	Incarnation uint32
}

// NoIncarnation is the Incarnation of a StreamID that names no
// incarnation in particular.
const NoIncarnation uint32 = 0

// String formats id as "SESSION@addr:port", with "#N" appended for
// incarnation N > 1 (the first incarnation, the usual case, is left
// plain), and "-" for a zero Source.
func (id StreamID) String() string {
	b := make([]byte, 0, SessionLen+48)
	b = append(b, id.Session.String()...)
	b = append(b, '@')
	if id.Source.IsValid() {
		b = id.Source.AppendTo(b)
	} else {
		b = append(b, '-')
	}
	if id.Incarnation > 1 {
		b = append(b, '#')
		b = strconv.AppendUint(b, uint64(id.Incarnation), 10)
	}
	return string(b)
}

// RestartDistance is how far back, in messages, a data packet of a
// stream's own source must go to be taken for a restart of its sequence
// when nothing else says so (it is not the session's first sequence, nor a
// heartbeat): farther than a network's reordering or duplication ever
// delays a packet.
const RestartDistance = 1 << 16

// StreamPos is how far an incarnation has got, as the incarnation rule
// (StreamPos.Fit) needs it.
type StreamPos struct {
	// High is one past the highest sequence the packets of the stream's
	// own source carried or announced; InvalidSeq when none was seen.
	High Seq
	// Next is the first sequence the incarnation has not taken in order
	// yet (delivered, journaled); at most High.
	Next Seq
	// Ended: the source ended the session.
	Ended bool
}

// Fit is where a packet from a stream's own source stands against the
// incarnation its earlier packets formed.
type Fit uint8

// Fits.
const (
	// Continues: the packet belongs to the incarnation (in order, ahead
	// of it, filling a hole, or an end of session, which belongs to the
	// incarnation it ends).
	Continues Fit = iota
	// Repeats: it goes back over what the incarnation has taken, as a
	// duplicate or a late copy would.
	Repeats
	// Restarts: it goes back in a way reordering and duplication do not
	// explain: to the session's first sequence, in a heartbeat, or more
	// than RestartDistance back. It starts a new incarnation.
	Restarts
	// BeyondEnd: the incarnation ended and the packet goes on past its
	// end, which no publisher sends within one incarnation.
	BeyondEnd
)

// Fit applies the incarnation rule to h, the header of a packet or
// heartbeat from the stream's own source (same source address and port,
// same session: a packet of the session from another source is another
// stream, and its first packet starts a new incarnation of the session).
//
// A stream starts a new incarnation when its sequence restarts (Restarts)
// and when its end of session is followed by data (Restarts or
// BeyondEnd); an end of session itself never starts one. The rule only
// classifies: a caller that must not let one forged packet end a live
// incarnation waits for a second packet of the source to confirm a
// Restarts (the subscriber), one that reads a trusted capture acts on it
// at once (the capture importer).
func (pos StreamPos) Fit(h Header) Fit {
	if h.Seq >= pos.High && !pos.Ended || pos.High == InvalidSeq {
		return Continues // the usual case, inlined: at or ahead of the source
	}
	return pos.fitBack(h)
}

// fitBack is Fit for a packet behind High or after the end.
func (pos StreamPos) fitBack(h Header) Fit {
	if h.IsEndOfSession() {
		return Continues
	}
	seq, next := h.Seq, h.Next()
	if seq >= pos.High {
		if pos.Ended && !h.IsHeartbeat() {
			return BeyondEnd
		}
		return Continues
	}
	// Back before what the source sent: over what the incarnation has
	// taken (a packet that fills a hole ahead of Next continues it).
	if !(next <= pos.Next || pos.Ended || h.IsHeartbeat() && seq < pos.Next) {
		return Continues
	}
	if seq == 1 || h.IsHeartbeat() || uint64(pos.High-seq) > RestartDistance {
		return Restarts
	}
	return Repeats
}

// String names f.
func (f Fit) String() string {
	switch f {
	case Continues:
		return "continues"
	case Repeats:
		return "repeats"
	case Restarts:
		return "restarts"
	case BeyondEnd:
		return "beyond end"
	}
	return "Fit(" + strconv.Itoa(int(f)) + ")"
}
