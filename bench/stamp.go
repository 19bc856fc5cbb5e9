package bench

import "encoding/binary"

// Layout of the stamp at the start of every benchmark message. Part of the
// bench payload format (other processes and the peer programs read it); do
// not change.
const (
	StampTimeOffset = 0
	StampTimeLen    = 8
	StampSeqOffset  = StampTimeOffset + StampTimeLen // 8
	StampSeqLen     = 8
	// StampLen is the size of the stamp, and so the smallest benchmark
	// message.
	StampLen = StampSeqOffset + StampSeqLen // 16
)

// endSeq marks the raw benchmark's end-of-run datagram (raw UDP has no end
// of session of its own).
const endSeq = ^uint64(0)

// PutStamp writes the scheduled send time (CLOCK_MONOTONIC ns, see Now) and
// the benchmark sequence number into the first StampLen bytes of msg, which
// must be at least that long.
func PutStamp(msg []byte, sched int64, seq uint64) {
	binary.BigEndian.PutUint64(msg[StampTimeOffset:], uint64(sched))
	binary.BigEndian.PutUint64(msg[StampSeqOffset:], seq)
}

// ParseStamp reads the stamp of msg. ok is false when msg is shorter than
// StampLen (not a benchmark message).
func ParseStamp(msg []byte) (sched int64, seq uint64, ok bool) {
	if len(msg) < StampLen {
		return 0, 0, false
	}
	return int64(binary.BigEndian.Uint64(msg[StampTimeOffset:])), binary.BigEndian.Uint64(msg[StampSeqOffset:]), true
}
