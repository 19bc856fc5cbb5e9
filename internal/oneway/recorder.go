package oneway

import (
	"fmt"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

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
