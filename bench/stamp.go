package bench

import "github.com/mdbus/mdbus/internal/oneway"

// Layout of the stamp at the start of every benchmark message, defined
// with the bus's other latency stamp in internal/oneway. Part of the bench
// payload format (other processes and the peer programs read it); do not
// change.
const (
	StampTimeOffset = oneway.BenchTimeOffset
	StampTimeLen    = oneway.BenchTimeLen
	StampSeqOffset  = oneway.BenchSeqOffset // 8
	StampSeqLen     = oneway.BenchSeqLen
	// StampLen is the size of the stamp, and so the smallest benchmark
	// message.
	StampLen = oneway.BenchStampLen // 16
)

// endSeq marks the raw benchmark's end-of-run datagram (raw UDP has no end
// of session of its own).
const endSeq = ^uint64(0)

// PutStamp writes the scheduled send time (CLOCK_MONOTONIC ns, see Now) and
// the benchmark sequence number into the first StampLen bytes of msg, which
// must be at least that long.
func PutStamp(msg []byte, sched int64, seq uint64) { oneway.PutBenchStamp(msg, sched, seq) }

// ParseStamp reads the stamp of msg. ok is false when msg is shorter than
// StampLen (not a benchmark message).
func ParseStamp(msg []byte) (sched int64, seq uint64, ok bool) { return oneway.ParseBenchStamp(msg) }
