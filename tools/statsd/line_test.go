package statsd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// parsed is a Metric flattened for comparison.
type parsed struct {
	name   string
	typ    Type
	vals   []float64
	deltas []bool
	raw    string
	rate   float64
	tags   string
	ntags  int
	cont   string
	ts     int64
	reason Reason
}

func parseAll(data string) []parsed {
	p := NewParser(Limits{})
	p.Reset([]byte(data), false)
	var out []parsed
	var m Metric
	for {
		ok, r := p.Next(&m)
		if !ok {
			return out
		}
		if r != ReasonNone {
			out = append(out, parsed{reason: r})
			continue
		}
		var vals []float64
		var deltas []bool
		if m.Type != TypeSet {
			vals, deltas = append(vals, m.Values[:m.N]...), append(deltas, m.Delta[:m.N]...)
		}
		out = append(out, parsed{name: string(m.Name), typ: m.Type, vals: vals,
			deltas: deltas, raw: string(m.Raw), rate: m.Rate, tags: string(m.Tags),
			ntags: m.NTags, cont: string(m.Container), ts: m.Timestamp})
	}
}

func TestParseValid(t *testing.T) {
	f, tr := false, true
	for _, tc := range []struct {
		name, in string
		want     []parsed
	}{
		{"counter", "a.b:1|c", []parsed{{name: "a.b", typ: TypeCounter, vals: []float64{1}, deltas: []bool{f}, raw: "1", rate: 1}}},
		{"counter rate", "a:3|c|@0.1", []parsed{{name: "a", typ: TypeCounter, vals: []float64{3}, deltas: []bool{f}, raw: "3", rate: 0.1}}},
		{"gauge set", "g:42|g", []parsed{{name: "g", typ: TypeGauge, vals: []float64{42}, deltas: []bool{f}, raw: "42", rate: 1}}},
		{"gauge deltas", "g:+4|g\ng:-2.5|g", []parsed{
			{name: "g", typ: TypeGauge, vals: []float64{4}, deltas: []bool{tr}, raw: "+4", rate: 1},
			{name: "g", typ: TypeGauge, vals: []float64{-2.5}, deltas: []bool{tr}, raw: "-2.5", rate: 1}}},
		{"timer", "t:320|ms|@0.5", []parsed{{name: "t", typ: TypeTimer, vals: []float64{320}, deltas: []bool{f}, raw: "320", rate: 0.5}}},
		{"negative counter is not a delta", "c:-1|c", []parsed{{name: "c", typ: TypeCounter, vals: []float64{-1}, deltas: []bool{f}, raw: "-1", rate: 1}}},
		{"set", "u:alice|s", []parsed{{name: "u", typ: TypeSet, raw: "alice", rate: 1}}},
		{"dogstatsd full", "page.views:1.5|h|@0.25|#env:prod,web|c:abc123|T1656581400", []parsed{{name: "page.views", typ: TypeHistogram,
			vals: []float64{1.5}, deltas: []bool{f}, raw: "1.5", rate: 0.25, tags: "env:prod,web", ntags: 2, cont: "abc123", ts: 1656581400}}},
		{"packed", "d:1:2:3.5|d|#a:b", []parsed{{name: "d", typ: TypeDistribution, vals: []float64{1, 2, 3.5}, deltas: []bool{f, f, f},
			raw: "1:2:3.5", rate: 1, tags: "a:b", ntags: 1}}},
		{"etsy multi-metric", "a:1|c:5|ms|@0.5:7|g", []parsed{
			{name: "a", typ: TypeCounter, vals: []float64{1}, deltas: []bool{f}, raw: "1", rate: 1},
			{name: "a", typ: TypeTimer, vals: []float64{5}, deltas: []bool{f}, raw: "5", rate: 0.5},
			{name: "a", typ: TypeGauge, vals: []float64{7}, deltas: []bool{f}, raw: "7", rate: 1}}},
		{"crlf and empty lines", "a:1|c\r\n\n\nb:2|c\n", []parsed{
			{name: "a", typ: TypeCounter, vals: []float64{1}, deltas: []bool{f}, raw: "1", rate: 1},
			{name: "b", typ: TypeCounter, vals: []float64{2}, deltas: []bool{f}, raw: "2", rate: 1}}},
		{"exponent", "e:1.5e3|ms", []parsed{{name: "e", typ: TypeTimer, vals: []float64{1500}, deltas: []bool{f}, raw: "1.5e3", rate: 1}}},
		{"utf8 name", "größe:1|c", []parsed{{name: "größe", typ: TypeCounter, vals: []float64{1}, deltas: []bool{f}, raw: "1", rate: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, parseAll(tc.in))
		})
	}
}

func TestParseSetMembers(t *testing.T) {
	var m Metric
	require.Equal(t, ReasonNone, ParseLine(&m, []byte("s:x:yy:z|s"), Limits{}))
	require.Equal(t, 3, m.N)
	require.Equal(t, "x", string(m.Member(0)))
	require.Equal(t, "yy", string(m.Member(1)))
	require.Equal(t, "z", string(m.Member(2)))
}

func TestParseRefused(t *testing.T) {
	lim := Limits{}.withDefaults()
	for _, tc := range []struct {
		name, in string
		want     Reason
	}{
		{"empty name", ":1|c", ReasonEmptyName},
		{"no colon", "abc", ReasonNoValue},
		{"no type", "a:1", ReasonNoValue},
		{"empty type", "a:1|", ReasonNoValue},
		{"unknown type", "a:1|x", ReasonUnknownType},
		{"bad value", "a:1x|c", ReasonBadValue},
		{"empty value", "a:|c", ReasonBadValue},
		{"hex value", "a:0x10|c", ReasonBadValue},
		{"nan", "a:NaN|g", ReasonNaNInf},
		{"inf", "a:+Inf|ms", ReasonNaNInf},
		{"overflow", "a:1e999|ms", ReasonNaNInf},
		{"rate zero", "a:1|c|@0", ReasonBadSampleRate},
		{"rate negative", "a:1|c|@-0.5", ReasonBadSampleRate},
		{"rate above one", "a:1|c|@1.5", ReasonBadSampleRate},
		{"rate nan", "a:1|c|@nan", ReasonBadSampleRate},
		{"rate twice", "a:1|c|@0.5|@0.5", ReasonBadField},
		{"unknown field", "a:1|c|x", ReasonBadField},
		{"trailing bar", "a:1|c|", ReasonBadField},
		{"bad timestamp", "a:1|c|Tabc", ReasonBadTimestamp},
		{"zero timestamp", "a:1|c|T0", ReasonBadTimestamp},
		{"empty tag", "a:1|c|#a,,b", ReasonBadTag},
		{"trailing comma tag", "a:1|c|#a,", ReasonBadTag},
		{"control in tag", "a:1|c|#a\x01", ReasonBadTag},
		{"10,000 tags", "a:1|c|#" + strings.Repeat("t,", 9999) + "t", ReasonLineTooLong},
		{"tags too long", "a:1|c|#" + strings.Repeat("t", lim.MaxTagBytes+1), ReasonTagsTooLong},
		{"too many short tags", "a:1|c|#" + strings.Repeat("t,", lim.MaxTags) + "t", ReasonTooManyTags},
		{"name 64 KiB", strings.Repeat("n", 64<<10) + ":1|c", ReasonLineTooLong},
		{"name too long", strings.Repeat("n", lim.MaxNameLen+1) + ":1|c", ReasonNameTooLong},
		{"space in name", "a b:1|c", ReasonBadName},
		{"invalid utf8", "a\xff:1|c", ReasonInvalidUTF8},
		{"too many values", "d:" + strings.Repeat("1:", MaxPacked) + "1|d", ReasonTooManyValues},
		{"empty set member", "s:a::b|s", ReasonBadValue},
		{"etsy part without value", "a:1|c:", ReasonNoValue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parseAll(tc.in)
			require.Len(t, got, 1)
			require.Equal(t, tc.want, got[0].reason, "line %.80q", tc.in)
		})
	}
}

func TestParseTooManyTagsWithRoom(t *testing.T) {
	// 10,000 tags with a tag byte limit that would hold them: the count
	// limit refuses them.
	var m Metric
	line := "a:1|c|#" + strings.Repeat("t,", 9999) + "t"
	require.Equal(t, ReasonTooManyTags, ParseLine(&m, []byte(line), Limits{MaxTagBytes: 1 << 20, MaxLineLen: 1 << 20}))
}

func TestParseTruncated(t *testing.T) {
	p := NewParser(Limits{})
	p.Reset([]byte("a:1|c\nb:2|c\nc:3|"), true)
	var m Metric
	var got []Reason
	for ok, r := p.Next(&m); ok; ok, r = p.Next(&m) {
		got = append(got, r)
	}
	require.Equal(t, []Reason{ReasonNone, ReasonNone, ReasonTruncated}, got)
}

func TestReasonNames(t *testing.T) {
	seen := map[string]bool{}
	for r := Reason(0); r < NumReasons; r++ {
		s := r.String()
		require.NotEmpty(t, s)
		require.False(t, seen[s], s)
		seen[s] = true
	}
}

var allocLines = []byte("a.b.c:1|c\nt:320|ms|@0.5\ng:-3|g\nd:1:2:3|d|#env:prod,web|c:abc|T1656581400\ns:member|s\nh:12.5|h|#k:v\n")

func TestParseAllocs(t *testing.T) {
	p := NewParser(Limits{})
	var m Metric
	n := testing.AllocsPerRun(1000, func() {
		p.Reset(allocLines, false)
		for ok, r := p.Next(&m); ok; ok, r = p.Next(&m) {
			if r != ReasonNone {
				t.Fatalf("refused: %v", r)
			}
		}
	})
	require.Zero(t, n, "allocations per datagram of valid lines")
}

func BenchmarkParse(b *testing.B) {
	p := NewParser(Limits{})
	var m Metric
	lines := bytes.Count(allocLines, []byte{'\n'})
	b.ReportAllocs()
	b.SetBytes(int64(len(allocLines)))
	for b.Loop() {
		p.Reset(allocLines, false)
		for ok, _ := p.Next(&m); ok; ok, _ = p.Next(&m) {
		}
	}
	b.ReportMetric(float64(b.N*lines)/b.Elapsed().Seconds(), "lines/s")
}

// FuzzParseLine checks that any input parses without panicking, that the
// limits hold for every accepted metric, and that an accepted metric's
// parts re-parse to the same metric.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{"a:1|c", "a:1|c|@0.1", "g:+4|g", "t:1.5|ms|#a:b,c", "d:1:2:3|d|c:x|T123",
		"a:1|c:5|ms|@0.5:7|g", "s:x:y|s", "bad", ":1|c", "a:NaN|g", "a\xff:1|c", "a:1|c|#" + strings.Repeat("t,", 100)} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, truncated bool) {
		lim := Limits{MaxLineLen: 512, MaxNameLen: 64, MaxTags: 8, MaxTagBytes: 128, MaxValues: 16}
		p := NewParser(lim)
		p.Reset(data, truncated)
		var m, m2 Metric
		for i := 0; ; i++ {
			if i > len(data)+1 {
				t.Fatalf("more metrics than bytes")
			}
			ok, r := p.Next(&m)
			if !ok {
				return
			}
			if r >= NumReasons {
				t.Fatalf("reason %d out of range", r)
			}
			if r != ReasonNone {
				continue
			}
			if len(m.Name) == 0 || len(m.Name) > 64 || m.NTags > 8 || len(m.Tags) > 128 || m.N < 1 || m.N > 16 {
				t.Fatalf("limits broken: %+v", m)
			}
			if !(m.Rate > 0 && m.Rate <= 1) {
				t.Fatalf("rate %v", m.Rate)
			}
			// Rebuild the metric as one line and parse it again.
			line := append([]byte(nil), m.Name...)
			line = append(line, ':')
			line = append(line, m.Raw...)
			line = append(line, '|')
			line = append(line, m.Type.Code()...)
			if m.Tags != nil {
				line = append(line, "|#"...)
				line = append(line, m.Tags...)
			}
			if r2 := ParseLine(&m2, line, lim); r2 != ReasonNone {
				t.Fatalf("%q re-parsed as %v", line, r2)
			}
			if m2.N != m.N || m2.Type != m.Type || !bytes.Equal(m2.Name, m.Name) || m2.Values != m.Values || m2.NTags != m.NTags {
				t.Fatalf("%q re-parsed differently", line)
			}
		}
	})
}

// FuzzParseMessage checks that any bus message decodes or errors without
// panicking, and that a decoded one re-encodes to the same bytes.
func FuzzParseMessage(f *testing.F) {
	f.Add(append(AppendMessageHeader(nil, 1700000000e9), "a:1|c\nb:2|ms\n"...))
	f.Add(AppendMessageHeader(nil, 0))
	f.Add([]byte{1, 2, 3})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		msg, err := ParseMessage(b)
		if err != nil {
			return
		}
		again := append(AppendMessageHeader(nil, msg.Time), msg.Lines...)
		if !bytes.Equal(again, b) {
			t.Fatalf("round trip: %x != %x", again, b)
		}
		p := NewParser(Limits{})
		p.Reset(msg.Lines, false)
		var m Metric
		for i := 0; i <= len(b); i++ {
			if ok, _ := p.Next(&m); !ok {
				return
			}
		}
		t.Fatalf("parser did not end")
	})
}
