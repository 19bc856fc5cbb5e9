package statsd

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Flush is one closed interval's aggregates.
type Flush struct {
	// Start is the interval's start (relay clock); it lasts Interval.
	Start    time.Time
	Interval time.Duration
	// Percentiles are the percentiles of Series.Values.
	Percentiles []float64
	// Series are sorted by name, type, then tags; the collector's own
	// metrics (SelfPrefix) are among them.
	Series []Series
	// Lost is the bus messages declared lost in this interval (also in
	// the series mdbus.statsd.collector.bus_lost_messages).
	Lost uint64
}

// Series is one series' aggregate in a Flush.
type Series struct {
	Name string
	Tags []string // sorted, as sent ("k:v" or "k")
	Type Type
	// Counter: Count is the sum (sample rate applied), Rate per second.
	// Timer, histogram, distribution: Count is the samples (sample rate
	// applied), Rate per second, N the values received.
	Count, Rate float64
	// Gauge: the value at the end of the interval.
	Value float64
	// Set: distinct members, and members refused by MaxSetMembers.
	Distinct int
	Refused  uint64
	// Sampled types: exact sum, mean, min and max of the values, and the
	// percentiles (Flush.Percentiles) from the HdrHistogram, nil when
	// no histogram was available (MaxHistograms).
	N                   uint64
	Sum, Mean, Min, Max float64
	Values              []float64
}

// Backend receives flushes on the collector's flushing goroutine.
type Backend interface {
	WriteFlush(f *Flush) error
}

// fmtFloat formats v as the shortest decimal that reads back the same.
func fmtFloat(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1) || v > math.MaxFloat64:
		v = math.MaxFloat64
	case math.IsInf(v, -1):
		v = -math.MaxFloat64
	case math.IsNaN(v):
		v = 0
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// pctName names a percentile as etsy does: 90 -> "90", 99.9 -> "99_9".
func pctName(p float64) string {
	return strings.ReplaceAll(strconv.FormatFloat(p, 'f', -1, 64), ".", "_")
}

// GraphiteWriter writes flushes in the Graphite plaintext protocol, one
// "path value timestamp" line per value, with etsy's non-legacy names:
//
//	stats.counters.NAME.count / .rate
//	stats.gauges.NAME
//	stats.sets.NAME.count
//	stats.timers.NAME.count / .count_ps / .sum / .mean / .lower / .upper / .upper_PCT
//	stats.histograms.NAME.* and stats.distributions.NAME.* likewise
//
// Tags follow the path as Graphite 1.1 tags: ";k=v", a tag without a
// value as ";tag=k". The timestamp is the interval's end in Unix seconds.
type GraphiteWriter struct {
	W      io.Writer
	Prefix string // default "stats."
	buf    []byte
}

// WriteFlush implements Backend.
func (g *GraphiteWriter) WriteFlush(f *Flush) error {
	prefix := g.Prefix
	if prefix == "" {
		prefix = "stats."
	}
	ts := strconv.FormatInt(f.Start.Add(f.Interval).Unix(), 10)
	b := g.buf[:0]
	for i := range f.Series {
		s := &f.Series[i]
		var tags []byte
		for _, t := range s.Tags {
			tags = append(tags, ';')
			if k, v, ok := strings.Cut(t, ":"); ok {
				tags = append(append(append(tags, graphiteSafe(k)...), '='), graphiteSafe(v)...)
			} else {
				tags = append(append(tags, "tag="...), graphiteSafe(t)...)
			}
		}
		line := func(kind, name, stat string, v float64) {
			b = append(append(append(b, prefix...), kind...), name...)
			if stat != "" {
				b = append(append(b, '.'), stat...)
			}
			b = append(b, tags...)
			b = append(fmtFloat(append(b, ' '), v), ' ')
			b = append(append(b, ts...), '\n')
		}
		switch s.Type {
		case TypeCounter:
			line("counters.", s.Name, "count", s.Count)
			line("counters.", s.Name, "rate", s.Rate)
		case TypeGauge:
			line("gauges.", s.Name, "", s.Value)
		case TypeSet:
			line("sets.", s.Name, "count", float64(s.Distinct))
		default:
			kind := s.Type.String() + "s."
			line(kind, s.Name, "count", s.Count)
			line(kind, s.Name, "count_ps", s.Rate)
			if s.N > 0 {
				line(kind, s.Name, "sum", s.Sum)
				line(kind, s.Name, "mean", s.Mean)
				line(kind, s.Name, "lower", s.Min)
				line(kind, s.Name, "upper", s.Max)
				for j, v := range s.Values {
					line(kind, s.Name, "upper_"+pctName(f.Percentiles[j]), v)
				}
			}
		}
	}
	g.buf = b
	_, err := g.W.Write(b)
	return err
}

func graphiteSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ';' || r == '=' || r == ' ' || r == '~' || r == '!' || r == '^' {
			return '_'
		}
		return r
	}, s)
}

// JSONWriter writes one JSON object per series per flush:
//
//	{"ts":1700000010,"interval":10,"name":"a","type":"counter","tags":["k:v"],"count":3,"rate":0.3}
//
// ts is the interval's end in Unix seconds. Sampled types add n, sum,
// mean, min, max and "p50"... for the percentiles; sets "distinct" and
// "refused"; gauges "value".
type JSONWriter struct {
	W   io.Writer
	buf []byte
}

// WriteFlush implements Backend.
func (j *JSONWriter) WriteFlush(f *Flush) error {
	b := j.buf[:0]
	ts := f.Start.Add(f.Interval).Unix()
	for i := range f.Series {
		s := &f.Series[i]
		b = strconv.AppendInt(append(b, `{"ts":`...), ts, 10)
		b = fmtFloat(append(b, `,"interval":`...), f.Interval.Seconds())
		b = strconv.AppendQuote(append(b, `,"name":`...), s.Name)
		b = strconv.AppendQuote(append(b, `,"type":`...), s.Type.String())
		b = append(b, `,"tags":[`...)
		for k, t := range s.Tags {
			if k > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, t)
		}
		b = append(b, ']')
		num := func(k string, v float64) { b = fmtFloat(append(append(append(b, `,"`...), k...), `":`...), v) }
		switch s.Type {
		case TypeCounter:
			num("count", s.Count)
			num("rate", s.Rate)
		case TypeGauge:
			num("value", s.Value)
		case TypeSet:
			num("distinct", float64(s.Distinct))
			num("refused", float64(s.Refused))
		default:
			num("count", s.Count)
			num("rate", s.Rate)
			num("n", float64(s.N))
			if s.N > 0 {
				num("sum", s.Sum)
				num("mean", s.Mean)
				num("min", s.Min)
				num("max", s.Max)
				for k, v := range s.Values {
					num("p"+pctName(f.Percentiles[k]), v)
				}
			}
		}
		b = append(b, "}\n"...)
	}
	j.buf = b
	_, err := j.W.Write(b)
	return err
}

// appendJSONString quotes s for JSON (strconv.Quote's escapes are Go's,
// not JSON's, for some control characters; tags have none, but stay safe).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r < 0x20:
			b = fmt.Appendf(b, `\u%04x`, r)
		default:
			b = append(b, string(r)...)
		}
	}
	return append(b, '"')
}

// Prometheus renders the collector's state in the Prometheus text
// exposition format, as statsd_exporter names it: the name with every
// character outside [a-zA-Z0-9_:] replaced by '_', tags "k:v" as labels
// (tags without a value are dropped: a label needs one). Counters are
// cumulative since the collector started (name_total); gauges and sets
// (distinct members of the last interval) are gauges; timers,
// histograms and distributions are summaries of the last interval's
// percentiles with cumulative _sum and _count (timers in seconds, as
// statsd_exporter converts them). A name claimed by two types keeps the
// first (sorted by type) and counts the others in
// mdbus_statsd_prometheus_conflicts. The text is rendered by hand: the
// format is small, and client_golang would add a dependency and a
// registry to describe series that come and go.
type Prometheus struct {
	mu        sync.Mutex
	fams      map[string]*promFamily
	conflicts uint64
	text      []byte
}

type promFamily struct {
	typ    Type
	series map[string]*promSeries // by rendered labels
}

type promSeries struct {
	labels string
	value  float64 // counter total, gauge value
	count  float64 // summary count (cumulative)
	sum    float64 // summary sum (cumulative)
	quants []float64
	pcts   []float64
}

// NewPrometheus returns an empty Prometheus backend.
func NewPrometheus() *Prometheus { return &Prometheus{fams: map[string]*promFamily{}} }

func promName(s string) string {
	var b strings.Builder
	for i, r := range s {
		ok := r == '_' || r == ':' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')
		if ok {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func promLabels(tags []string) string {
	type kv struct{ k, v string }
	var l []kv
	for _, t := range tags {
		k, v, ok := strings.Cut(t, ":")
		if !ok {
			continue
		}
		k = promName(k)
		if strings.HasPrefix(k, "__") || k == "quantile" {
			k = "tag" + k
		}
		l = append(l, kv{k, v})
	}
	slices.SortStableFunc(l, func(a, b kv) int { return strings.Compare(a.k, b.k) })
	l = slices.CompactFunc(l, func(a, b kv) bool { return a.k == b.k })
	var b strings.Builder
	for i, p := range l {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p.k)
		b.WriteString(`="`)
		b.WriteString(strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(p.v))
		b.WriteByte('"')
	}
	return b.String()
}

// WriteFlush implements Backend: it folds the flush into the state.
func (p *Prometheus) WriteFlush(f *Flush) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range f.Series {
		s := &f.Series[i]
		name := promName(s.Name)
		ptyp := s.Type
		if ptyp == TypeCounter {
			name += "_total"
		}
		fam := p.fams[name]
		if fam == nil {
			fam = &promFamily{typ: ptyp, series: map[string]*promSeries{}}
			p.fams[name] = fam
		}
		if fam.typ != ptyp {
			p.conflicts++
			continue
		}
		labels := promLabels(s.Tags)
		ps := fam.series[labels]
		if ps == nil {
			ps = &promSeries{labels: labels}
			fam.series[labels] = ps
		}
		switch s.Type {
		case TypeCounter:
			ps.value += s.Count
		case TypeGauge:
			ps.value = s.Value
		case TypeSet:
			ps.value = float64(s.Distinct)
		default:
			scale := 1.0
			if s.Type == TypeTimer {
				scale = 1e-3
			}
			ps.count += s.Count
			ps.sum += s.Sum * scale
			ps.pcts = f.Percentiles
			ps.quants = ps.quants[:0]
			for _, v := range s.Values {
				ps.quants = append(ps.quants, v*scale)
			}
		}
	}
	p.render()
	return nil
}

func (p *Prometheus) render() {
	names := make([]string, 0, len(p.fams))
	for n := range p.fams {
		names = append(names, n)
	}
	slices.Sort(names)
	b := p.text[:0]
	for _, n := range names {
		fam := p.fams[n]
		typ := "gauge"
		switch fam.typ {
		case TypeCounter:
			typ = "counter"
		case TypeTimer, TypeHistogram, TypeDistribution:
			typ = "summary"
		}
		b = fmt.Appendf(b, "# HELP %s StatsD %s %s.\n# TYPE %s %s\n", n, fam.typ, strings.TrimSuffix(n, "_total"), n, typ)
		keys := make([]string, 0, len(fam.series))
		for k := range fam.series {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			s := fam.series[k]
			lb := func(extra string) string {
				switch {
				case s.labels == "" && extra == "":
					return ""
				case s.labels == "":
					return "{" + extra + "}"
				case extra == "":
					return "{" + s.labels + "}"
				}
				return "{" + s.labels + "," + extra + "}"
			}
			if typ != "summary" {
				b = fmtFloat(append(append(b, n...), lb("")+" "...), s.value)
				b = append(b, '\n')
				continue
			}
			for i, q := range s.quants {
				qs := strconv.FormatFloat(s.pcts[i]/100, 'g', 12, 64)
				b = fmtFloat(append(append(b, n...), lb(`quantile="`+qs+`"`)+" "...), q)
				b = append(b, '\n')
			}
			b = fmtFloat(append(append(b, n...), "_sum"+lb("")+" "...), s.sum)
			b = append(b, '\n')
			b = fmtFloat(append(append(b, n...), "_count"+lb("")+" "...), s.count)
			b = append(b, '\n')
		}
	}
	b = fmt.Appendf(b, "# HELP mdbus_statsd_prometheus_conflicts_total Series skipped because their name has another type.\n# TYPE mdbus_statsd_prometheus_conflicts_total counter\nmdbus_statsd_prometheus_conflicts_total %d\n", p.conflicts)
	p.text = b
}

// ServeHTTP serves the text exposition format.
func (p *Prometheus) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	text := slices.Clone(p.text)
	p.mu.Unlock()
	if text == nil {
		p.mu.Lock()
		p.render()
		text = slices.Clone(p.text)
		p.mu.Unlock()
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write(text)
}

// Serve serves the endpoint /metrics on l until l is closed.
func (p *Prometheus) Serve(l net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", p)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return srv.Serve(l)
}

// TCPWriter is an io.Writer that (re)connects to a TCP address (a
// Graphite carbon receiver) and writes through a buffer flushed per
// write.
type TCPWriter struct {
	Addr    string
	Timeout time.Duration // connect and write timeout; default 5 s
	conn    net.Conn
	w       *bufio.Writer
}

// Write sends p, reconnecting once if the connection broke.
func (t *TCPWriter) Write(p []byte) (int, error) {
	to := t.Timeout
	if to <= 0 {
		to = 5 * time.Second
	}
	for try := 0; ; try++ {
		if t.conn == nil {
			c, err := net.DialTimeout("tcp", t.Addr, to)
			if err != nil {
				return 0, fmt.Errorf("statsd: graphite %s: %w", t.Addr, err)
			}
			t.conn, t.w = c, bufio.NewWriterSize(c, 64<<10)
		}
		t.conn.SetWriteDeadline(time.Now().Add(to))
		n, err := t.w.Write(p)
		if err == nil {
			err = t.w.Flush()
		}
		if err == nil {
			return n, nil
		}
		t.conn.Close()
		t.conn = nil
		if try > 0 {
			return n, fmt.Errorf("statsd: graphite %s: %w", t.Addr, err)
		}
	}
}

// Close closes the connection.
func (t *TCPWriter) Close() error {
	if t.conn == nil {
		return nil
	}
	err := t.conn.Close()
	t.conn = nil
	return err
}
