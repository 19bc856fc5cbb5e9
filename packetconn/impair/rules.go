package impair

import (
	"slices"

	"github.com/mdbus/mdbus/wire"
)

// Drop rules for Config.Drop. They read only the 20-byte MoldUDP64 header,
// never panic on any input, do not allocate, keep no state and are safe for
// concurrent use.

// dataHeader returns the header of pkt when it is a data packet: at least
// one message block after the header and a count from 1 to MaxCount.
// Heartbeats, end of session and re-requests (exactly 20 bytes) are not.
func dataHeader(pkt []byte) (wire.Header, bool) {
	if len(pkt) < wire.HeaderLen+wire.MsgLenLen {
		return wire.Header{}, false
	}
	h, err := wire.ParseHeader(pkt)
	if err != nil || h.Count == wire.CountHeartbeat || h.Count == wire.CountEndOfSession {
		return wire.Header{}, false
	}
	return h, true
}

// IsData reports whether pkt looks like a MoldUDP64 data packet (header
// only: a count from 1 to 0xFFFE and bytes after the header). It is the
// test OnlyData applies.
func IsData(pkt []byte) bool {
	_, ok := dataHeader(pkt)
	return ok
}

// seqRange returns the first and last sequence a data packet carries,
// the last saturating at the largest sequence.
func seqRange(h wire.Header) (first, last wire.Seq) {
	last = h.Seq + wire.Seq(h.Count-1)
	if last < h.Seq {
		last = ^wire.Seq(0)
	}
	return h.Seq, last
}

// DropSeqs returns a rule that drops every data packet carrying one of
// seqs, whatever its session. A packet carries the sequences from its
// header's sequence to sequence+count-1, so one listed message drops its
// whole packet. Heartbeats, end of session and re-requests never match.
func DropSeqs(seqs ...wire.Seq) func(pkt []byte) bool {
	set := slices.Clone(seqs)
	slices.Sort(set)
	set = slices.Compact(set)
	return func(pkt []byte) bool {
		h, ok := dataHeader(pkt)
		if !ok {
			return false
		}
		first, last := seqRange(h)
		i, _ := slices.BinarySearch(set, first)
		return i < len(set) && set[i] <= last
	}
}

// DropRange returns a rule that drops every data packet carrying any
// sequence from `from` to `to` inclusive; none when from > to. For tail
// loss of a feed whose last sequence is L, DropRange(L-2, L) drops the
// packets carrying the last three messages.
func DropRange(from, to wire.Seq) func(pkt []byte) bool {
	return func(pkt []byte) bool {
		if from > to {
			return false
		}
		h, ok := dataHeader(pkt)
		if !ok {
			return false
		}
		first, last := seqRange(h)
		return first <= to && last >= from
	}
}

// DropHeartbeats returns a rule that drops every heartbeat (a 20-byte
// header with count 0), to hide a tail gap from a subscriber.
func DropHeartbeats() func(pkt []byte) bool {
	return func(pkt []byte) bool {
		h, err := wire.ParseHeader(pkt)
		return err == nil && len(pkt) == wire.HeaderLen && h.IsHeartbeat()
	}
}

// AnyOf returns a rule that drops a packet when any of rules does; nil
// rules are skipped.
func AnyOf(rules ...func(pkt []byte) bool) func(pkt []byte) bool {
	rs := slices.DeleteFunc(slices.Clone(rules), func(r func([]byte) bool) bool { return r == nil })
	return func(pkt []byte) bool {
		for _, r := range rs {
			if r(pkt) {
				return true
			}
		}
		return false
	}
}
