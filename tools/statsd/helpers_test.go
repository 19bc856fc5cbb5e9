package statsd

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/labtest"
	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/packetconn/impair"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	if !netlab.Inside() {
		// npm needs the registry, which the lab cannot reach: install the
		// pinned packages before entering it.
		ensureNPM()
	}
	labtest.Main(m)
}

var groupPort atomic.Uint32

// newGroup returns a fresh multicast group for one test.
func newGroup() netip.AddrPort {
	n := groupPort.Add(1)
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{239, 192, 81, byte(n)}), uint16(32000+n))
}

// recorder is a Backend keeping every flush.
type recorder struct {
	mu      sync.Mutex
	flushes []*Flush
	text    strings.Builder
	json    JSONWriter
	onWrite func(*Flush) // called on each flush, under mu
}

func newRecorder() *recorder {
	r := &recorder{}
	r.json.W = &r.text
	return r
}

func (r *recorder) WriteFlush(f *Flush) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushes = append(r.flushes, f)
	if r.onWrite != nil {
		r.onWrite(f)
	}
	return r.json.WriteFlush(f)
}

// totals sums every series over all flushes so far.
type totals struct {
	counters map[string]float64 // key name|tags
	gauges   map[string]float64 // last value
	sets     map[string]int     // distinct, summed over flushes
	samples  map[string]float64 // count summed
	n        map[string]uint64
	sums     map[string]float64
	bad      map[string]float64 // collector bad lines by reason
	relayBad map[string]float64 // relay bad lines by reason (published by the relay)
	metrics  float64
	lost     float64
	flushes  int
}

func seriesKey(s *Series) string { return s.Name + "|" + strings.Join(s.Tags, ",") }

func (r *recorder) totals() totals {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := totals{counters: map[string]float64{}, gauges: map[string]float64{}, sets: map[string]int{}, samples: map[string]float64{},
		n: map[string]uint64{}, sums: map[string]float64{}, bad: map[string]float64{}, relayBad: map[string]float64{}}
	for _, f := range r.flushes {
		t.flushes++
		for i := range f.Series {
			s := &f.Series[i]
			k := seriesKey(s)
			switch {
			case s.Name == selfMetrics:
				t.metrics += s.Count
			case s.Name == selfLost:
				t.lost += s.Count
			case s.Name == selfBadLines:
				t.bad[strings.Join(s.Tags, ",")] += s.Count
			case s.Name == SelfPrefix+"relay.bad_lines":
				t.relayBad[strings.TrimPrefix(strings.Join(s.Tags, ","), "reason:")] += s.Count
			case strings.HasPrefix(s.Name, SelfPrefix):
			case s.Type == TypeCounter:
				t.counters[k] += s.Count
			case s.Type == TypeGauge:
				t.gauges[k] = s.Value
			case s.Type == TypeSet:
				t.sets[k] += s.Distinct
			default:
				t.samples[k] += s.Count
				t.n[k] += s.N
				t.sums[k] += s.Sum
			}
		}
	}
	return t
}

// pipeline is a relay and its collectors on one group, in the lab.
type pipeline struct {
	relay *Relay
	cols  []*Collector
	recs  []*recorder
	imps  []*impair.Conn
}

type pipeOpts struct {
	collectors int
	loss       float64
	flush      time.Duration
	relay      func(*RelayConfig)
	collector  func(*CollectorConfig)
}

func newPipeline(t *testing.T, o pipeOpts) *pipeline {
	t.Helper()
	netlab.Require(t)
	group := newGroup()
	rc := RelayConfig{
		Listen:       netip.MustParseAddrPort("127.0.0.1:0"),
		Retransmit:   netip.MustParseAddrPort("127.0.0.1:0"),
		TickInterval: 10 * time.Millisecond,
		SelfInterval: 50 * time.Millisecond,
		ReadBuffer:   32 << 20,
		Bus:          publisher.Config{Group: group},
	}
	if o.relay != nil {
		o.relay(&rc)
	}
	relay, err := NewRelay(rc)
	require.NoError(t, err)
	p := &pipeline{relay: relay}
	if o.flush == 0 {
		o.flush = 100 * time.Millisecond
	}
	for i := range max(o.collectors, 1) {
		rec := newRecorder()
		bus := subscriber.Config{Group: group, StartSeq: 1, Recovery: subscriber.Recovery{Retransmitter: relay.RetransmitAddr(), NAK: nak.Config{Seed: uint64(i + 1), Deadline: 5 * time.Second}}, Receive: subscriber.Receive{ReadBuffer: 32 << 20}}
		if o.loss > 0 {
			bus.Wrap = impair.Receiver(impair.Config{Loss: o.loss, Seed: 42, Stream: uint64(i), OnlyData: true,
				OnWrap: func(c *impair.Conn) { p.imps = append(p.imps, c) }})
		}
		cc := CollectorConfig{Bus: bus, FlushInterval: o.flush, Backends: []Backend{rec}, StreamTimeout: time.Minute}
		if o.collector != nil {
			o.collector(&cc)
		}
		col, err := NewCollector(cc)
		require.NoError(t, err)
		p.cols = append(p.cols, col)
		p.recs = append(p.recs, rec)
	}
	t.Cleanup(func() { p.close(t) })
	return p
}

// close ends the relay's session (the collectors then close their last
// interval at the end of session) and closes the collectors.
func (p *pipeline) close(t *testing.T) {
	if p.relay != nil {
		require.NoError(t, p.relay.Close())
		p.relay = nil
	}
	for _, c := range p.cols {
		require.NoError(t, c.Close())
	}
	p.cols = nil
}

// finish closes the relay and waits until every collector has seen the
// end of its session, then closes them.
func (p *pipeline) finish(t *testing.T, timeout time.Duration) {
	t.Helper()
	require.NoError(t, p.relay.Close())
	p.relay = nil
	deadline := time.Now().Add(timeout)
	for _, c := range p.cols {
		poll(time.Until(deadline), func() bool { return c.streamCount() == 0 })
	}
	for _, c := range p.cols {
		require.NoError(t, c.Close())
	}
	p.cols = nil
}

// poll is labtest.Poll checking every millisecond; callers that cannot go
// on without cond require it.
func poll(timeout time.Duration, cond func() bool) bool {
	return labtest.Poll(timeout, time.Millisecond, cond)
}

// streamCount is the streams the collector still tracks (zero once every
// session it saw has ended).
func (c *Collector) streamCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.streams)
}

// readAll waits until the relay has read n datagrams in all. A sender
// that calls it every few datagrams is paced by the relay's intake rather
// than by a guessed pause, so the socket buffer never overflows; before
// finish it makes sure every datagram is in (finish's Close then waits
// for the readers to publish them). The 10 s bound is for a loaded CI
// host; a lost datagram shows as a timeout here.
func (p *pipeline) readAll(t *testing.T, n uint64) {
	t.Helper()
	require.True(t, poll(10*time.Second, func() bool { return p.relay.Stats().Datagrams >= n }),
		"the relay read %d of %d datagrams in 10 s", p.relay.Stats().Datagrams, n)
}

// udpSender sends datagrams to the relay.
func udpSender(t *testing.T, to netip.AddrPort) *net.UDPConn {
	t.Helper()
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(to))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}

func fmtMap[M ~map[string]V, V any](m M) string {
	var b strings.Builder
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(&b, "%s=%v ", k, m[k])
	}
	return b.String()
}
