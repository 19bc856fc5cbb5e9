package statsd

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/stretchr/testify/require"
)

func sampleFlush() *Flush {
	return &Flush{Start: t0, Interval: 10 * time.Second, Percentiles: []float64{50, 99.9}, Series: []Series{
		{Name: "api.req", Type: TypeCounter, Tags: []string{"env:prod", "canary"}, Count: 30, Rate: 3},
		{Name: "api.lat", Type: TypeTimer, Count: 4, Rate: 0.4, N: 4, Sum: 100, Mean: 25, Min: 10, Max: 40, Values: []float64{20, 40}},
		{Name: "api.size", Type: TypeHistogram, Tags: []string{"quantile:x"}, Count: 1, N: 1, Sum: 5, Mean: 5, Min: 5, Max: 5, Values: []float64{5, 5}},
		{Name: "mem", Type: TypeGauge, Value: -3.5},
		{Name: "users", Type: TypeSet, Distinct: 7},
		{Name: "users", Type: TypeCounter, Count: 1}, // same name, other type
	}}
}

func TestGraphiteWriter(t *testing.T) {
	var b strings.Builder
	require.NoError(t, (&GraphiteWriter{W: &b}).WriteFlush(sampleFlush()))
	want := `stats.counters.api.req.count;env=prod;tag=canary 30 1700000010
stats.counters.api.req.rate;env=prod;tag=canary 3 1700000010
stats.timers.api.lat.count 4 1700000010
stats.timers.api.lat.count_ps 0.4 1700000010
stats.timers.api.lat.sum 100 1700000010
stats.timers.api.lat.mean 25 1700000010
stats.timers.api.lat.lower 10 1700000010
stats.timers.api.lat.upper 40 1700000010
stats.timers.api.lat.upper_50 20 1700000010
stats.timers.api.lat.upper_99_9 40 1700000010
`
	require.True(t, strings.HasPrefix(b.String(), want), b.String())
	require.Contains(t, b.String(), "stats.gauges.mem -3.5 1700000010\n")
	require.Contains(t, b.String(), "stats.sets.users.count 7 1700000010\n")
}

// TestPrometheusText renders a flush and checks it with promtool when
// installed (Debian package prometheus).
func TestPrometheusText(t *testing.T) {
	p := NewPrometheus()
	require.NoError(t, p.WriteFlush(sampleFlush()))
	require.NoError(t, p.WriteFlush(sampleFlush()))
	srv := httptest.NewUnstartedServer(p)
	rec := httptest.NewRecorder()
	srv.Config.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	text := rec.Body.String()
	require.Contains(t, text, "# TYPE api_req_total counter\napi_req_total{env=\"prod\"} 60\n")
	require.Contains(t, text, `api_lat{quantile="0.5"} 0.02`)
	require.Contains(t, text, "api_lat_count 8\n")
	require.Contains(t, text, `api_size{tagquantile="x",quantile="0.999"} 5`)
	require.Contains(t, text, "mem -3.5\n")
	require.Contains(t, text, "users 7\n")
	require.Contains(t, text, "users_total 2\n", "a counter and a set named alike get distinct families")
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Log("promtool not installed: format not linted")
		return
	}
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool: %s\n%s", out, text)
}

// TestGraphiteTCP sends flushes to a carbon-like TCP listener, across a
// reconnect.
func TestGraphiteTCP(t *testing.T) {
	netlab.Require(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	got := make(chan string, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			got <- line
			c.Close()
		}
	}()
	w := &TCPWriter{Addr: ln.Addr().String(), Timeout: time.Second}
	defer w.Close()
	g := &GraphiteWriter{W: w}
	require.NoError(t, g.WriteFlush(sampleFlush()))
	require.Equal(t, "stats.counters.api.req.count;env=prod;tag=canary 30 1700000010\n", <-got)
	// The listener closed that connection. A write into it may still
	// succeed (TCP reports the peer's close on a later write, as for
	// every plaintext Graphite client); the writer then reconnects.
	// The first write may still succeed and be lost, the next one fails
	// and the one after goes through a new connection: each try waits at
	// most 200 ms for the line.
	for try := 0; ; try++ {
		require.Less(t, try, 10, "the writer never reconnected")
		g.WriteFlush(sampleFlush())
		select {
		case l := <-got:
			require.True(t, strings.HasPrefix(l, "stats.counters.api.req.count"))
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestRelayLogsRateLimited: a flood of bad lines is logged once per
// LogEvery, and counted in full.
func TestRelayLogsRateLimited(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf}, nil))
	p := newPipeline(t, pipeOpts{relay: func(c *RelayConfig) { c.Logger = log; c.LogEvery = time.Hour }})
	conn := udpSender(t, p.relay.Addr())
	for range 1000 {
		_, err := conn.Write([]byte("bad\n:1|c\n"))
		require.NoError(t, err)
	}
	p.readAll(t, 1000)
	r := p.relay
	p.close(t)
	st := r.Stats()
	require.Equal(t, uint64(2000), st.BadTotal)
	require.Equal(t, uint64(1000), st.Bad[ReasonNoValue])
	require.Equal(t, uint64(1000), st.Bad[ReasonEmptyName])
	require.Equal(t, 1, strings.Count(buf.String(), "refused line"), buf.String())
}

// lockedWriter is written by the relay's logger, which writes under the
// relay's log lock; the test reads it after Close.
type lockedWriter struct{ w io.Writer }

func (l *lockedWriter) Write(p []byte) (int, error) { return l.w.Write(p) }
