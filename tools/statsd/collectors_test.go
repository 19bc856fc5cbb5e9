package statsd

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTwoCollectorsIdentical is acceptance 3: two collectors on one group,
// each losing 5% of bus datagrams independently, write byte-identical
// flush output, because intervals are defined by the relay clock carried
// in the stream and every loss is recovered. STATSD_TWO_DURATION sets
// the run (default 3 s; the acceptance run is 60s).
func TestTwoCollectorsIdentical(t *testing.T) {
	dur := 3 * time.Second
	if d, err := time.ParseDuration(os.Getenv("STATSD_TWO_DURATION")); err == nil {
		dur = d
	}
	p := newPipeline(t, pipeOpts{collectors: 2, loss: 0.05, flush: 200 * time.Millisecond})
	conn := udpSender(t, p.relay.Addr())
	end := time.Now().Add(dur)
	sent := 0
	for i := 0; time.Now().Before(end); i++ {
		var b strings.Builder
		for j := range 20 {
			k := i*20 + j
			fmt.Fprintf(&b, "two.c:%d|c|#k:%d\ntwo.g:%+d|g\ntwo.t:%d|ms|@0.5\ntwo.s:u%d|s\ntwo.d:%d:%d|d|#a:b\n", k%7, k%3, k%5-2, k%1000, k%300, k%77, k%91)
			sent += 5
		}
		_, err := conn.Write([]byte(b.String()))
		require.NoError(t, err)
		p.readAll(t, uint64(i+1))
	}
	p.finish(t, 20*time.Second)
	a, b := p.recs[0], p.recs[1]
	ta, tb := a.totals(), b.totals()
	t.Logf("%v run: %d metrics sent, %d flushes; impairment dropped %d and %d datagrams; %d bytes of JSON each",
		dur, sent, ta.flushes, p.imps[0].Stats().Dropped, p.imps[1].Stats().Dropped, a.text.Len())
	require.NotZero(t, p.imps[0].Stats().Dropped)
	require.NotZero(t, p.imps[1].Stats().Dropped)
	require.Zero(t, ta.lost)
	require.Zero(t, tb.lost)
	require.Equal(t, float64(sent), ta.metrics)
	require.Greater(t, ta.flushes, 3)
	if a.text.String() != b.text.String() {
		la, lb := strings.Split(a.text.String(), "\n"), strings.Split(b.text.String(), "\n")
		for i := range min(len(la), len(lb)) {
			if la[i] != lb[i] {
				t.Fatalf("outputs differ at line %d:\n%s\n%s", i+1, la[i], lb[i])
			}
		}
		t.Fatalf("outputs differ in length: %d and %d lines", len(la), len(lb))
	}
}

// badLines are malformed lines with the reason each must be refused for.
var badLines = []struct {
	line   string
	reason Reason
}{
	{":1|c", ReasonEmptyName},
	{"x.y", ReasonNoValue},
	{"x:1", ReasonNoValue},
	{"x:1|zz", ReasonUnknownType},
	{"x:abc|c", ReasonBadValue},
	{"x:NaN|g", ReasonNaNInf},
	{"x:-Inf|ms", ReasonNaNInf},
	{"x:1|c|@0", ReasonBadSampleRate},
	{"x:1|c|@1.5", ReasonBadSampleRate},
	{"x:1|c|#" + strings.Repeat("t,", DefaultMaxTags) + "t", ReasonTooManyTags},
	{"x:1|c|#" + strings.Repeat("t", DefaultMaxTagBytes+1), ReasonTagsTooLong},
	{strings.Repeat("n", DefaultMaxNameLen+1) + ":1|c", ReasonNameTooLong},
	{"x\xff\xfe:1|c", ReasonInvalidUTF8},
	{"x y:1|c", ReasonBadName},
	{"x:1|c|T-5", ReasonBadTimestamp},
	{"x:1|c|q", ReasonBadField},
	{"x:1|c|#a,,b", ReasonBadTag},
	{strings.Repeat("z", DefaultMaxLineLen+1), ReasonLineTooLong},
}

// TestMalformedInterleaved is acceptance 5: 100,000 malformed lines
// interleaved with valid ones change no valid aggregate, and the relay's
// refusal counters match what was sent, reason by reason, both in its
// Stats and in the counters it publishes on the bus.
func TestMalformedInterleaved(t *testing.T) {
	nBad := envInt("STATSD_BAD_N", 100_000, 20_000)
	p := newPipeline(t, pipeOpts{loss: 0.05, flush: oneInterval, relay: func(c *RelayConfig) { c.LogEvery = time.Hour }})
	conn := udpSender(t, p.relay.Addr())
	want := map[Reason]uint64{}
	var valid float64
	var b strings.Builder
	var sent uint64
	flush := func() {
		_, err := conn.Write([]byte(b.String()))
		require.NoError(t, err)
		b.Reset()
		if sent++; sent%16 == 0 {
			p.readAll(t, sent) // paced by the relay's intake
		}
	}
	for i := range nBad {
		bl := badLines[i%len(badLines)]
		want[bl.reason]++
		fmt.Fprintf(&b, "ok.c:1|c\nok.t:%d|ms\n%s\nok.s:m%d|s\n", i%100, bl.line, i%1000)
		valid++
		if b.Len() > 8000 {
			flush()
		}
	}
	flush()
	p.readAll(t, sent)
	r := p.relay
	p.finish(t, 20*time.Second)
	rs := r.Stats()
	tot := p.recs[0].totals()
	require.Zero(t, rs.KernelDrops)
	require.Zero(t, tot.lost)
	require.Equal(t, valid, tot.counters["ok.c|"])
	require.Equal(t, valid, tot.samples["ok.t|"])
	require.Equal(t, 1000, tot.sets["ok.s|"])
	require.Equal(t, uint64(nBad), rs.BadTotal)
	for r := Reason(1); r < NumReasons; r++ {
		require.Equal(t, want[r], rs.Bad[r], "relay stats, reason %v", r)
		require.Equal(t, float64(want[r]), tot.relayBad[r.String()], "published by the relay, reason %v", r)
	}
	require.Empty(t, tot.bad, "the collector saw bad lines: the relay let them through")
	t.Logf("%d bad lines by reason: %s", nBad, fmtMap(tot.relayBad))
}
