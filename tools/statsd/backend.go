package statsd

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Flush is one closed interval's aggregates.
type Flush struct {
	// Start is the interval's start (relay clock); it lasts Interval.
	Start    time.Time
	Interval time.Duration
	// Percentiles are the percentiles of Series.Values.
	Percentiles []float64
	// Series are sorted by name, type, then tags; the collector's own
	// metrics (SelfPrefix) are among them as CollectorConfig.SelfMetrics
	// says. A Flush of an idle stream may have none.
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

// appendNum appends v as a plain decimal, never in exponent form (1e+06
// is 1000000), the shortest that reads back the same. It reports false,
// appending nothing, for an infinite or NaN v: the collector refuses what
// would make one, and a backend writes no line rather than a wrong number.
func appendNum(b []byte, v float64) ([]byte, bool) {
	if !finite(v) {
		return b, false
	}
	return strconv.AppendFloat(b, v, 'f', -1, 64), true
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
// value as ";tag=k". In names, a ';' (it would start tags), white space
// and characters that do not print become '_'; in tag keys and values
// also '=', '~', '!' and '^', and an empty key or value is "_". Values
// are plain decimals (never exponent form); the timestamp is the
// interval's end in Unix seconds.
type GraphiteWriter struct {
	W      io.Writer
	Prefix string // default "stats."
	buf    []byte
	name   []byte
	tags   []byte
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
		g.tags = g.tags[:0]
		for _, t := range s.Tags {
			g.tags = append(g.tags, ';')
			if k, v, ok := strings.Cut(t, ":"); ok {
				g.tags = appendGraphite(append(appendGraphite(g.tags, k, true), '='), v, true)
			} else {
				g.tags = appendGraphite(append(g.tags, "tag="...), t, true)
			}
		}
		g.name = appendGraphite(g.name[:0], s.Name, false)
		line := func(kind, stat string, v float64) {
			if !finite(v) {
				return
			}
			b = append(append(append(b, prefix...), kind...), g.name...)
			if stat != "" {
				b = append(append(b, '.'), stat...)
			}
			b = append(b, g.tags...)
			b, _ = appendNum(append(b, ' '), v)
			b = append(append(append(b, ' '), ts...), '\n')
		}
		switch s.Type {
		case TypeCounter:
			line("counters.", "count", s.Count)
			line("counters.", "rate", s.Rate)
		case TypeGauge:
			line("gauges.", "", s.Value)
		case TypeSet:
			line("sets.", "count", float64(s.Distinct))
		default:
			kind := s.Type.String() + "s."
			line(kind, "count", s.Count)
			line(kind, "count_ps", s.Rate)
			if s.N > 0 {
				line(kind, "sum", s.Sum)
				line(kind, "mean", s.Mean)
				line(kind, "lower", s.Min)
				line(kind, "upper", s.Max)
				for j, v := range s.Values {
					line(kind, "upper_"+pctName(f.Percentiles[j]), v)
				}
			}
		}
	}
	g.buf = b
	_, err := g.W.Write(b)
	return err
}

// appendGraphite appends s with what Graphite would misread replaced by
// '_': ';' (starts the tags), white space (ends the path), control and
// other characters that do not print and, in a tag key or value, the
// characters Graphite 1.1 forbids there ('=', '!', '^', '~'). An empty
// tag key or value is "_".
func appendGraphite(b []byte, s string, tag bool) []byte {
	if tag && s == "" {
		return append(b, '_')
	}
	for _, r := range s {
		switch {
		case r == ';' || r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r):
			r = '_'
		case tag && (r == '=' || r == '~' || r == '!' || r == '^'):
			r = '_'
		}
		b = utf8.AppendRune(b, r)
	}
	return b
}

// JSONWriter writes one JSON object per series per flush:
//
//	{"ts":1700000010,"interval":10,"name":"a","type":"counter","tags":["k:v"],"count":3,"rate":0.3}
//
// ts is the interval's end in Unix seconds. Sampled types add n, sum,
// mean, min, max and "p50"... for the percentiles; sets "distinct" and
// "refused"; gauges "value". Numbers are plain decimals; strings are
// escaped as RFC 8259 says (any rune a name may hold, however odd, stays
// valid JSON).
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
		b, _ = appendNum(append(b, `,"interval":`...), f.Interval.Seconds())
		b = appendJSONString(append(b, `,"name":`...), s.Name)
		b = appendJSONString(append(b, `,"type":`...), s.Type.String())
		b = append(b, `,"tags":[`...)
		for k, t := range s.Tags {
			if k > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, t)
		}
		b = append(b, ']')
		num := func(k string, v float64) {
			if finite(v) {
				b, _ = appendNum(append(append(append(b, `,"`...), k...), `":`...), v)
			}
		}
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

// appendJSONString appends s as a JSON string (RFC 8259): '"', '\\' and
// control characters escaped, every other rune as UTF-8 (strconv.Quote
// is no substitute: its \U0001xxxx and \x escapes are Go's, not JSON's).
// Invalid UTF-8 becomes U+FFFD; U+2028 and U+2029 are escaped for
// JavaScript readers.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\n':
			b = append(b, '\\', 'n')
		case r < 0x20 || r == 0x2028 || r == 0x2029:
			b = append(b, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
		default:
			b = utf8.AppendRune(b, r)
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
// mdbus_statsd_prometheus_conflicts; an addition that would take a
// cumulative total beyond ±MaxFloat64 is skipped and counted in
// mdbus_statsd_prometheus_non_finite. The text is rendered by hand: the
// format is small, and client_golang would add a dependency and a
// registry to describe series that come and go.
type Prometheus struct {
	mu        sync.Mutex
	fams      map[string]*promFamily
	conflicts uint64
	nonFinite uint64 // additions refused: a cumulative total would overflow
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
		if k == "" || strings.HasPrefix(k, "__") || k == "quantile" {
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
			if !finite(ps.value + s.Count) {
				p.nonFinite++
				continue
			}
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
			if !finite(ps.count+s.Count) || !finite(ps.sum+s.Sum*scale) {
				p.nonFinite++
				continue
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
			sample := func(suffix, labels string, v float64) {
				if finite(v) {
					b, _ = appendNum(append(append(append(b, n...), suffix...), labels+" "...), v)
					b = append(b, '\n')
				}
			}
			if typ != "summary" {
				sample("", lb(""), s.value)
				continue
			}
			for i, q := range s.quants {
				sample("", lb(`quantile="`+quantile(s.pcts[i])+`"`), q)
			}
			sample("_sum", lb(""), s.sum)
			sample("_count", lb(""), s.count)
		}
	}
	b = fmt.Appendf(b, "# HELP mdbus_statsd_prometheus_conflicts_total Series skipped because their name has another type.\n# TYPE mdbus_statsd_prometheus_conflicts_total counter\nmdbus_statsd_prometheus_conflicts_total %d\n", p.conflicts)
	b = fmt.Appendf(b, "# HELP mdbus_statsd_prometheus_non_finite_total Additions skipped because a cumulative total would overflow float64.\n# TYPE mdbus_statsd_prometheus_non_finite_total counter\nmdbus_statsd_prometheus_non_finite_total %d\n", p.nonFinite)
	p.text = b
}

// quantile is percentile p as a quantile label: 99.9 is "0.999", not
// 0.9990000000000001 nor 1e-05 for 0.001.
func quantile(p float64) string {
	q, _ := strconv.ParseFloat(strconv.FormatFloat(p/100, 'g', 12, 64), 64)
	return strconv.FormatFloat(q, 'f', -1, 64)
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
