package statsd

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/mdbus/mdbus/internal/cfgcheck"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
)

// Collector defaults.
const (
	DefaultFlushInterval = 10 * time.Second
	DefaultMaxSeries     = 100_000
	DefaultMaxSetMembers = 10_000
	DefaultMaxHistograms = 4096
	DefaultHistDigits    = 2
	DefaultIdleExpiry    = 5 * time.Minute
	DefaultStreamTimeout = 5 * time.Second
	// HistScale is the factor values are multiplied by before they are
	// recorded in a histogram (which counts integers): 1000 keeps three
	// decimals of a millisecond timer.
	HistScale = 1000
	// HistMax is the largest value a histogram records, in the client's
	// unit (larger values are recorded as HistMax and counted as
	// clamped; exact min, max, sum and mean are kept regardless).
	HistMax = 1e9
	// flushQueue is how many closed intervals may wait for the backends
	// before message delivery blocks (backpressure).
	flushQueue = 16
)

// DefaultPercentiles are the percentiles reported for sampled types.
var DefaultPercentiles = []float64{50, 90, 95, 99}

// CollectorConfig configures a Collector. Bus.Group is required; zero
// and negative values follow RelayConfig's rule.
type CollectorConfig struct {
	// Bus is the subscriber's config: Group required; set Retransmitter
	// to the relay's retransmit address for NAK recovery. OnMessage,
	// OnLoss and OnEnd are the collector's and must be nil.
	Bus subscriber.Config
	// FlushInterval is the aggregation interval; default 10 s. Intervals
	// are aligned to the Unix epoch of the relay clock carried in each bus
	// message (see "Flush intervals" in the package doc).
	FlushInterval time.Duration
	// Percentiles reported for timers, histograms and distributions, each
	// in (0, 100]; default 50, 90, 95, 99.
	Percentiles []float64
	// HistDigits is the HdrHistogram precision in significant decimal
	// digits, 1 to 5; default 2 (values within 1%, about 34 KiB per
	// histogram).
	HistDigits int
	// MaxSeries bounds the distinct series (name, type and tag set) held;
	// a new one beyond it is refused and counted. Default 100,000.
	MaxSeries int
	// MaxSetMembers bounds the distinct members of one set in one
	// interval; more are counted, not kept. Default 10,000.
	MaxSetMembers int
	// MaxHistograms bounds the histograms held at once (one per sampled
	// series with data in an open interval); series beyond it report no
	// percentiles for that interval and are counted. Default 4096.
	MaxHistograms int
	// DeleteIdle omits series with no data in an interval from its flush,
	// as etsy's deleteIdleStats does. Default false: idle counters flush
	// as 0, gauges keep their value.
	DeleteIdle bool
	// IdleExpiry forgets a series after this long (stream time) without
	// data; default 5 minutes.
	IdleExpiry time.Duration
	// StreamTimeout: a stream not heard from for this long (collector
	// clock) no longer holds back the closing of intervals; default 5 s.
	StreamTimeout time.Duration
	// Limits bound each line read off the bus.
	Limits Limits
	// Backends receive every flush, in interval order, on the collector's
	// flushing goroutine.
	Backends []Backend
	// SelfMetrics says when a flush carries the collector's own series
	// and the relays' (names starting with SelfPrefix). Default
	// SelfMetricsAuto.
	SelfMetrics SelfMetrics
	// Logger receives losses, the series cap being reached (once per
	// interval) and backend errors. Default: discard.
	Logger *slog.Logger
}

// SelfMetrics says when a flush carries the self-metrics, the series whose
// names start with SelfPrefix.
type SelfMetrics uint8

const (
	// SelfMetricsAuto writes the collector's own series in a flush that
	// holds another series or a non-zero count of the collector's (bad
	// lines, refusals, losses), and a relay's series only in an interval
	// it sent them: the flushes of an idle stream are empty.
	SelfMetricsAuto SelfMetrics = iota
	// SelfMetricsAlways writes every self series in every flush, zeros
	// included.
	SelfMetricsAlways
)

// ParseSelfMetrics parses "auto" or "always".
func ParseSelfMetrics(s string) (SelfMetrics, error) {
	switch s {
	case "auto", "":
		return SelfMetricsAuto, nil
	case "always":
		return SelfMetricsAlways, nil
	}
	return 0, fmt.Errorf("%w: self-metrics %q: want auto or always", ErrConfig, s)
}

func (c CollectorConfig) withDefaults() (CollectorConfig, error) {
	if c.Bus.OnMessage != nil || c.Bus.OnLoss != nil || c.Bus.OnEnd != nil {
		return c, fmt.Errorf("%w: Bus.OnMessage, OnLoss and OnEnd belong to the collector", ErrConfig)
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.FlushInterval < time.Millisecond {
		return c, fmt.Errorf("%w: FlushInterval %v: want at least 1ms", ErrConfig, c.FlushInterval)
	}
	if c.Percentiles == nil {
		c.Percentiles = DefaultPercentiles
	}
	for _, p := range c.Percentiles {
		if !(p > 0 && p <= 100) {
			return c, fmt.Errorf("%w: percentile %v: want (0, 100]", ErrConfig, p)
		}
	}
	if c.HistDigits == 0 {
		c.HistDigits = DefaultHistDigits
	}
	if c.HistDigits < 1 || c.HistDigits > 5 {
		return c, fmt.Errorf("%w: HistDigits %d: want 1 to 5", ErrConfig, c.HistDigits)
	}
	if c.SelfMetrics > SelfMetricsAlways {
		return c, fmt.Errorf("%w: SelfMetrics %d", ErrConfig, c.SelfMetrics)
	}
	if err := c.Limits.check(cfgcheck.F("MaxSeries", c.MaxSeries), cfgcheck.F("MaxSetMembers", c.MaxSetMembers),
		cfgcheck.F("MaxHistograms", c.MaxHistograms), cfgcheck.F("IdleExpiry", c.IdleExpiry),
		cfgcheck.F("StreamTimeout", c.StreamTimeout)); err != nil {
		return c, err
	}
	c.MaxSeries = cmp.Or(c.MaxSeries, DefaultMaxSeries)
	c.MaxSetMembers = cmp.Or(c.MaxSetMembers, DefaultMaxSetMembers)
	c.MaxHistograms = cmp.Or(c.MaxHistograms, DefaultMaxHistograms)
	c.IdleExpiry = cmp.Or(c.IdleExpiry, DefaultIdleExpiry)
	c.StreamTimeout = cmp.Or(c.StreamTimeout, DefaultStreamTimeout)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Limits = c.Limits.withDefaults()
	return c, nil
}

// Own metrics of the collector, flushed with every interval. They are
// computed from the stream alone, so two collectors that received the
// same stream flush the same values.
const (
	selfMetrics        = SelfPrefix + "collector.metrics"
	selfBadLines       = SelfPrefix + "collector.bad_lines"
	selfSeries         = SelfPrefix + "collector.series"
	selfSeriesRefused  = SelfPrefix + "collector.series_refused"
	selfMembersRefused = SelfPrefix + "collector.set_members_refused"
	selfHistRefused    = SelfPrefix + "collector.percentiles_refused"
	selfClamped        = SelfPrefix + "collector.values_clamped"
	selfLost           = SelfPrefix + "collector.bus_lost_messages"
	selfBadMessages    = SelfPrefix + "collector.bad_bus_messages"
	selfNonFinite      = SelfPrefix + "collector.non_finite_refused"
)

// The relay's own series (see Relay.publishSelf). They are exempt from
// MaxSeries, so that the relay's evidence (bad lines, kernel drops) is
// still flushed when a flood of names has filled the table: there are at
// most relaySelfSeries of them.
const (
	relaySelfDatagrams = SelfPrefix + "relay.datagrams"
	relaySelfMetrics   = SelfPrefix + "relay.metrics"
	relaySelfKernDrops = SelfPrefix + "relay.kernel_drops"
	relaySelfBadLines  = SelfPrefix + "relay.bad_lines"
	relaySelfSeries    = 3 + int(NumReasons) - 1
)

// isRelaySelf reports whether a counter with this name and (sorted,
// deduplicated) tags is one of the relay's own series.
func isRelaySelf(typ Type, name []byte, tags [][]byte) bool {
	if typ != TypeCounter {
		return false
	}
	switch string(name) {
	case relaySelfDatagrams, relaySelfMetrics, relaySelfKernDrops:
		return len(tags) == 0
	case relaySelfBadLines:
		if len(tags) != 1 || !bytes.HasPrefix(tags[0], []byte("reason:")) {
			return false
		}
		r := string(tags[0][len("reason:"):])
		for i := Reason(1); i < NumReasons; i++ {
			if r == reasonNames[i] {
				return true
			}
		}
	}
	return false
}

var selfPrefixBytes = []byte(SelfPrefix)

// seriesInfo is a series known to the collector.
type seriesInfo struct {
	key   string
	name  string
	tags  []string
	typ   Type
	gauge float64 // the gauge's value, kept across intervals
	lastK int64   // last interval with data
	self  bool    // one of the relay's own series: not counted in MaxSeries
}

// acc is a series' aggregate in one interval.
type acc struct {
	s        *seriesInfo
	sum      float64 // counter: sum with rate applied; sampled: sum of values
	count    float64 // sampled: samples with rate applied
	n        uint64  // sampled: values received
	min, max float64
	set      bool    // gauge: a value was set
	val      float64 // gauge: the value set
	delta    float64 // gauge: deltas after the last set
	members  map[string]struct{}
	refused  uint64
	hist     *hdrhistogram.Histogram
	clamped  uint64
}

// bucket is one open flush interval.
type bucket struct {
	k       int64
	accs    map[*seriesInfo]*acc
	metrics uint64
	bad     [NumReasons]uint64
	lost    uint64
	badMsgs uint64
	refused uint64 // series refused
	histRef uint64
	// nonFinite counts metrics refused because they would have made an
	// aggregate infinite or NaN.
	nonFinite uint64
	// Filled at close.
	membersRefused, clamped uint64
}

type streamState struct {
	clock int64 // relay time of the newest message, Unix ns
	heard time.Time
}

// Collector subscribes to the bus and aggregates metrics per flush
// interval. Its methods are safe for concurrent use.
type Collector struct {
	cfg CollectorConfig
	sub *subscriber.Subscriber

	mu       sync.Mutex // guards everything below
	p        *Parser
	m        Metric
	series   map[string]*seriesInfo
	buckets  map[int64]*bucket
	nextK    int64 // the first interval not yet closed; 0 before any message
	streams  map[subscriber.StreamID]*streamState
	selfN    int // relay self series held, beyond MaxSeries' count
	key      []byte
	tagBuf   [][]byte
	freeHist []*hdrhistogram.Histogram
	liveHist int
	lost     uint64 // lost messages not yet attributed to an interval
	closedN  int

	out       chan *Flush
	quit      chan struct{}
	wg        sync.WaitGroup
	closed    bool
	closeOnce sync.Once
	errMu     sync.Mutex
	err       error
}

// NewCollector starts the subscriber, the interval closer and the
// flushing goroutine.
func NewCollector(cfg CollectorConfig) (*Collector, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Collector{
		cfg: cfg, p: NewParser(cfg.Limits), series: map[string]*seriesInfo{}, buckets: map[int64]*bucket{},
		streams: map[subscriber.StreamID]*streamState{}, out: make(chan *Flush, flushQueue), quit: make(chan struct{}),
	}
	bus := cfg.Bus
	bus.OnMessage = c.onMessage
	bus.OnLoss = c.onLoss
	bus.OnEnd = c.onEnd
	c.wg.Add(1)
	go c.runFlush()
	c.sub, err = subscriber.New(bus)
	if err != nil {
		close(c.out)
		c.wg.Wait()
		return nil, fmt.Errorf("statsd: collector: %w", err)
	}
	c.wg.Add(1)
	go c.runTimer()
	return c, nil
}

// Subscriber is the collector's subscriber (for its Stats).
func (c *Collector) Subscriber() *subscriber.Subscriber { return c.sub }

// Close stops the subscriber, flushes the intervals still open (the last
// ones may be partial) and waits for the backends. It returns the first
// backend error. A second Close waits for the first and returns
// ErrClosed.
func (c *Collector) Close() error {
	err := ErrClosed
	c.closeOnce.Do(func() { err = c.close() })
	return err
}

func (c *Collector) close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	close(c.quit)
	err := c.sub.Close()
	c.mu.Lock()
	c.closeUpTo(math.MaxInt64)
	close(c.out)
	c.mu.Unlock()
	c.wg.Wait()
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return errors.Join(err, c.err)
}

func (c *Collector) interval(t int64) int64 {
	f := int64(c.cfg.FlushInterval)
	k := t / f
	if t < 0 && t%f != 0 {
		k--
	}
	return k
}

func (c *Collector) onMessage(m subscriber.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	st := c.streams[m.Stream]
	if st == nil {
		st = &streamState{}
		c.streams[m.Stream] = st
	}
	st.heard = time.Now()
	msg, err := ParseMessage(m.Data)
	if err != nil {
		b := c.bucketFor(st.clock)
		if b != nil {
			b.badMsgs++
		}
		return
	}
	st.clock = max(st.clock, msg.Time)
	b := c.bucketFor(st.clock)
	if b == nil {
		return
	}
	if c.lost > 0 {
		b.lost += c.lost
		c.lost = 0
	}
	c.p.Reset(msg.Lines, false)
	for {
		ok, r := c.p.Next(&c.m)
		if !ok {
			break
		}
		if r != ReasonNone {
			b.bad[r]++
			continue
		}
		if !bytes.HasPrefix(c.m.Name, selfPrefixBytes) {
			b.metrics++
		}
		c.add(b, &c.m)
	}
	c.advance()
}

// bucketFor returns the open bucket of time t: a time in an interval
// already closed (a second relay behind the first) goes to the oldest
// open one.
func (c *Collector) bucketFor(t int64) *bucket {
	k := c.interval(t)
	if t == 0 && c.nextK == 0 {
		return nil // a stream without a clock yet
	}
	if c.nextK == 0 {
		c.nextK = k
	}
	k = max(k, c.nextK)
	b := c.buckets[k]
	if b == nil {
		b = &bucket{k: k, accs: map[*seriesInfo]*acc{}}
		c.buckets[k] = b
	}
	return b
}

func (c *Collector) onLoss(l subscriber.Loss) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lost += l.Len()
	c.cfg.Logger.Warn("statsd collector: bus messages lost", "stream", l.Stream.String(), "from", uint64(l.From), "to", uint64(l.To))
}

func (c *Collector) onEnd(id subscriber.StreamID, _ wire.Seq) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.streams, id)
	c.advance()
}

// advance closes every interval that all live streams have passed.
func (c *Collector) advance() {
	if len(c.streams) == 0 {
		return
	}
	var low int64 = math.MaxInt64
	for _, st := range c.streams {
		low = min(low, st.clock)
	}
	if low == 0 {
		return
	}
	c.closeUpTo(c.interval(low))
}

// closeUpTo closes the open intervals before k, in order.
func (c *Collector) closeUpTo(k int64) {
	if c.nextK == 0 {
		return
	}
	for c.nextK < k {
		if len(c.buckets) == 0 && k == math.MaxInt64 {
			return
		}
		c.closeBucket(c.nextK)
		c.nextK++
		if len(c.buckets) == 0 && k == math.MaxInt64 {
			return
		}
	}
}

func (c *Collector) runTimer() {
	defer c.wg.Done()
	t := time.NewTicker(min(c.cfg.StreamTimeout/4, time.Second))
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-t.C:
			c.mu.Lock()
			for id, st := range c.streams {
				if time.Since(st.heard) > c.cfg.StreamTimeout {
					delete(c.streams, id)
				}
			}
			c.advance()
			c.mu.Unlock()
		}
	}
}

// add aggregates one valid metric into b. A metric that would take an
// aggregate (a sum, a count, a rate, a gauge) beyond ±MaxFloat64 is
// refused whole and counted (non_finite_refused): a flush never holds an
// infinite or NaN value.
func (c *Collector) add(b *bucket, m *Metric) {
	s := c.lookup(b, m)
	if s == nil {
		return
	}
	s.lastK = b.k
	a := b.accs[s]
	if a == nil {
		a = &acc{s: s, min: math.Inf(1), max: math.Inf(-1)}
		b.accs[s] = a
	}
	secs := c.cfg.FlushInterval.Seconds()
	switch m.Type {
	case TypeCounter:
		sum := a.sum
		for i := range m.N {
			sum += m.Values[i] / m.Rate
		}
		if !finite(sum) || !finite(sum/secs) {
			b.nonFinite++
			return
		}
		a.sum = sum
	case TypeGauge:
		set, val, delta := a.set, a.val, a.delta
		for i := range m.N {
			if m.Delta[i] {
				delta += m.Values[i]
			} else {
				set, val, delta = true, m.Values[i], 0
			}
		}
		base := s.gauge
		if set {
			base = val
		}
		if !finite(delta) || !finite(base+delta) {
			b.nonFinite++
			return
		}
		a.set, a.val, a.delta = set, val, delta
	case TypeSet:
		for i := range m.N {
			mem := m.Member(i)
			if _, ok := a.members[string(mem)]; ok {
				continue
			}
			if len(a.members) >= c.cfg.MaxSetMembers {
				a.refused++
				continue
			}
			if a.members == nil {
				a.members = map[string]struct{}{}
			}
			a.members[string(mem)] = struct{}{}
		}
	default:
		sum, count := a.sum, a.count
		for i := range m.N {
			sum += m.Values[i]
			count += 1 / m.Rate
		}
		if !finite(sum) || !finite(count/secs) {
			b.nonFinite++
			return
		}
		a.sum, a.count = sum, count
		if a.hist == nil && a.n == 0 {
			a.hist = c.getHist(b)
		}
		for i := range m.N {
			v := m.Values[i]
			a.n++
			a.min, a.max = min(a.min, v), max(a.max, v)
			if a.hist != nil {
				iv := int64(0)
				switch {
				case v < 0:
					a.clamped++
				case v > HistMax:
					a.clamped++
					iv = HistMax * HistScale
				default:
					iv = int64(math.Round(v * HistScale))
				}
				a.hist.RecordValue(iv)
			}
		}
	}
}

func (c *Collector) getHist(b *bucket) *hdrhistogram.Histogram {
	if n := len(c.freeHist); n > 0 {
		h := c.freeHist[n-1]
		c.freeHist = c.freeHist[:n-1]
		c.liveHist++
		return h
	}
	if c.liveHist >= c.cfg.MaxHistograms {
		b.histRef++
		return nil
	}
	c.liveHist++
	return hdrhistogram.New(1, HistMax*HistScale, c.cfg.HistDigits)
}

func (c *Collector) putHist(h *hdrhistogram.Histogram) {
	h.Reset()
	c.liveHist--
	c.freeHist = append(c.freeHist, h)
}

// lookup finds or creates the series of m: its key is the type, the name
// and the sorted, deduplicated tags. Nil means refused (MaxSeries).
func (c *Collector) lookup(b *bucket, m *Metric) *seriesInfo {
	c.tagBuf = c.tagBuf[:0]
	if len(m.Tags) > 0 {
		t := m.Tags
		for {
			i := bytes.IndexByte(t, ',')
			if i < 0 {
				c.tagBuf = append(c.tagBuf, t)
				break
			}
			c.tagBuf = append(c.tagBuf, t[:i])
			t = t[i+1:]
		}
		slices.SortFunc(c.tagBuf, bytes.Compare)
		c.tagBuf = slices.CompactFunc(c.tagBuf, bytes.Equal)
	}
	k := append(append(append(c.key[:0], m.Type.Code()...), 0), m.Name...)
	for _, t := range c.tagBuf {
		k = append(append(k, 0), t...)
	}
	c.key = k
	if s := c.series[string(k)]; s != nil {
		return s
	}
	self := isRelaySelf(m.Type, m.Name, c.tagBuf)
	if !self && len(c.series)-c.selfN >= c.cfg.MaxSeries {
		b.refused++
		return nil
	}
	s := &seriesInfo{key: string(k), name: string(m.Name), typ: m.Type, self: self}
	for _, t := range c.tagBuf {
		s.tags = append(s.tags, string(t))
	}
	c.series[s.key] = s
	if self {
		c.selfN++
	}
	return s
}

// closeBucket turns interval k into a Flush and queues it for the
// backends.
func (c *Collector) closeBucket(k int64) {
	b := c.buckets[k]
	delete(c.buckets, k)
	if b == nil {
		b = &bucket{k: k}
	}
	if c.lost > 0 {
		b.lost += c.lost
		c.lost = 0
	}
	f := &Flush{Start: time.Unix(0, k*int64(c.cfg.FlushInterval)).UTC(), Interval: c.cfg.FlushInterval, Percentiles: c.cfg.Percentiles}
	secs := c.cfg.FlushInterval.Seconds()
	expireK := int64(c.cfg.IdleExpiry / c.cfg.FlushInterval)
	always := c.cfg.SelfMetrics == SelfMetricsAlways
	others := false // a series other than the relays' idle self series
	for key, s := range c.series {
		a := b.accs[s]
		if a == nil {
			if k-s.lastK > expireK {
				delete(c.series, key)
				if s.self {
					c.selfN--
				}
				continue
			}
			if c.cfg.DeleteIdle || (s.self && !always) {
				continue
			}
		}
		others = true
		out := Series{Name: s.name, Tags: s.tags, Type: s.typ}
		switch s.typ {
		case TypeCounter:
			if a != nil {
				out.Count = a.sum
			}
			out.Rate = out.Count / secs
		case TypeGauge:
			if a != nil {
				g := s.gauge
				if a.set {
					g = a.val
				}
				if finite(g + a.delta) {
					g += a.delta
				} else {
					// The gauge moved (another interval closed) since
					// add checked the deltas: drop them.
					b.nonFinite++
				}
				s.gauge = g
			}
			out.Value = s.gauge
		case TypeSet:
			if a != nil {
				out.Distinct = len(a.members)
				out.Refused = a.refused
				b.membersRefused += a.refused
			}
		default:
			if a != nil && a.n > 0 {
				out.Count, out.N, out.Sum, out.Min, out.Max = a.count, a.n, a.sum, a.min, a.max
				out.Mean = a.sum / float64(a.n)
				out.Rate = a.count / secs
				b.clamped += a.clamped
				if a.hist != nil {
					out.Values = make([]float64, len(c.cfg.Percentiles))
					for i, p := range c.cfg.Percentiles {
						v := float64(a.hist.ValueAtPercentile(p)) / HistScale
						out.Values[i] = min(max(v, a.min), a.max)
					}
				}
			}
			if a != nil && a.hist != nil {
				c.putHist(a.hist)
			}
		}
		f.Series = append(f.Series, out)
	}
	if b.refused > 0 {
		c.cfg.Logger.Warn("statsd collector: series cap reached, new series refused (counted in "+selfSeriesRefused+")",
			"interval_end", f.Start.Add(f.Interval), "refused", b.refused, "max_series", c.cfg.MaxSeries)
	}
	// The collector's own metrics.
	counts := b.metrics + b.refused + b.membersRefused + b.histRef + b.clamped + b.lost + b.badMsgs + b.nonFinite
	for _, n := range b.bad {
		counts += n
	}
	if always || others || counts > 0 {
		self := func(name string, typ Type, v float64, tags ...string) {
			s := Series{Name: name, Type: typ, Tags: tags}
			if typ == TypeCounter {
				s.Count, s.Rate = v, v/secs
			} else {
				s.Value = v
			}
			f.Series = append(f.Series, s)
		}
		self(selfMetrics, TypeCounter, float64(b.metrics))
		for r := Reason(1); r < NumReasons; r++ {
			if b.bad[r] > 0 {
				self(selfBadLines, TypeCounter, float64(b.bad[r]), "reason:"+r.String())
			}
		}
		self(selfSeries, TypeGauge, float64(len(c.series)))
		self(selfSeriesRefused, TypeCounter, float64(b.refused))
		self(selfMembersRefused, TypeCounter, float64(b.membersRefused))
		self(selfHistRefused, TypeCounter, float64(b.histRef))
		self(selfClamped, TypeCounter, float64(b.clamped))
		self(selfLost, TypeCounter, float64(b.lost))
		self(selfBadMessages, TypeCounter, float64(b.badMsgs))
		self(selfNonFinite, TypeCounter, float64(b.nonFinite))
	}
	f.Lost = b.lost
	slices.SortFunc(f.Series, func(x, y Series) int {
		return cmp.Or(strings.Compare(x.Name, y.Name), cmp.Compare(x.Type, y.Type), slices.Compare(x.Tags, y.Tags))
	})
	c.closedN++
	c.out <- f
}

func (c *Collector) runFlush() {
	defer c.wg.Done()
	for f := range c.out {
		for _, be := range c.cfg.Backends {
			if err := be.WriteFlush(f); err != nil {
				c.cfg.Logger.Error("statsd collector: backend", "err", err)
				c.errMu.Lock()
				if c.err == nil {
					c.err = err
				}
				c.errMu.Unlock()
			}
		}
	}
}
