package bench

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"sort"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram geometry: nanoseconds from 1 ns to 60 s at 3 significant
// digits (0.1% resolution at every magnitude).
const (
	histLowest  = 1
	histHighest = int64(60 * time.Second)
	histDigits  = 3
)

func newHist() *hdr.Histogram { return hdr.New(histLowest, histHighest, histDigits) }

// Recorder records latencies into an interval histogram and hands each
// finished interval to a collector, which merges it into the series total
// and writes it to the interval log. The histogram package is not safe for
// concurrent use, so every recording goroutine owns its own Recorder
// (Merge happens at report time, in the collector).
//
// A Recorder is not safe for concurrent use. Record does not allocate
// except, once per interval, when the collector has no spare histogram.
type Recorder struct {
	series, tag string
	coll        *collector
	cur         *hdr.Histogram
	curStart    int64 // CLOCK_MONOTONIC ns
	every       int64
	count       int64
	rangeErrs   int64
	droppedRots int64 // rotations skipped because the collector lagged
}

// Record records value v (ns) taken at time now (CLOCK_MONOTONIC ns). A
// value outside the histogram's range is counted, not recorded.
func (r *Recorder) Record(now, v int64) {
	if now-r.curStart >= r.every {
		r.rotate(now)
	}
	if r.cur.RecordValue(v) != nil {
		r.rangeErrs++
		return
	}
	r.count++
}

// rotate hands the current interval to the collector without blocking and
// starts the next. When the collector's queue is full the interval is
// simply extended.
func (r *Recorder) rotate(now int64) {
	if r.cur.TotalCount() == 0 {
		r.curStart = now
		return
	}
	var next *hdr.Histogram
	select {
	case next = <-r.coll.free:
	default:
		next = newHist()
	}
	select {
	case r.coll.in <- interval{series: r.series, tag: r.tag, h: r.cur, start: r.curStart, end: now}:
		r.cur, r.curStart = next, now
	default:
		r.droppedRots++
		select {
		case r.coll.free <- next:
		default:
		}
	}
}

// Flush hands the last interval to the collector, blocking until it is
// accepted, and adds the range errors to the series. Call it once, from the
// owning goroutine or after it has stopped.
func (r *Recorder) Flush(now int64) {
	r.coll.addRangeErrors(r.series, r.rangeErrs)
	r.rangeErrs = 0
	if r.cur.TotalCount() == 0 {
		return
	}
	r.coll.in <- interval{series: r.series, tag: r.tag, h: r.cur, start: r.curStart, end: now}
	r.cur = newHist()
	r.curStart = now
}

type interval struct {
	series, tag string
	h           *hdr.Histogram
	start, end  int64
	ack         chan struct{} // set (and h nil) by sync
}

// collector owns the series totals and the interval log. One goroutine
// (run) merges and encodes intervals; the other methods are safe for
// concurrent use and lock mu.
type collector struct {
	base  int64 // CLOCK_MONOTONIC ns of time 0 in the interval log
	every int64
	in    chan interval
	free  chan *hdr.Histogram
	done  chan struct{}
	once  sync.Once

	mu        sync.Mutex
	totals    map[string]*hdr.Histogram
	rangeErrs map[string]int64
	// intervals are kept sparse (the non-zero counts) and encoded only
	// when the log is written: compressing a histogram takes a millisecond
	// or two of CPU, which during a run would delay the receivers on a
	// small machine once per interval.
	intervals []sparseInterval
	// imported holds interval log lines from child processes.
	imported bytes.Buffer
}

// sparseInterval is an interval histogram reduced to its non-zero counts.
type sparseInterval struct {
	tag            string
	startMs, endMs int64
	idx            []int32
	cnt            []int64
}

func sparse(h *hdr.Histogram) (idx []int32, cnt []int64) {
	for i, n := range h.Export().Counts {
		if n != 0 {
			idx = append(idx, int32(i))
			cnt = append(cnt, n)
		}
	}
	return idx, cnt
}

// dense rebuilds the histogram of a sparse interval.
func (si sparseInterval) dense() *hdr.Histogram {
	h := newHist()
	snap := h.Export()
	for i, k := range si.idx {
		snap.Counts[k] = si.cnt[i]
	}
	d := hdr.Import(snap)
	d.SetTag(si.tag)
	d.SetStartTimeMs(si.startMs)
	d.SetEndTimeMs(si.endMs)
	return d
}

func newCollector(base int64, every time.Duration) *collector {
	c := &collector{
		base:      base,
		every:     int64(every),
		in:        make(chan interval, 64),
		free:      make(chan *hdr.Histogram, 64),
		done:      make(chan struct{}),
		totals:    map[string]*hdr.Histogram{},
		rangeErrs: map[string]int64{},
	}
	go c.run()
	return c
}

// recorder returns a new Recorder for series, tagged tag in the interval
// log (a tag has no spaces or commas).
func (c *collector) recorder(series, tag string, now int64) *Recorder {
	return &Recorder{series: series, tag: tag, coll: c, cur: newHist(), curStart: now, every: c.every}
}

func (c *collector) run() {
	defer close(c.done)
	for iv := range c.in {
		if iv.ack != nil {
			close(iv.ack)
			continue
		}
		c.add(iv)
		iv.h.Reset()
		select {
		case c.free <- iv.h:
		default:
		}
	}
}

func (c *collector) add(iv interval) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.totals[iv.series]
	if t == nil {
		t = newHist()
		c.totals[iv.series] = t
	}
	t.Merge(iv.h)
	idx, cnt := sparse(iv.h)
	c.intervals = append(c.intervals, sparseInterval{
		tag: iv.tag, startMs: (iv.start - c.base) / 1e6, endMs: (iv.end - c.base) / 1e6, idx: idx, cnt: cnt,
	})
}

// logLines encodes the intervals as interval log lines (no header).
func (c *collector) logLines() (string, error) {
	c.mu.Lock()
	ivs := append([]sparseInterval(nil), c.intervals...)
	var b bytes.Buffer
	b.Write(c.imported.Bytes())
	c.mu.Unlock()
	w := hdr.NewHistogramLogWriter(&b)
	for _, iv := range ivs {
		if err := w.OutputIntervalHistogram(iv.dense()); err != nil {
			return b.String(), fmt.Errorf("bench: interval log: %w", err)
		}
	}
	return b.String(), nil
}

func (c *collector) addRangeErrors(series string, n int64) {
	if n == 0 {
		return
	}
	c.mu.Lock()
	c.rangeErrs[series] += n
	c.mu.Unlock()
}

// settle brings the totals up to date: it syncs, unless the collector
// has stopped, when they are final.
func (c *collector) settle() {
	select {
	case <-c.done:
	default:
		c.sync()
	}
}

// sync returns once everything queued before the call is merged.
func (c *collector) sync() {
	ack := make(chan struct{})
	c.in <- interval{ack: ack}
	<-ack
}

// close stops the collector goroutine after it has merged everything
// queued. Recorders must not be used afterwards. Safe to call twice.
func (c *collector) close() {
	c.once.Do(func() { close(c.in) })
	<-c.done
}

// total returns a copy of a series' merged histogram (empty if none) and its
// range errors.
func (c *collector) total(series string) (*hdr.Histogram, int64) {
	c.settle()
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.totals[series]; t != nil {
		return t.Clone(), c.rangeErrs[series]
	}
	return newHist(), c.rangeErrs[series]
}

// series lists the series names in sorted order.
func (c *collector) seriesNames() []string {
	c.settle()
	c.mu.Lock()
	defer c.mu.Unlock()
	names := make([]string, 0, len(c.totals))
	for n := range c.totals {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// exported is a series as a child process hands it to its parent.
type exported struct {
	Series      string `json:"series"`
	Hist        string `json:"hist"` // V2 compressed, base64 (as in .hlog lines)
	RangeErrors int64  `json:"range_errors"`
}

// export encodes every series total and returns the interval log lines.
func (c *collector) export() ([]exported, string, error) {
	var out []exported
	for _, s := range c.seriesNames() {
		h, re := c.total(s)
		enc, err := h.Encode(hdr.V2CompressedEncodingCookieBase)
		if err != nil {
			return nil, "", fmt.Errorf("bench: encode histogram %s: %w", s, err)
		}
		out = append(out, exported{Series: s, Hist: string(enc), RangeErrors: re})
	}
	lines, err := c.logLines()
	return out, lines, err
}

// importChild merges series and interval log lines exported by a child.
func (c *collector) importChild(ex []exported, hlog string) error {
	for _, e := range ex {
		if _, err := base64.StdEncoding.DecodeString(e.Hist); err != nil {
			return fmt.Errorf("bench: child histogram %s: %w", e.Series, err)
		}
		h, err := hdr.Decode([]byte(e.Hist))
		if err != nil {
			return fmt.Errorf("bench: child histogram %s: %w", e.Series, err)
		}
		c.mu.Lock()
		t := c.totals[e.Series]
		if t == nil {
			t = newHist()
			c.totals[e.Series] = t
		}
		t.Merge(h)
		c.rangeErrs[e.Series] += e.RangeErrors
		c.mu.Unlock()
	}
	c.mu.Lock()
	c.imported.WriteString(hlog)
	c.mu.Unlock()
	return nil
}

// hlog returns the interval log: header lines, then every interval.
func (c *collector) hlog(start time.Time) ([]byte, error) {
	c.settle()
	var b bytes.Buffer
	w := hdr.NewHistogramLogWriter(&b)
	_ = w.OutputLogFormatVersion()
	_ = w.OutputComment("[mdbus bench: values in nanoseconds; interval timestamps in seconds since the start time; one tag per series and receiver]")
	_ = w.OutputStartTime(start.UnixMilli())
	_ = w.OutputLegend()
	lines, err := c.logLines()
	b.WriteString(lines)
	return b.Bytes(), err
}
