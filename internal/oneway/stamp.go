// Package oneway holds the latency stamps of mdbus, the send times that
// messages carry so that a receiver can measure one-way latency, and a
// Recorder of the latencies the ITCH stamp gives. The MoldUDP64 header
// stays standard: a stamp is message content.
//
// # Stamps
//
// There are two, one per kind of message; both are part of their
// payload formats (other processes read them), so neither changes:
//
//   - The ITCH stamp (Stamp, Latency): the publisher writes the
//     wall-clock time into the ITCH 5.0 timestamp field of a synthetic
//     message (nanoseconds since midnight, 6 bytes at offset 5, as ITCH
//     defines it), so the feed stays valid ITCH (pub --synthetic, the
//     demo). A subscriber subtracts it from the time it delivers the
//     message. Across hosts the figure includes the clock offset between
//     them; use PTP-synchronised clocks or the bench round trip there.
//   - The bench stamp (PutBenchStamp, ParseBenchStamp): the first 16
//     bytes of every benchmark message, the scheduled send time on
//     CLOCK_MONOTONIC and the benchmark sequence number, which the bench
//     package's receivers and peer programs read (bench.PutStamp).
//
// A Recorder keeps an HdrHistogram per interval; it is not safe for
// concurrent use (one per delivering goroutine, or guard it).
package oneway

import (
	"encoding/binary"
	"time"

	"github.com/mdbus/mdbus/internal/synth"
)

// ITCH timestamp field: part of the ITCH 5.0 message format.
const (
	stampOffset = 5
	stampLen    = 6
	day         = int64(24 * time.Hour)
)

// sinceMidnight returns t as nanoseconds since the last UTC midnight.
func sinceMidnight(t time.Time) int64 {
	ns := t.UnixNano() % day
	if ns < 0 {
		ns += day
	}
	return ns
}

// Stamp writes t into the timestamp field of the ITCH message msg. It
// reports false, and leaves msg alone, when msg is not an ITCH message of a
// type internal/synth generates.
func Stamp(msg []byte, t time.Time) bool {
	if !isITCH(msg) {
		return false
	}
	ns := uint64(sinceMidnight(t))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], ns)
	copy(msg[stampOffset:stampOffset+stampLen], b[2:])
	return true
}

func isITCH(msg []byte) bool {
	return len(msg) > 0 && synth.Size(msg[0]) == len(msg)
}

// Latency returns now minus msg's stamp. ok is false when msg is not a
// synthetic ITCH message or the difference is not a plausible one-way
// latency (negative, or more than max): an unstamped message.
func Latency(msg []byte, now time.Time, max time.Duration) (d time.Duration, ok bool) {
	if !isITCH(msg) {
		return 0, false
	}
	var b [8]byte
	copy(b[2:], msg[stampOffset:stampOffset+stampLen])
	sent := int64(binary.BigEndian.Uint64(b[:]))
	if sent >= day {
		return 0, false
	}
	diff := sinceMidnight(now) - sent
	if diff < -day/2 { // stamped before midnight, received after
		diff += day
	}
	if diff < 0 || diff > int64(max) {
		return 0, false
	}
	return time.Duration(diff), true
}

// Layout of the bench stamp at the start of every benchmark message. Part
// of the bench payload format (other processes and the peer programs read
// it); do not change.
const (
	BenchTimeOffset = 0
	BenchTimeLen    = 8
	BenchSeqOffset  = BenchTimeOffset + BenchTimeLen // 8
	BenchSeqLen     = 8
	// BenchStampLen is the size of the bench stamp, and so the smallest
	// benchmark message.
	BenchStampLen = BenchSeqOffset + BenchSeqLen // 16
)

// PutBenchStamp writes the scheduled send time (CLOCK_MONOTONIC ns) and
// the benchmark sequence number into the first BenchStampLen bytes of msg,
// which must be at least that long.
func PutBenchStamp(msg []byte, sched int64, seq uint64) {
	binary.BigEndian.PutUint64(msg[BenchTimeOffset:], uint64(sched))
	binary.BigEndian.PutUint64(msg[BenchSeqOffset:], seq)
}

// ParseBenchStamp reads the bench stamp of msg. ok is false when msg is
// shorter than BenchStampLen (not a benchmark message).
func ParseBenchStamp(msg []byte) (sched int64, seq uint64, ok bool) {
	if len(msg) < BenchStampLen {
		return 0, 0, false
	}
	return int64(binary.BigEndian.Uint64(msg[BenchTimeOffset:])), binary.BigEndian.Uint64(msg[BenchSeqOffset:]), true
}
