package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/bench"
	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
)

func TestParseNumber(t *testing.T) {
	for in, want := range map[string]float64{
		"0": 0, "250000": 250000, "10k": 10000, "10K": 10000, "1.5M": 1.5e6, "2G": 2e9, "0.5": 0.5,
		"1e6": 1e6, " 200 ": 200, "10_000": 10000, "1.25k": 1250,
	} {
		got, err := parseNumber(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "abc", "NaN", "nan", "Inf", "+Inf", "-inf", "infinity", "-1", "-0", "-1k", "10m", "1.5x", "0x10", "k", "1e400", "9e308G"} {
		_, err := parseNumber(in)
		require.Error(t, err, in)
	}
}

func TestCountAndRateFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	n := countFlag(fs, "count", 0, "")
	n64 := countFlag[int64](fs, "count64", 0, "")
	u := countFlag[uint64](fs, "u", 0, "")
	r := rateFlag(fs, "rate", 0, "")
	p := probFlag(fs, "loss", 0, "")
	require.NoError(t, parseFlags(fs, []string{"--count", "10k", "--count64", "1.5M", "--u", "2G", "--rate", "2.5k", "--loss", "0.05"}))
	require.Equal(t, 10000, *n)
	require.Equal(t, int64(1_500_000), *n64)
	require.Equal(t, uint64(2e9), *u)
	require.Equal(t, 2500.0, *r)
	require.Equal(t, 0.05, *p)
	for _, bad := range [][]string{{"--count", "1.5"}, {"--count", "-1"}, {"--count", "1e30"}, {"--rate", "NaN"}, {"--rate", "-5"},
		{"--rate", "Inf"}, {"--loss", "1.5"}, {"--loss", "NaN"}, {"--loss", "-0.1"}, {"extra"}, {"--nope"}} {
		err := parseFlags(fs, bad)
		require.ErrorIs(t, err, errUsage, bad)
		require.Contains(t, err.Error(), "run 'x -h' for help", bad)
	}
	require.NotPanics(t, func() { _ = countValue[int]{}.String() })
	require.Equal(t, "1e+06", (*rateValue)(ptr(1e6)).String())
	require.False(t, math.IsNaN(*r))
}

func ptr(v float64) *float64 { return &v }

// TestUsageErrorsExit2 runs the command line as main does: every usage
// error exits 2 with one line that says what was wrong and where the help
// is, and runs nothing.
func TestUsageErrorsExit2(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the line
	}{
		{[]string{"sub", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"sub", "extra-arg", "--duration", "1s"}, `unexpected argument "extra-arg"`},
		{[]string{"sub", "--count", "x"}, `invalid value "x" for flag -count`},
		{[]string{"sub", "--procs", "-1"}, "--procs -1: want a count of Go processors"},
		{[]string{"pub", "--procs", "-2"}, "--procs -2: want a count of Go processors"},
		{[]string{"bench", "throughput", "--netns=false", "--sub-procs", "-1"}, "--sub-procs -1"},
		{[]string{"bench", "throughput", "--netns=false", "--pub-procs", "-1"}, "--pub-procs -1"},
		{[]string{"bench", "group", "--netns=false", "--sub-procs", "-1"}, "--sub-procs -1"},
		{[]string{"sub", "--loss", "1.5"}, "-loss"},
		{[]string{"sub", "--decode", "fix"}, `--decode "fix"`},
		{[]string{"sub", "--decode", "itch50", "--format", "hex"}, "not hex"},
		{[]string{"pub", "--rate", "NaN"}, `invalid value "NaN" for flag -rate`},
		{[]string{"pub", "--rate", "-5"}, "negative"},
		{[]string{"pub", "--rate", "Inf"}, "-rate"},
		{[]string{"pub", "--count", "-1"}, "-count"},
		{[]string{"demo", "--netns=false", "--subscribers", "-1"}, "-subscribers"},
		{[]string{"demo", "--netns=false", "--subscribers", "0"}, "--subscribers 0"},
		{[]string{"demo", "--netns=false", "--loss", "2"}, "-loss"},
		{[]string{"demo", "--netns=false", "--linger", "-1ms"}, "--linger -1ms"},
		{[]string{"demo", "--netns=false", "--linger", "2s"}, "--linger 2s: want 0 to 1s"},
		{[]string{"impair", "--loss", "NaN"}, "-loss"},
		{[]string{"impair", "--in", "239.1.1.1:5000", "--out", "239.1.1.2:5000", "--delay", "-1s"}, "elay"},
		{[]string{"sub", "--repair-source", "127.0.0.1"}, "--repair-source needs --repair-group"},
		{[]string{"replay", "--journal", "/nonexistent", "--max", "--speed", "2", "--rate", "5"}, "give one pace"},
		{[]string{"replay", "--journal", "/nonexistent", "--speed", "0"}, "--speed"},
		{[]string{"replay", "--journal", "/nonexistent", "--decode", "itch50"}, "--print"},
		{[]string{"journal", "dump", "--bogus", "/x"}, "run 'mdbus journal dump -h' for help"},
		{[]string{"journal", "dump", "--count", "-3", "/x"}, "--count"},
		{[]string{"pcap", "import", "f.pcap", "--group", "239.1.1.1:5000", "--speed", "0"}, "--speed 0"},
		{[]string{"stat", "--count", "1.5"}, "-count"},
		{[]string{"bench", "latency", "--netns=false", "--subs", "-1"}, "-subs"},
		{[]string{"bench", "throughput", "--netns=false", "--loss", "0.02"}, "add --with-loss"},
		{[]string{"rewind", "stray"}, `unexpected argument "stray"`},
		{[]string{"pub", "--payload", "10"}, "publisher: invalid config: PayloadSize 10"},
		{[]string{"nope"}, `unknown command "nope"`},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"mdbus", "--counters=false"}, tc.args...), &out, &errb)
		require.Equal(t, 2, code, "%v: %s", tc.args, errb.String())
		line := errb.String()
		require.Equal(t, 1, strings.Count(line, "\n"), "%v: one line, got %q", tc.args, line)
		require.Contains(t, line, tc.want, tc.args)
		require.Regexp(t, `run 'mdbus ([a-z ]+ -h' for help|help' for the commands)`, line, tc.args)
		require.Empty(t, out.String(), tc.args)
	}
}

func TestVersion(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"mdbus", "--version"}, &out, &errb))
	require.Regexp(t, `^mdbus \S+ \(commit .+, go1\.`, out.String())
}

// TestPrintDecoded: sub, replay --print and journal dump write decoded ITCH
// as text lines and as JSON objects that parse.
func TestPrintDecoded(t *testing.T) {
	// A real Add Order (message 6 of shared/testdata's ITCH sample).
	msg := []byte("\x41\x20\xbd\x00\x00\x1f\x1a\xce\xdb\x59\x7b\x00\x00\x00\x00\x00\x97\x0c\x7c\x42\x00\x00\x00\x64VIXM    \x00\x03\x41\x34")
	const decoded = "A add_order stock_locate=8381 tracking_number=0 timestamp=34200000092539 time_of_day=09:30:00.000092539 order_reference_number=9899132 buy_sell_indicator=B shares=100 stock=VIXM price=21.3300"
	dec, err := parseDecode("itch50", "json")
	require.NoError(t, err)

	r := journal.Record{Seq: 7, Time: 1_700_000_000_000_000_000, Data: msg}
	require.Equal(t, "S1 7 2023-11-14T22:13:20Z "+decoded+"\n", string(appendRecord(nil, "text", dec, "S1", r)))
	var obj struct {
		Seq  uint64         `json:"seq"`
		ITCH map[string]any `json:"itch"`
		Hex  string         `json:"hex"`
	}
	require.NoError(t, json.Unmarshal(appendRecord(nil, "json", dec, "S1", r), &obj))
	require.Equal(t, uint64(7), obj.Seq)
	require.Equal(t, "VIXM", obj.ITCH["stock"])
	require.Equal(t, 21.33, obj.ITCH["price"])
	require.Empty(t, obj.Hex)
	// Undecoded: hex, as before.
	require.NoError(t, json.Unmarshal(appendRecord(nil, "json", decoder{}, "S1", r), &obj))
	require.Equal(t, "4120bd00001f1acedb597b0000000000970c7c42000000645649584d2020202000034134", obj.Hex)

	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	session, _ := wire.ParseSession("S1")
	m := subscriber.Message{Stream: subscriber.StreamID{Session: session}, Seq: 9, Data: msg}
	p := msgPrinter{format: "text", dec: dec}
	p.print(w, m)
	p = msgPrinter{format: "json", dec: dec}
	p.print(w, m)
	p.print(w, subscriber.Message{Stream: m.Stream, Seq: 10, Data: []byte("Z\x00\"")})
	require.NoError(t, w.Flush())
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	require.Len(t, lines, 3)
	require.Equal(t, "S1 9 "+decoded, lines[0])
	for _, l := range lines[1:] {
		require.True(t, json.Valid([]byte(l)), l)
	}
	require.Contains(t, lines[2], `"itch":{"error":"unknown message type 0x5a"`)

	// A message costs no allocation in any format.
	w = bufio.NewWriterSize(io.Discard, 1<<16)
	for _, format := range []string{"text", "hex", "json"} {
		p := msgPrinter{format: format, dec: decoder{itch: format != "hex"}}
		p.print(w, m)
		require.Zero(t, testing.AllocsPerRun(100, func() { p.print(w, m) }), format)
	}
}

func TestBenchProgress(t *testing.T) {
	var b bytes.Buffer
	p := &benchProgress{w: &b, start: time.Now(), total: 3}
	p.run("mdbus rtt 64B 10k/s", 2*time.Second)
	p.run("raw rtt 64B 10k/s", 2*time.Second)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 2)
	require.Equal(t, "mdbus bench: run 1/3: mdbus rtt 64B 10k/s (2s); elapsed 0s, ETA 6s", lines[0])
	require.Regexp(t, `^mdbus bench: run 2/3: raw rtt 64B 10k/s \(2s\); elapsed 0s, ETA \S+$`, lines[1])
	b.Reset()
	(&benchProgress{w: &b, start: time.Now()}).run("goal", time.Second)
	require.Equal(t, "mdbus bench: run 1: goal (1s); elapsed 0s, ETA ?\n", b.String())

	sys := []bench.System{bench.Mdbus, bench.Raw}
	szs := []bench.Sizes{{}, {}}
	require.Len(t, bench.ThroughputCases(bench.RunMatrix{Systems: sys, Sizes: szs, Rates: []float64{1, 2, 3}, Losses: []float64{0.01}}), 2*3*2+2*3)
	// Per size: rtt at each of 2 rates and ping-pong once, for 2 systems.
	require.Len(t, bench.LatencyCases(bench.RunMatrix{Systems: sys, Sizes: szs, Rates: []float64{1, 2}, Modes: []string{bench.RoundTrip, bench.PingPong}}), 2*(2*2+2))
}

// FuzzParseNumber: any flag value gives a finite, non-negative number or
// an error, never a panic.
func FuzzParseNumber(f *testing.F) {
	for _, s := range []string{"10k", "1.5M", "2G", "NaN", "-1", "1e308G", "0x1p3", "", "1_000", " 5 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseNumber(s)
		if err == nil && (v < 0 || math.IsNaN(v) || math.IsInf(v, 0)) {
			t.Fatalf("parseNumber(%q) = %v", s, v)
		}
		_ = countValue[int]{p: new(int)}.Set(s)
		_ = countValue[uint64]{p: new(uint64)}.Set(s)
	})
}
