package bench

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/stretchr/testify/require"
)

func TestStampRoundTrip(t *testing.T) {
	msg := make([]byte, 64)
	PutStamp(msg, 123456789, 42)
	sched, seq, ok := ParseStamp(msg)
	require.True(t, ok)
	require.Equal(t, int64(123456789), sched)
	require.Equal(t, uint64(42), seq)
	_, _, ok = ParseStamp(msg[:StampLen-1])
	require.False(t, ok, "a message shorter than the stamp is not a benchmark message")
}

func TestNowIsMonotonicAndCalibrated(t *testing.T) {
	// Read Now until it has moved a millisecond: it never goes back, and
	// it moves no faster than Go's monotonic clock, read around it.
	t0 := time.Now()
	a := Now()
	b := a
	for b-a < int64(time.Millisecond) && time.Since(t0) < 5*time.Second {
		next := Now()
		if next < b {
			t.Fatalf("Now went back from %d to %d", b, next)
		}
		b = next
	}
	el := time.Since(t0)
	require.GreaterOrEqual(t, b-a, int64(time.Millisecond), "Now did not move a millisecond in %v", el)
	require.LessOrEqual(t, b-a, int64(el), "Now ran ahead of the monotonic clock")
	// Now must agree with a direct CLOCK_MONOTONIC read (other processes
	// compare against their own calibration).
	off := realtimeOffset()
	wall := time.Now().UnixNano()
	require.InDelta(t, float64(wall), float64(Now()+off), float64(5*time.Millisecond))
}

func TestParseSizes(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		maxLen     int
		min, max   int
		err        bool
	}{
		{"fixed", "64", 1450, 64, 64, false},
		{"uniform", "16-1000", 1450, 16, 1000, false},
		{"itch", "itch", 1450, 16, 50, false},
		{"synth", "synth", 1450, 19, 44, false},
		{"zero", "0", 1450, 0, 0, true},
		{"negative", "-5", 1450, 0, 0, true},
		{"below the stamp", "8", 1450, 0, 0, true},
		{"above the payload limit", "1451", 1450, 0, 0, true},
		{"inverted range", "100-20", 1450, 0, 0, true},
		{"range above limit", "16-2000", 1450, 0, 0, true},
		{"nonsense", "big", 1450, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSizes(tc.spec, tc.maxLen)
			if tc.err {
				require.ErrorIs(t, err, ErrBadSize)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.min, s.Min)
			require.Equal(t, tc.max, s.Max)
		})
	}
}

func TestRingNeverRepeatsWithinABatch(t *testing.T) {
	for _, spec := range []string{"64", "16-200", "itch", "synth"} {
		t.Run(spec, func(t *testing.T) {
			s, err := ParseSizes(spec, 1450)
			require.NoError(t, err)
			r := newRing(s, 2000, 1)
			require.GreaterOrEqual(t, len(r.msgs), 2000)
			seen := map[*byte]bool{}
			for range 2000 {
				m := r.next()
				require.GreaterOrEqual(t, len(m), StampLen)
				require.LessOrEqual(t, len(m), s.Max)
				require.False(t, seen[&m[0]], "buffer reused within one batch")
				seen[&m[0]] = true
			}
		})
	}
	s, _ := ParseSizes("itch", 1450)
	r := newRing(s, 1, 1)
	require.Len(t, r.msgs, 1000, "the ITCH sample holds 1000 messages")
	orig := itchMessages()
	require.Equal(t, orig[0][StampLen:], r.msgs[0][StampLen:], "real ITCH bytes after the stamp are kept")
	require.Equal(t, len(orig[1]), len(r.msgs[1]), "real ITCH sizes")
}

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in       string
		allowMax bool
		want     float64
		err      bool
	}{
		{"10000", false, 10000, false},
		{"10k", false, 10000, false},
		{"4M", true, 4e6, false},
		{"2.5k", false, 2500, false},
		{"max", true, 0, false},
		{"max", false, 0, true},
		{"0", false, 0, true},
		{"-5", true, 0, true},
		{"-1k", true, 0, true},
		{"fast", true, 0, true},
		{"5000M", true, 0, true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			v, err := ParseRate(tc.in, tc.allowMax)
			if tc.err {
				require.ErrorIs(t, err, ErrConfig)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, v)
		})
	}
}

func TestCheckOutput(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, CheckOutput(filepath.Join(dir, "new", "sub")))
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	require.Error(t, CheckOutput(filepath.Join(file, "x")), "a path under a file is not writable")
	require.Error(t, CheckOutput("/proc/no-such-dir"))
	require.NoError(t, CheckOutput(""), "no output directory means no files")
}

// newTestCollector records a known distribution into two series.
func newTestCollector(t *testing.T) *collector {
	t.Helper()
	base := Now()
	c := newCollector(base, 10*time.Millisecond)
	r := c.recorder("s1", "s1.r1", base)
	r2 := c.recorder("s2", "s2.r1", base)
	for i := range int64(3000) {
		now := base + i*int64(10*time.Microsecond) // 30 ms: three intervals
		r.Record(now, 1000+i)
		r2.Record(now, 5000+2*i)
	}
	r.Record(base, -1)            // range error
	r.Record(base, histHighest*2) // range error
	end := base + int64(30*time.Millisecond)
	r.Flush(end)
	r2.Flush(end)
	return c
}

func TestRecorderAndCollector(t *testing.T) {
	c := newTestCollector(t)
	defer c.close()
	h, re := c.total("s1")
	require.Equal(t, int64(3000), h.TotalCount())
	require.Equal(t, int64(2), re)
	require.InDelta(t, 2500, h.ValueAtQuantile(50), 5)
	require.Equal(t, []string{"s1", "s2"}, c.seriesNames())
	p := percentiles(h, re)
	require.LessOrEqual(t, p.P50, p.P90)
	require.LessOrEqual(t, p.P999, p.Max)
	require.NotEmpty(t, spectrum(h))
}

func TestHLogReadsBack(t *testing.T) {
	c := newTestCollector(t)
	defer c.close()
	log, err := c.hlog(time.Now())
	require.NoError(t, err)
	rd := hdr.NewHistogramLogReader(bytes.NewReader(log))
	tags := map[string]int64{}
	n := 0
	for {
		h, err := rd.NextIntervalHistogram()
		require.NoError(t, err)
		if h == nil {
			break
		}
		n++
		tags[strings.SplitN(h.Tag(), ".", 2)[0]] += h.TotalCount()
	}
	require.GreaterOrEqual(t, n, 4, "at least two intervals per series")
	require.Equal(t, map[string]int64{"s1": 3000, "s2": 3000}, tags)
	require.Contains(t, string(log), "HISTF", "V2 compressed encoding")
}

func TestExportImportChild(t *testing.T) {
	c := newTestCollector(t)
	c.close()
	ex, hlog, err := c.export()
	require.NoError(t, err)
	parent := newCollector(Now(), time.Second)
	defer parent.close()
	require.NoError(t, parent.importChild(ex, hlog))
	require.NoError(t, parent.importChild(ex, hlog))
	h, re := parent.total("s1")
	require.Equal(t, int64(6000), h.TotalCount())
	require.Equal(t, int64(4), re)
	require.Error(t, parent.importChild([]exported{{Series: "x", Hist: "not base64!"}}, ""))
}

func TestHGRMParses(t *testing.T) {
	c := newTestCollector(t)
	defer c.close()
	h, _ := c.total("s1")
	var buf bytes.Buffer
	_, err := h.PercentilesPrint(&buf, 5, 1e3)
	require.NoError(t, err)
	pts, err := ParseHGRM(&buf, 1e3)
	require.NoError(t, err)
	require.Greater(t, len(pts), 10)
	require.Equal(t, 100.0, pts[len(pts)-1].Q)
	require.InDelta(t, float64(h.Max()), float64(pts[len(pts)-1].V), 1)
	_, err = ParseHGRM(strings.NewReader("hello\n"), 1)
	require.Error(t, err)
}

func TestSVGWellFormed(t *testing.T) {
	c := newTestCollector(t)
	defer c.close()
	h1, _ := c.total("s1")
	h2, _ := c.total("s2")
	for _, tc := range []struct {
		name   string
		series []ChartSeries
	}{
		{"two series", []ChartSeries{{Name: "mdbus <a&b>", Points: spectrum(h1)}, {Name: "raw", Points: spectrum(h2)}}},
		{"empty", nil},
		{"one point", []ChartSeries{{Name: "x", Points: []Point{{Q: 100, V: 5}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, WriteChart(&buf, "title & <test>", tc.series))
			d := xml.NewDecoder(&buf)
			paths := 0
			for {
				tok, err := d.Token()
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
				if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "path" {
					paths++
				}
			}
			require.Equal(t, len(tc.series), paths)
		})
	}
}

func TestJSONSchema(t *testing.T) {
	r := Report{
		Schema: Schema, Command: "throughput", Started: time.Now(), Machine: machine(),
		Throughput: []ThroughputRun{{Name: "x", System: Mdbus, Subs: []SubResult{{Name: "sub1", Counts: Counts{Messages: 5}}}}},
		Latency:    []LatencyRun{{Name: "y", System: Raw, Mode: RoundTrip, Total: Percentiles{P50: 1}}},
		Ratios:     []Ratio{{What: "z", Mdbus: 2, Raw: 1, Ratio: 2}},
		Goals:      []Goal{{Name: "g", Pass: true}},
	}
	js, err := json.Marshal(r)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(js, &m))
	for _, k := range []string{"schema", "command", "started", "seconds", "interrupted", "machine", "settings", "throughput", "latency", "ratios", "goals"} {
		require.Contains(t, m, k)
	}
	require.Equal(t, Schema, m["schema"])
	sub := m["throughput"].([]any)[0].(map[string]any)["subs"].([]any)[0].(map[string]any)
	for _, k := range []string{"name", "messages", "bytes", "packets", "msgs_per_s", "bytes_per_s", "packets_per_s", "msgs_per_packet", "kernel_drops", "gaps", "repairs", "lost", "missing", "complete"} {
		require.Contains(t, sub, k)
	}
	lat := m["latency"].([]any)[0].(map[string]any)["latency"].(map[string]any)
	for _, k := range []string{"p50", "p90", "p99", "p99_9", "p99_99", "max", "count", "range_errors"} {
		require.Contains(t, lat, k)
	}
	var back Report
	require.NoError(t, json.Unmarshal(js, &back))
	require.Equal(t, r.Throughput, back.Throughput)
}

func TestRatiosPairMdbusWithRaw(t *testing.T) {
	tp := []ThroughputRun{
		{Name: "m", System: Mdbus, Size: "64", Rate: 4e6, Subscribers: 1, MinMsgsPerSec: 4e6},
		{Name: "r1", System: Raw, Size: "64", Rate: 0, Subscribers: 1, MinMsgsPerSec: 2e5},
		{Name: "r4", System: Raw, Size: "64", Rate: 0, Subscribers: 4, MinMsgsPerSec: 1e5},
	}
	lat := []LatencyRun{
		{System: Mdbus, Mode: RoundTrip, Size: "64", Rate: 1e4, Total: Percentiles{P50: 60, P99: 100, P999: 300}},
		{System: Raw, Mode: RoundTrip, Size: "64", Rate: 1e4, Total: Percentiles{P50: 50, P99: 100, P999: 200}},
	}
	rs := ratios(tp, lat, nil)
	require.Len(t, rs, 4)
	require.InDelta(t, 20, rs[0].Ratio, 1e-9)
	require.InDelta(t, 1.2, rs[1].Ratio, 1e-9)
	require.InDelta(t, 1.5, rs[3].Ratio, 1e-9)
	require.Zero(t, ratio(1, 0), "no NaN in JSON")
}

func TestTableMentionsEveryRun(t *testing.T) {
	r := &Report{
		Command:     "goals",
		Interrupted: true,
		Throughput: []ThroughputRun{{Name: "mdbus 64B", Subs: []SubResult{{Name: "sub1"}}, Error: "boom\nbang"},
			{Name: "mdbus 64B loss 1%", Loss: 0.01, Recovery: &Percentiles{Count: 15699, P50: 405e3, P99: 10.4e6, Max: 17e6},
				Sent: Counts{Messages: 36e6}, CPUSeconds: 2.567,
				Subs: []SubResult{{Name: "sub1", Gaps: 15699, NAKs: 15942, Retries: 78, HeldMax: 12172, CPUSeconds: 2.4675,
					AskedP50: 150e-6, AskedP99: 2.981e-3, AnsweredP50: 105e-6, AnsweredP99: 4.351e-3}}}},
		Latency: []LatencyRun{{Name: "raw rtt", Wire: &Percentiles{}, RecvPath: &Percentiles{}},
			{Name: strings.Repeat("a long ping-pong run name ", 6), Sent: 1 << 40, Received: 1 << 40, Total: Percentiles{P50: 1 << 50, Max: 1 << 60},
				ClosedLoop: &ClosedLoop{RoundTripsPerSec: 26974, PingCPU: 0.98, PongCPU: 0.96, PingInline: ptrF(1), PongInline: ptrF(1)}}},
		Capacity: []CapacityResult{{Name: "mdbus 64B in 1472B packets 1->4 processes with a long name", System: Mdbus, Capacity: 5.29e6, Failed: 6.44e6,
			Limit: "sender behind", Probes: []Probe{{Rate: 0, Sent: 6442520, Delivered: 3757708, Why: "kernel drops"}, {Rate: 3.38e6, Pass: true}, {Rate: 4.23e6, Pass: true},
				{Rate: 5.29e6, Pass: true}, {Rate: 6.44e6, Why: "sender behind"}, {Rate: 5.87e6, Why: "sender behind"}, {Rate: 5.58e6, Why: "sender behind"}}}},
		Settings: Settings{Interface: "lo", PayloadSize: 1472, Batch: 256, ReadBuffer: 33554432, WriteBuffer: 4194304, Duration: 10, Warmup: 0.5},
		Files:    []string{strings.Repeat("/tmp/a-very-long-path", 10) + ".json", "/tmp/b.svg"},
		Goals:    []Goal{{Name: "g1", Pass: true}, {Name: "g2", Target: strings.Repeat("target ", 20), Measured: strings.Repeat("measured ", 30)}},
		Notes:    []string{"n1"},
	}
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, r))
	out := buf.String()
	for _, s := range []string{"INTERRUPTED", "mdbus 64B", "raw rtt", "wire", "pass", "FAIL", "note: n1", "boom; bang",
		"gap found to repaired over 15699 gaps: p50 405.0", "sub1: 15,942 re-requests, 78 retries", "12,172 packets held",
		"asked once: re-request p50 150.0, p99 2981 µs after the gap; repair p50 105.0, p99 4351 µs after it",
		"CPU per message sent: publisher process 71 ns (2.57 s), sub1 69 ns (2.47 s)"} {
		require.Contains(t, out, s)
	}
	for _, l := range strings.Split(out, "\n") {
		if len(strings.Fields(l)) > 1 { // a single word longer than the width stays whole
			require.LessOrEqual(t, utf8.RuneCountInString(l), TableWidth, l)
		}
		require.Equal(t, strings.TrimRight(l, " "), l)
	}
	require.NotContains(t, out, "CPU per message sent: this process") // the first run sent nothing
	require.Equal(t, "1,234,568", count(1234567.6))
	require.Equal(t, "12.35", us(12345))
}

func ptrF(v float64) *float64 { return &v }

func TestChartTitleCarriesContext(t *testing.T) {
	r := &Report{Command: "latency", Started: time.Date(2026, 12, 1, 20, 30, 0, 0, time.UTC), Machine: Machine{CPU: "cpu", Cores: 2},
		Settings: Settings{Duration: 10, PayloadSize: 1472},
		Latency:  []LatencyRun{{Mode: RoundTrip, Rate: 1e4, Size: "64"}, {Mode: PingPong, Size: "64"}, {Mode: RoundTrip, Rate: 1e4, Size: "1024"}}}
	ctx := chartContext(r)
	host, _ := os.Hostname()
	for _, s := range []string{"rate 10k/s, closed loop", "size 64B, 1024B", "run 10s", "payload 1472 B", "host " + host, "2026-12-01 20:30 UTC"} {
		require.Contains(t, ctx, s)
	}
	var buf bytes.Buffer
	require.NoError(t, WriteChart(&buf, "title, 1,234 samples\n"+ctx, nil))
	require.Contains(t, buf.String(), ">title, 1,234 samples</text>")
	require.Contains(t, buf.String(), "2026-12-01 20:30 UTC</text>")
}
