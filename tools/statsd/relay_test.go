package statsd

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/stretchr/testify/require"
)

// TestRelayAllocs pins the relay's hot path: a datagram of valid lines
// parsed, checked and copied into a bus message, published, allocates
// nothing.
func TestRelayAllocs(t *testing.T) {
	netlab.Require(t)
	r, err := NewRelay(RelayConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"), SelfInterval: -1, EndGrace: time.Millisecond,
		Bus: publisher.Config{Group: newGroup()}})
	require.NoError(t, err)
	defer r.Close()
	lr := r.newLineReader()
	for range 100 { // warm up the publisher's ring
		lr.datagram(allocLines, false)
		lr.flushAgg(false)
	}
	n := testing.AllocsPerRun(2000, func() {
		lr.datagram(allocLines, false)
		lr.flushAgg(false)
	})
	require.Zero(t, n, "allocations per datagram on the relay's hot path")
}

func BenchmarkRelayDatagram(b *testing.B) {
	netlab.Require(b)
	r, err := NewRelay(RelayConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"), SelfInterval: -1, EndGrace: time.Millisecond,
		Bus: publisher.Config{Group: newGroup()}})
	require.NoError(b, err)
	defer r.Close()
	lr := r.newLineReader()
	lines := strings.Count(string(allocLines), "\n")
	b.ReportAllocs()
	b.SetBytes(int64(len(allocLines)))
	for b.Loop() {
		lr.datagram(allocLines, false)
		lr.flushAgg(false)
	}
	b.ReportMetric(float64(b.N*lines)/b.Elapsed().Seconds(), "metrics/s")
}

// TestRelayUnixIPv6PreAggregate: the relay listens on IPv6 loopback and a
// Unix datagram socket, pre-aggregates counters and gauges, and a
// collector sees the same totals as without pre-aggregation.
func TestRelayUnixIPv6PreAggregate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "statsd.sock")
	p := newPipeline(t, pipeOpts{flush: oneInterval, relay: func(c *RelayConfig) {
		c.Listen = netip.MustParseAddrPort("[::1]:0")
		c.Unix = path
		c.PreAggregate = 20 * time.Millisecond
	}})
	require.True(t, p.relay.Addr().Addr().Is6())
	udp := udpSender(t, p.relay.Addr())
	ux, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	require.NoError(t, err)
	defer ux.Close()
	for i := range 500 {
		d := []byte("pa.c:2|c|@0.5|#a:b\npa.g:+1|g\npa.t:5|ms\npa.neg:3|g\npa.neg:-5|g\n")
		if i%2 == 0 {
			_, err = udp.Write(d)
		} else {
			_, err = ux.Write(d)
		}
		require.NoError(t, err)
		if i%50 == 0 {
			p.readAll(t, uint64(i+1))
		}
	}
	p.readAll(t, 500)
	r := p.relay
	p.finish(t, 10*time.Second)
	rs := r.Stats()
	tot := p.recs[0].totals()
	require.Equal(t, uint64(500*5), rs.Metrics)
	require.Equal(t, float64(2000), tot.counters["pa.c|a:b"])
	require.Equal(t, float64(500), tot.gauges["pa.g|"])
	require.Equal(t, float64(-2), tot.gauges["pa.neg|"])
	require.Equal(t, float64(500), tot.samples["pa.t|"])
	// Pre-aggregation cut the counter and gauge lines: fewer metric lines
	// reached the collector than the relay accepted.
	require.Less(t, tot.metrics, float64(rs.Metrics))
	t.Logf("relay accepted %d metrics, the collector received %v lines after pre-aggregation", rs.Metrics, tot.metrics)
}

// TestClient publishes through the Go client, without the UDP hop.
func TestClient(t *testing.T) {
	netlab.Require(t)
	group := newGroup()
	cl, err := NewClient(ClientConfig{Bus: publisher.Config{Group: group}, Retransmit: netip.MustParseAddrPort("127.0.0.1:0"),
		TickInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	rec := newRecorder()
	col, err := NewCollector(CollectorConfig{Bus: subscriber.Config{Group: group, StartSeq: 1, Recovery: subscriber.Recovery{Retransmitter: cl.RetransmitAddr()}},
		FlushInterval: oneInterval, Backends: []Backend{rec}})
	require.NoError(t, err)
	for i := range 1000 {
		require.NoError(t, cl.Count("cl.c", 1, "k:v"))
		require.NoError(t, cl.Gauge("cl.g", float64(i)))
		require.NoError(t, cl.GaugeDelta("cl.d", -1))
		require.NoError(t, cl.Timing("cl.t", float64(i)))
		require.NoError(t, cl.Histogram("cl.h", 1))
		require.NoError(t, cl.Distribution("cl.x", 2))
		require.NoError(t, cl.Set("cl.s", "m"+string(rune('a'+i%26))))
	}
	require.ErrorIs(t, cl.Line([]byte("bad\ncl.c:1|c\n")), ErrBadLine)
	require.NoError(t, cl.Gauge("cl.neg", -4))
	require.NoError(t, cl.Close())
	poll(10*time.Second, func() bool { return col.streamCount() == 0 })
	require.NoError(t, col.Close())
	tot := rec.totals()
	require.Equal(t, float64(1000), tot.counters["cl.c|k:v"])
	require.Equal(t, float64(1), tot.counters["cl.c|"])
	require.Equal(t, float64(999), tot.gauges["cl.g|"])
	require.Equal(t, float64(-1000), tot.gauges["cl.d|"])
	require.Equal(t, float64(-4), tot.gauges["cl.neg|"])
	require.Equal(t, float64(1000), tot.samples["cl.t|"])
	require.Equal(t, 26, tot.sets["cl.s|"])
}

// TestRelayLongLines: a valid line as long as a bus message can carry is
// delivered (alone in its message); a longer one is refused and counted,
// never lost silently.
func TestRelayLongLines(t *testing.T) {
	p := newPipeline(t, pipeOpts{flush: oneInterval})
	tags := func(n, size int) string {
		var b []string
		for i := range n {
			b = append(b, fmt.Sprintf("k%02d:%s", i, strings.Repeat("v", size-4)))
		}
		return strings.Join(b, ",")
	}
	fits := "long.ok." + strings.Repeat("x", 462) + ":1|c|#" + tags(45, 20)    // 1,420 bytes
	tooLong := "long.no." + strings.Repeat("x", 500) + ":1|c|#" + tags(48, 20) // 1,522 bytes
	require.Less(t, len(fits), p.relay.cfg.Limits.MaxLineLen)
	require.Greater(t, len(tooLong), p.relay.cfg.Limits.MaxLineLen)
	conn := udpSender(t, p.relay.Addr())
	for range 10 {
		_, err := conn.Write([]byte("short:1|c\n" + fits + "\n" + tooLong + "\nshort:1|c\n"))
		require.NoError(t, err)
	}
	p.readAll(t, 10)
	r := p.relay
	p.finish(t, 10*time.Second)
	rs := r.Stats()
	tot := p.recs[0].totals()
	require.Equal(t, uint64(10), rs.Bad[ReasonLineTooLong])
	require.Equal(t, float64(20), tot.counters["short|"])
	var n float64
	for k, v := range tot.counters {
		if strings.HasPrefix(k, "long.ok.") {
			n += v
		}
	}
	require.Equal(t, float64(10), n, "relay %+v, collector bad %v, metrics %v", rs, tot.bad, tot.metrics)
}

// TestRelayPortTaken: with the StatsD port, the retransmit port or the
// Unix socket already held by another process (a StatsD agent, a second
// relay), NewRelay and NewClient return a *ListenError naming the
// address, wrapping EADDRINUSE, and leave nothing open: no panic, no
// stolen socket file.
func TestRelayPortTaken(t *testing.T) {
	netlab.Require(t)
	held, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	require.NoError(t, err)
	defer held.Close()
	taken := held.LocalAddr().(*net.UDPAddr).AddrPort()
	any := netip.MustParseAddrPort("127.0.0.1:0")
	sockPath := filepath.Join(t.TempDir(), "statsd.sock")
	heldUnix, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sockPath, Net: "unixgram"})
	require.NoError(t, err)
	defer heldUnix.Close()

	for _, tc := range []struct {
		what string
		addr string
		cfg  RelayConfig
	}{
		{"udp", taken.String(), RelayConfig{Listen: taken, Retransmit: any}},
		{"retransmit", taken.String(), RelayConfig{Listen: any, Retransmit: taken}},
		{"unix", sockPath, RelayConfig{Listen: any, Unix: sockPath}},
		{"unix", sockPath, RelayConfig{NoUDP: true, Unix: sockPath}},
	} {
		tc.cfg.Bus = publisher.Config{Group: newGroup()}
		tc.cfg.EndGrace = time.Millisecond
		r, err := NewRelay(tc.cfg)
		if r != nil {
			r.Close()
		}
		require.Error(t, err, tc.what)
		require.ErrorIs(t, err, syscall.EADDRINUSE, tc.what)
		var le *ListenError
		require.ErrorAs(t, err, &le)
		require.Equal(t, tc.what, le.What)
		require.Equal(t, tc.addr, le.Addr)
		require.Contains(t, err.Error(), tc.addr)
		require.Contains(t, err.Error(), "already in use")
	}
	// A file that is not a socket is left alone.
	plain := filepath.Join(t.TempDir(), "not-a-socket")
	require.NoError(t, os.WriteFile(plain, []byte("data"), 0o600))
	_, err = NewRelay(RelayConfig{NoUDP: true, Unix: plain, Bus: publisher.Config{Group: newGroup()}})
	require.ErrorIs(t, err, errNotSocket)
	require.Contains(t, err.Error(), plain)
	data, err := os.ReadFile(plain)
	require.NoError(t, err)
	require.Equal(t, "data", string(data))

	// The held Unix socket still works: it was not removed or replaced.
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: sockPath, Net: "unixgram"})
	require.NoError(t, err)
	_, err = c.Write([]byte("x:1|c"))
	require.NoError(t, err)
	c.Close()
	heldUnix.SetReadDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 64)
	n, err := heldUnix.Read(buf)
	require.NoError(t, err)
	require.Equal(t, "x:1|c", string(buf[:n]))

	// The relay's addresses are free again after each failure: one
	// opened with all of them works.
	held.Close()
	heldUnix.Close()
	r, err := NewRelay(RelayConfig{Listen: taken, Unix: sockPath, Retransmit: any, EndGrace: time.Millisecond,
		Bus: publisher.Config{Group: newGroup()}})
	require.NoError(t, err)
	require.NoError(t, r.Close())

	// The client's retransmit port.
	held2, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(any))
	require.NoError(t, err)
	defer held2.Close()
	_, err = NewClient(ClientConfig{Bus: publisher.Config{Group: newGroup()}, Retransmit: held2.LocalAddr().(*net.UDPAddr).AddrPort()})
	require.ErrorIs(t, err, syscall.EADDRINUSE)
	var le *ListenError
	require.ErrorAs(t, err, &le)
	require.Equal(t, "retransmit", le.What)
}

// TestRelayRefusesReservedNames: a client cannot forge or cancel the
// relay's own counters: names under SelfPrefix are refused and counted,
// as are pre-aggregated sums that would overflow.
func TestRelayRefusesReservedNames(t *testing.T) {
	netlab.Require(t)
	r, err := NewRelay(RelayConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"), SelfInterval: -1, EndGrace: time.Millisecond,
		PreAggregate: time.Hour, Bus: publisher.Config{Group: newGroup()}})
	require.NoError(t, err)
	defer r.Close()
	lr := r.newLineReader()
	lr.datagram([]byte(SelfPrefix+"relay.kernel_drops:-5|c\n"+SelfPrefix+"x:1|g\nok:1e308|c\nok:1e308|c\nok:1|c\n"), false)
	st := r.Stats()
	require.Equal(t, uint64(2), st.Bad[ReasonReservedName])
	require.Equal(t, uint64(1), st.Bad[ReasonNaNInf])
	require.Equal(t, uint64(2), st.Metrics)

	cl, err := NewClient(ClientConfig{Bus: publisher.Config{Group: newGroup()}})
	require.NoError(t, err)
	defer cl.Close()
	require.ErrorIs(t, cl.Count(SelfPrefix+"relay.datagrams", 1), ErrBadLine)
}
