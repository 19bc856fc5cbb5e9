package statsd

import (
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// socketless is a Collector driven by hand: messages go to onMessage as
// the subscriber would deliver them.
type socketless struct {
	*Collector
	rec *recorder
	seq wire.Seq
	id  subscriber.StreamID
}

func newSocketless(t *testing.T, cfg CollectorConfig) *socketless {
	t.Helper()
	rec := newRecorder()
	cfg.Backends = append(cfg.Backends, rec)
	cfg.Bus.Group = netip.MustParseAddrPort("239.1.1.1:1")
	cfg, err := cfg.withDefaults()
	require.NoError(t, err)
	c := &Collector{cfg: cfg, p: NewParser(cfg.Limits), series: map[string]*seriesInfo{}, buckets: map[int64]*bucket{},
		streams: map[subscriber.StreamID]*streamState{}, out: make(chan *Flush, flushQueue), quit: make(chan struct{})}
	c.wg.Add(1)
	go c.runFlush()
	s := &socketless{Collector: c, rec: rec, id: subscriber.StreamID{Session: wire.Session{'T', 'E', 'S', 'T', ' ', ' ', ' ', ' ', ' ', ' '}}}
	t.Cleanup(s.close)
	return s
}

// send delivers one bus message of lines at relay time at.
func (s *socketless) send(at time.Time, lines string) {
	s.seq++
	msg := append(AppendMessageHeader(nil, at.UnixNano()), lines...)
	s.onMessage(subscriber.Message{Stream: s.id, Seq: s.seq, Data: msg})
}

func (s *socketless) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.closeUpTo(1<<63 - 1)
	close(s.out)
	s.mu.Unlock()
	s.wg.Wait()
}

var t0 = time.Unix(1_700_000_000, 0)

func TestCollectorBounds(t *testing.T) {
	s := newSocketless(t, CollectorConfig{FlushInterval: time.Second, MaxSeries: 1000, MaxSetMembers: 10_000, MaxHistograms: 10})
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	// A set with a million distinct members, and a flood of 200,000 new
	// series, in one interval.
	var b strings.Builder
	admitted := map[string]bool{}
	refused := 0
	seen := func(name string) {
		if !admitted[name] && len(admitted) < 1000 {
			admitted[name] = true
		}
		if !admitted[name] {
			refused++
		}
	}
	for i := range 1_000_000 {
		fmt.Fprintf(&b, "big.set:m%d|s\n", i)
		seen("big.set")
		if i%5 == 0 {
			fmt.Fprintf(&b, "flood.%d:1|c\n", i)
			seen(fmt.Sprint("flood.", i))
		}
		if i%20 == 0 {
			fmt.Fprintf(&b, "hist.%d:%d|ms\n", i%400, i)
			seen(fmt.Sprint("hist.", i%400))
		}
		if b.Len() > 1300 {
			s.send(t0, b.String())
			b.Reset()
		}
	}
	s.send(t0, b.String())
	s.send(t0.Add(time.Second), "") // close the interval
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	s.close()
	require.Len(t, s.rec.flushes, 2)
	f := s.rec.flushes[0]
	got := map[string]Series{}
	for _, x := range f.Series {
		got[x.Name] = x
	}
	require.Equal(t, 10_000, got["big.set"].Distinct)
	require.Equal(t, uint64(990_000), got["big.set"].Refused)
	require.Equal(t, float64(990_000), got[selfMembersRefused].Count)
	require.LessOrEqual(t, len(s.series), 1000)
	require.Equal(t, float64(1000), got[selfSeries].Value)
	require.Equal(t, float64(refused), got[selfSeriesRefused].Count, "metrics refused for want of a series")
	require.NotZero(t, got[selfHistRefused].Count, "MaxHistograms held")
	grown := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("heap grew by %d KiB with 1000 series, a 10,000-member set and 10 histograms", grown>>10)
	require.Less(t, grown, int64(64<<20))
}

func TestCollectorAggregates(t *testing.T) {
	s := newSocketless(t, CollectorConfig{FlushInterval: 10 * time.Second, Percentiles: []float64{50, 100}})
	s.send(t0, "c:1|c\nc:4|c|@0.5\nc:2|c|#b:2,a:1\nc:2|c|#a:1,b:2,a:1\ng:5|g\ng:+2|g\ng:-10|g\n")
	s.send(t0.Add(time.Second), "s:x|s\ns:y:x|s\nt:10|ms|@0.5\nt:20|ms\nt:30:40|ms\n")
	s.send(t0.Add(10*time.Second), "g:+1|g\n") // next interval
	s.send(t0.Add(20*time.Second), "")
	s.close()
	require.Len(t, s.rec.flushes, 3)
	want := `{"ts":1700000010,"interval":10,"name":"c","type":"counter","tags":[],"count":9,"rate":0.9}
{"ts":1700000010,"interval":10,"name":"c","type":"counter","tags":["a:1","b:2"],"count":4,"rate":0.4}
{"ts":1700000010,"interval":10,"name":"g","type":"gauge","tags":[],"value":-3}
{"ts":1700000010,"interval":10,"name":"s","type":"set","tags":[],"distinct":2,"refused":0}
{"ts":1700000010,"interval":10,"name":"t","type":"timer","tags":[],"count":5,"rate":0.5,"n":4,"sum":100,"mean":25,"min":10,"max":40,"p50":20.095,"p100":40}
`
	first := strings.SplitAfter(s.rec.text.String(), "\n")
	var mine strings.Builder
	for _, l := range first {
		if strings.Contains(l, `"ts":1700000010`) && !strings.Contains(l, SelfPrefix) {
			mine.WriteString(l)
		}
	}
	require.Equal(t, want, mine.String())
	require.Contains(t, s.rec.text.String(), `{"ts":1700000020,"interval":10,"name":"g","type":"gauge","tags":[],"value":-2}`)
	require.Contains(t, s.rec.text.String(), `{"ts":1700000020,"interval":10,"name":"c","type":"counter","tags":[],"count":0,"rate":0}`)
}

func TestCollectorExpiresIdleSeries(t *testing.T) {
	s := newSocketless(t, CollectorConfig{FlushInterval: time.Second, IdleExpiry: 3 * time.Second})
	s.send(t0, "old:1|c\n")
	for i := 1; i <= 6; i++ {
		s.send(t0.Add(time.Duration(i)*time.Second), "new:1|c\n")
	}
	s.close()
	count := strings.Count(s.rec.text.String(), `"name":"old"`)
	require.Equal(t, 4, count, "flushed in its interval and 3 idle ones, then forgotten")
}

func TestCollectorLossVisible(t *testing.T) {
	s := newSocketless(t, CollectorConfig{FlushInterval: time.Second})
	s.send(t0, "a:1|c\n")
	s.onLoss(subscriber.Loss{Stream: s.id, From: 2, To: 5})
	s.seq = 4
	s.send(t0.Add(time.Second), "a:1|c\n")
	s.close()
	require.Contains(t, s.rec.text.String(), `"name":"mdbus.statsd.collector.bus_lost_messages","type":"counter","tags":[],"count":3`)
	require.Equal(t, uint64(3), s.rec.flushes[1].Lost)
}

func TestCollectorBadBusInput(t *testing.T) {
	s := newSocketless(t, CollectorConfig{FlushInterval: time.Second})
	s.send(t0, "a:1|c\nbad\n")
	s.seq++
	s.onMessage(subscriber.Message{Stream: s.id, Seq: s.seq, Data: []byte{9, 9}})
	s.close()
	out := s.rec.text.String()
	require.Contains(t, out, `"name":"mdbus.statsd.collector.bad_lines","type":"counter","tags":["reason:no_value"],"count":1`)
	require.Contains(t, out, `"name":"mdbus.statsd.collector.bad_bus_messages","type":"counter","tags":[],"count":1`)
}

func BenchmarkCollectorAdd(b *testing.B) {
	s := &socketless{}
	cfg, _ := CollectorConfig{Bus: subscriber.Config{Group: netip.MustParseAddrPort("239.1.1.1:1")}, FlushInterval: time.Hour}.withDefaults()
	s.Collector = &Collector{cfg: cfg, p: NewParser(cfg.Limits), series: map[string]*seriesInfo{}, buckets: map[int64]*bucket{},
		streams: map[subscriber.StreamID]*streamState{}, out: make(chan *Flush, flushQueue)}
	msg := append(AppendMessageHeader(nil, t0.UnixNano()), allocLines...)
	lines := strings.Count(string(allocLines), "\n")
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for i := 0; b.Loop(); i++ {
		s.onMessage(subscriber.Message{Stream: s.id, Seq: wire.Seq(i + 1), Data: msg})
	}
	b.ReportMetric(float64(b.N*lines)/b.Elapsed().Seconds(), "metrics/s")
}
