// Package oneway measures one-way latency from a send stamp inside each
// message: the publisher writes the wall-clock time into the ITCH 5.0
// timestamp field of a synthetic message (nanoseconds since midnight, 6
// bytes at offset 5, as ITCH defines it), and a subscriber on the same
// host (same clock) subtracts it from the time it delivers the message.
// The MoldUDP64 header stays standard: the stamp is ordinary ITCH content.
//
// Across hosts the figure includes the clock offset between them; use
// PTP-synchronised clocks or the bench package's round trip there.
//
// A Recorder keeps an HdrHistogram per interval; it is not safe for
// concurrent use (one per delivering goroutine, or guard it).
package oneway

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
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

// Highest is the largest latency a Recorder records; longer ones are
// recorded as Highest.
const Highest = 10 * time.Second

// Recorder collects latencies into an HdrHistogram (1 ns to 10 s, 3
// significant digits) for one interval at a time. Record never allocates.
type Recorder struct {
	h         *hdrhistogram.Histogram
	unstamped uint64
	total     *hdrhistogram.Histogram
	totalUnst uint64
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{h: newHist(), total: newHist()}
}

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, int64(Highest), 3) }

// Record records the latency of msg delivered at now, or counts it as
// unstamped.
func (r *Recorder) Record(msg []byte, now time.Time) {
	d, ok := Latency(msg, now, Highest)
	if !ok {
		r.unstamped++
		return
	}
	r.h.RecordValue(max(int64(d), 1))
}

// Summary is the percentiles of an interval.
type Summary struct {
	Count, Unstamped    uint64
	P50, P99, P999, Max time.Duration
}

// String formats s in a dozen columns: "p50 12µs p99 40µs p99.9 90µs max 1.2ms".
func (s Summary) String() string {
	if s.Count == 0 {
		return "latency -"
	}
	return fmt.Sprintf("p50 %s p99 %s p99.9 %s max %s", short(s.P50), short(s.P99), short(s.P999), short(s.Max))
}

// short formats d with 2-3 significant digits, at most 6 columns.
func short(d time.Duration) string {
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d)
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.0fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

func summarize(h *hdrhistogram.Histogram, unstamped uint64) Summary {
	return Summary{Count: uint64(h.TotalCount()), Unstamped: unstamped,
		P50: time.Duration(h.ValueAtQuantile(50)), P99: time.Duration(h.ValueAtQuantile(99)),
		P999: time.Duration(h.ValueAtQuantile(99.9)), Max: time.Duration(h.Max())}
}

// Interval returns the summary of the latencies since the last call and
// starts a new interval; Total keeps them all.
func (r *Recorder) Interval() Summary {
	s := summarize(r.h, r.unstamped)
	r.total.Merge(r.h)
	r.totalUnst += r.unstamped
	r.h.Reset()
	r.unstamped = 0
	return s
}

// Total returns the summary of every interval closed so far plus the
// current one.
func (r *Recorder) Total() Summary {
	t := newHist()
	t.Merge(r.total)
	t.Merge(r.h)
	return summarize(t, r.totalUnst+r.unstamped)
}
