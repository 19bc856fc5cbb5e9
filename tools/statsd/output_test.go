package statsd

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

var (
	plainDecimal = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)
	promSample   = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\\n])*"(,[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\\n])*")*)\})? (\S+)$`)
)

// checkNumber fails unless s is a finite plain decimal (no exponent).
func checkNumber(t testing.TB, s, where string) float64 {
	t.Helper()
	require.Regexp(t, plainDecimal, s, "a plain decimal in %s", where)
	v, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err, where)
	require.True(t, finite(v), where)
	return v
}

// checkOutputs writes every flush with each backend and checks that the
// output parses: JSON lines with encoding/json (name and tags read back
// as they are), Graphite lines as "path value timestamp" with as many
// tags on the path as the series has, Prometheus text line by line. It
// returns the Graphite text.
func checkOutputs(t testing.TB, flushes []*Flush) string {
	t.Helper()
	var graphite strings.Builder
	prom := NewPrometheus()
	for _, f := range flushes {
		for i := range f.Series {
			s := &f.Series[i]
			one := *f
			one.Series = []Series{*s}
			// JSON
			var jb bytes.Buffer
			require.NoError(t, (&JSONWriter{W: &jb}).WriteFlush(&one))
			require.Equal(t, 1, strings.Count(jb.String(), "\n"))
			var obj map[string]any
			dec := json.NewDecoder(bytes.NewReader(jb.Bytes()))
			dec.UseNumber()
			require.NoError(t, dec.Decode(&obj), "JSON of %q: %s", s.Name, jb.String())
			if utf8.ValidString(s.Name) {
				require.Equal(t, s.Name, obj["name"])
			}
			tags, _ := obj["tags"].([]any)
			require.Len(t, tags, len(s.Tags))
			for k, v := range obj {
				if n, ok := v.(json.Number); ok {
					checkNumber(t, n.String(), k+" in "+jb.String())
				}
			}
			// Graphite
			var gb bytes.Buffer
			require.NoError(t, (&GraphiteWriter{W: &gb}).WriteFlush(&one))
			graphite.Write(gb.Bytes())
			for _, line := range strings.Split(strings.TrimSuffix(gb.String(), "\n"), "\n") {
				if line == "" {
					continue
				}
				require.True(t, utf8.ValidString(line), line)
				for _, r := range line {
					require.True(t, r == ' ' || (unicode.IsPrint(r) && !unicode.IsSpace(r)), "rune %U in %q", r, line)
				}
				fields := strings.Split(line, " ")
				require.Len(t, fields, 3, line)
				require.Len(t, strings.Fields(line), 3, line)
				path := strings.Split(fields[0], ";")
				require.True(t, strings.HasPrefix(path[0], "stats."), line)
				require.Len(t, path[1:], len(s.Tags), "tags on the path of %q: %s", s.Name, line)
				for _, tag := range path[1:] {
					k, v, ok := strings.Cut(tag, "=")
					require.True(t, ok, line)
					require.NotEmpty(t, k, line)
					require.NotEmpty(t, v, line)
					require.False(t, strings.ContainsAny(k, "!^=~"), line)
					require.False(t, strings.ContainsAny(v, "=") || strings.HasPrefix(v, "~"), line)
				}
				checkNumber(t, fields[1], line)
				require.Regexp(t, `^[0-9]+$`, fields[2], line)
			}
		}
		require.NoError(t, prom.WriteFlush(f))
	}
	rec := httptest.NewRecorder()
	prom.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, line := range strings.Split(strings.TrimSuffix(rec.Body.String(), "\n"), "\n") {
		if strings.HasPrefix(line, "# HELP ") || strings.HasPrefix(line, "# TYPE ") {
			continue
		}
		require.True(t, utf8.ValidString(line), line)
		m := promSample.FindStringSubmatch(line)
		require.NotNil(t, m, "Prometheus sample: %q", line)
		checkNumber(t, m[len(m)-1], line)
	}
	return graphite.String()
}

// flushOf returns the series of f by name and tags ("name|k:v,...").
func flushOf(f *Flush) map[string]Series {
	m := map[string]Series{}
	for _, s := range f.Series {
		m[s.Name+"|"+strings.Join(s.Tags, ",")] = s
	}
	return m
}

// TestOutputHostileLines: valid lines meant to break the output or the
// arithmetic. Every output still parses; nothing infinite, NaN or
// clamped is written; what was refused is counted.
func TestOutputHostileLines(t *testing.T) {
	s := newSocketless(t, CollectorConfig{FlushInterval: 10 * time.Second})
	s.send(t0, "tag\U000E0001name:1|c\n"+ // a rune above U+FFFF that does not print
		"semi;evil=1:2|c\n"+ // a ';' would add a Graphite tag
		"sp\u00a0ace:1|c|#k\u2028:v\u00a0v,:e,x:\n"+
		"rate:1|c|@1e-300\n"+ // refused: below MinSampleRate
		"rate.ok:1|c|@0.000001\n"+
		"big:1e308|c\nbig:1e308|c\n"+ // the second would overflow the sum
		"gpin:1e308|g\ngpin:+1e308|g\n"+
		"ginf:+1e308|g\n"+
		"tsum:1e308|ms\ntsum:1e308|ms\n"+
		"million:1234567|c\nsmall:0.000001|g\n")
	// Once: +Inf in one interval, then -Inf in the next (Inf - Inf = NaN).
	s.send(t0.Add(10*time.Second), "ginf:+1e308|g\n")
	s.send(t0.Add(20*time.Second), "ginf:-1e308|g\nginf:-1e308|g\n")
	s.send(t0.Add(30*time.Second), "")
	s.close()
	require.Len(t, s.rec.flushes, 4)
	graphite := checkOutputs(t, s.rec.flushes)

	f := flushOf(s.rec.flushes[0])
	require.Equal(t, 1e308, f["big|"].Count)
	require.Equal(t, 1e308, f["gpin|"].Value)
	require.Equal(t, 1e308, f["ginf|"].Value)
	require.Equal(t, 1e308, f["tsum|"].Sum)
	require.Equal(t, float64(1_000_000), f["rate.ok|"].Count)
	require.NotContains(t, f, "rate|")
	require.Equal(t, float64(1), f[selfBadLines+"|reason:bad_sample_rate"].Count)
	require.Equal(t, float64(3), f[selfNonFinite+"|"].Count, "big, gpin, tsum")
	f2 := flushOf(s.rec.flushes[1])
	require.Equal(t, 1e308, f2["ginf|"].Value, "1e308 + 1e308 refused")
	require.Equal(t, float64(1), f2[selfNonFinite+"|"].Count)
	f3 := flushOf(s.rec.flushes[2])
	require.Equal(t, float64(0), f3["ginf|"].Value, "- 1e308 taken, the second refused")
	require.Equal(t, float64(1), f3[selfNonFinite+"|"].Count)

	require.Contains(t, graphite, "stats.counters.semi_evil=1.count 2 1700000010\n")
	require.Contains(t, graphite, "stats.counters.tag_name.count 1 1700000010\n")
	require.Contains(t, graphite, "stats.counters.sp_ace.count;_=e;k_=v_v;x=_ 1 1700000010\n")
	require.Contains(t, graphite, "stats.counters.million.count 1234567 1700000010\n")
	require.Contains(t, graphite, "stats.gauges.small 0.000001 1700000010\n")
	require.Contains(t, s.rec.text.String(), `"name":"tag`+"\U000E0001"+`name"`)
}

// TestNoSelfMetricsOnEmptyFlush: the flushes of an idle stream hold no
// series unless SelfMetricsAlways asks for them; an interval with data, or
// with a loss or a bad line and nothing else, has the collector's own.
func TestNoSelfMetricsOnEmptyFlush(t *testing.T) {
	for _, mode := range []SelfMetrics{SelfMetricsAuto, SelfMetricsAlways} {
		s := newSocketless(t, CollectorConfig{FlushInterval: time.Second, SelfMetrics: mode})
		s.send(t0, "a:1|c\n"+SelfPrefix+"relay.datagrams:1|c\n")
		s.send(t0.Add(time.Second), "")   // idle: a:1 flushes as 0 (no DeleteIdle)
		s.send(t0.Add(2*time.Second), "") // idle
		s.send(t0.Add(3*time.Second), "bad\n")
		s.send(t0.Add(4*time.Second), "")
		s.close()
		require.Len(t, s.rec.flushes, 5)
		names := func(i int) (own, relay, other int) {
			for _, x := range s.rec.flushes[i].Series {
				switch {
				case strings.HasPrefix(x.Name, SelfPrefix+"collector."):
					own++
				case strings.HasPrefix(x.Name, SelfPrefix):
					relay++
				default:
					other++
				}
			}
			return
		}
		for i, want := range [][3]int{{9, 1, 1}, {9, 0, 1}, {9, 0, 1}, {10, 0, 1}, {9, 0, 1}} {
			own, relay, other := names(i)
			if mode == SelfMetricsAuto {
				require.Equal(t, want, [3]int{own, relay, other}, "auto, flush %d", i)
			} else {
				require.Equal(t, [3]int{want[0], 1, 1}, [3]int{own, relay, other}, "always, flush %d", i)
			}
		}
	}
	// DeleteIdle: the idle flushes are empty.
	s := newSocketless(t, CollectorConfig{FlushInterval: time.Second, DeleteIdle: true})
	var out bytes.Buffer
	g := &GraphiteWriter{W: &out}
	s.send(t0, "a:1|c\n")
	s.send(t0.Add(time.Second), "")
	s.send(t0.Add(2*time.Second), "")
	s.close()
	require.Len(t, s.rec.flushes, 3)
	for _, f := range s.rec.flushes[1:] {
		require.Empty(t, f.Series)
		require.NoError(t, g.WriteFlush(f))
	}
	require.Empty(t, out.String(), "an empty flush writes no Graphite line")
}

// logCounter is a slog.Handler counting records by message.
type logCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (l *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n[r.Message]++
	return nil
}
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCounter) WithGroup(string) slog.Handler      { return l }

// TestSelfMetricsNotCapped: once a flood of names has filled MaxSeries,
// the relay's own series (bad lines by reason, kernel drops) are still
// admitted and flushed; the refusals are counted and logged once per
// interval; other names under the self prefix get no such pass.
func TestSelfMetricsNotCapped(t *testing.T) {
	logs := &logCounter{n: map[string]int{}}
	s := newSocketless(t, CollectorConfig{FlushInterval: time.Second, MaxSeries: 50, Logger: slog.New(logs)})
	for k := range 3 {
		var b strings.Builder
		for i := range 200 {
			b.WriteString("flood." + strconv.Itoa(k*1000+i) + ":1|c\n")
		}
		s.send(t0.Add(time.Duration(k)*time.Second), b.String())
	}
	s.send(t0.Add(2*time.Second), SelfPrefix+"relay.kernel_drops:7|c\n"+SelfPrefix+"relay.bad_lines:3|c|#reason:bad_name\n"+
		SelfPrefix+"relay.bad_lines:1|c|#reason:made_up\n"+SelfPrefix+"relay.other:1|c\n")
	var every strings.Builder
	for _, name := range []string{relaySelfDatagrams, relaySelfMetrics, relaySelfKernDrops} {
		every.WriteString(name + ":1|c\n")
	}
	for r := Reason(1); r < NumReasons; r++ {
		every.WriteString(relaySelfBadLines + ":1|c|#reason:" + r.String() + "\n")
	}
	s.send(t0.Add(2*time.Second), every.String())
	s.mu.Lock()
	require.Equal(t, relaySelfSeries, s.selfN, "every relay self series admitted beyond the cap")
	s.mu.Unlock()
	s.send(t0.Add(3*time.Second), "")
	s.close()
	require.Len(t, s.rec.flushes, 4)
	last := flushOf(s.rec.flushes[2])
	require.Equal(t, float64(8), last[SelfPrefix+"relay.kernel_drops|"].Count)
	require.Equal(t, float64(4), last[SelfPrefix+"relay.bad_lines|reason:bad_name"].Count)
	require.NotContains(t, last, SelfPrefix+"relay.bad_lines|reason:made_up")
	require.NotContains(t, last, SelfPrefix+"relay.other|")
	require.Equal(t, float64(202), last[selfSeriesRefused+"|"].Count)
	require.Equal(t, float64(150), flushOf(s.rec.flushes[0])[selfSeriesRefused+"|"].Count)
	logs.mu.Lock()
	defer logs.mu.Unlock()
	var capLogs int
	for msg, n := range logs.n {
		if strings.Contains(msg, "series cap reached") {
			capLogs += n
		}
	}
	require.Equal(t, 3, capLogs, "one line per interval with refusals: %v", logs.n)
}

// TestPreAggregateNonFinite: the relay's pre-aggregation refuses (and the
// relay counts, as nan_inf) a metric that would overflow its sum.
func TestPreAggregateNonFinite(t *testing.T) {
	a := newPreAgg()
	var m Metric
	for _, tc := range []struct {
		line  string
		taken bool
		r     Reason
	}{
		{"c:1e308|c", true, ReasonNone},
		{"c:1e308|c", false, ReasonNaNInf},
		{"c:1|c|@0.5", true, ReasonNone},
		{"g:1e308|g", true, ReasonNone},
		{"g:+1e308|g", false, ReasonNaNInf},
		{"g:-1e308|g", true, ReasonNone},
		{"t:1e308|ms", false, ReasonNone},
	} {
		require.Equal(t, ReasonNone, ParseLine(&m, []byte(tc.line), Limits{}), tc.line)
		taken, r := a.add(&m)
		require.Equal(t, tc.taken, taken, tc.line)
		require.Equal(t, tc.r, r, tc.line)
	}
	require.Equal(t, 1e308+2, a.byKey["c\x00c\x00\x00"].sum)
	require.Zero(t, a.byKey["g\x00g\x00\x00"].val+a.byKey["g\x00g\x00\x00"].sum)
}

// FuzzFlushOutput: whatever lines the collector accepts, in whatever
// intervals, every flush it writes parses as JSON, Graphite and
// Prometheus text, with finite plain-decimal numbers.
func FuzzFlushOutput(f *testing.F) {
	for _, seed := range [][2]string{
		{"a:1|c\ng:+3|g\nt:1:2:3|ms|@0.5|#k:v\ns:x:y|s", "a:2|c\ng:-5|g"},
		{"tag\U000E0001name:1|c\nsemi;evil=1:2|c|#;k:v;", "x:1|c|#:,k:"},
		{"big:1e308|c\nbig:1e308|c\nr:1|c|@0.000001", "g:1e308|g\ng:+1e308|g"},
		{"g:+1.7976931348623157e308|g", "g:+1.7976931348623157e308|g\ng:-1e308|g"},
		{"t:1e308|h\nt:-1e308|h\nd:1e-300|d", "m:1234567.5|g\nm:+0.000000001|g"},
		{"a:1|c:5|ms|@0.5:7|g", "quantile:1|h|#quantile:x,__name__:y"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		s := newSocketless(t, CollectorConfig{FlushInterval: time.Second, MaxSeries: 64, MaxSetMembers: 64,
			MaxHistograms: 8, Percentiles: []float64{50, 99.9}})
		s.send(t0, a)
		s.send(t0.Add(time.Second), b)
		s.send(t0.Add(2*time.Second), a+"\n"+b)
		s.send(t0.Add(3*time.Second), "")
		s.close()
		for _, fl := range s.rec.flushes {
			for _, x := range fl.Series {
				for _, v := range append([]float64{x.Count, x.Rate, x.Value, x.Sum, x.Mean}, x.Values...) {
					require.False(t, math.IsInf(v, 0) || math.IsNaN(v), "%s: %v", x.Name, v)
				}
			}
		}
		checkOutputs(t, s.rec.flushes)
	})
}

// FuzzAcceptedLineOutput builds lines from fuzzed parts (any name a
// client may send, values, type, sample rate, tags), keeps those the
// Parser accepts, aggregates them over three intervals and checks that
// every output parses (see checkOutputs).
func FuzzAcceptedLineOutput(f *testing.F) {
	f.Add("tag\U000E0001name", 1.0, 2.0, uint8(0), 1.0, "k:v,x")
	f.Add("semi;evil=1", 1e308, 1e308, uint8(1), 1e-6, ":e,k:")
	f.Add("sp\u00a0ace\u2028", -1e308, 1234567.0, uint8(2), 0.5, "k\u2028:v\u00a0v")
	f.Add("quantile", 1e-300, 5e-324, uint8(3), 0.25, "quantile:x,__name__:y,9:z")
	f.Add("s", 3.0, 4.0, uint8(5), 1.0, "")
	types := []string{"c", "g", "ms", "h", "d", "s"}
	clean := func(s, drop string) string {
		return strings.Map(func(r rune) rune {
			if r <= ' ' || r == 0x7f || strings.ContainsRune(drop, r) {
				return -1
			}
			return r
		}, strings.ToValidUTF8(s, "?"))
	}
	f.Fuzz(func(t *testing.T, name string, v1, v2 float64, typ uint8, rate float64, tags string) {
		name = clean(name, "|#@:")
		tags = clean(tags, "|")
		code := types[int(typ)%len(types)]
		var lines []string
		for _, sign := range []string{"", "+", "-"} {
			for _, v := range []float64{v1, v2} {
				l := name + ":" + sign + strconv.FormatFloat(math.Abs(v), 'g', -1, 64) + "|" + code
				if rate != 1 {
					l += "|@" + strconv.FormatFloat(rate, 'g', -1, 64)
				}
				if tags != "" {
					l += "|#" + tags
				}
				var m Metric
				if ParseLine(&m, []byte(l), Limits{}) == ReasonNone {
					lines = append(lines, l)
				}
			}
		}
		if len(lines) == 0 {
			return
		}
		all := strings.Join(lines, "\n")
		s := newSocketless(t, CollectorConfig{FlushInterval: time.Second, Percentiles: []float64{50, 99.9}})
		s.send(t0, all)
		s.send(t0.Add(time.Second), all+"\n"+all)
		s.send(t0.Add(2*time.Second), all)
		s.send(t0.Add(3*time.Second), "")
		s.close()
		var n int
		for _, fl := range s.rec.flushes {
			for _, x := range fl.Series {
				if !strings.HasPrefix(x.Name, SelfPrefix) {
					n++
				}
			}
		}
		require.NotZero(t, n, "accepted lines %q gave no series", lines)
		checkOutputs(t, s.rec.flushes)
	})
}
