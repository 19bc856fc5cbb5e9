package main

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mdbus/mdbus/tools/counters"
	"github.com/stretchr/testify/require"
)

func TestParseGlobals(t *testing.T) {
	for _, tc := range []struct {
		args, rest []string
		want       globals
	}{
		{[]string{"--group", "x", "--stats", "1s"}, []string{"--group", "x", "--stats", "1s"},
			globals{logFormat: "text", logLevel: "info", counters: true, countersDir: counters.DefaultDir()}},
		{[]string{"--log-format", "json", "sub", "--log-level=debug", "--counters=false", "--metrics", ":9464", "--", "--log-format"},
			[]string{"sub", "--", "--log-format"},
			globals{logFormat: "json", logLevel: "debug", counters: false, countersDir: counters.DefaultDir(), metrics: ":9464"}},
		{[]string{"-counters-dir", "/tmp/x", "-counters"}, nil,
			globals{logFormat: "text", logLevel: "info", counters: true, countersDir: "/tmp/x"}},
	} {
		t.Setenv("MDBUS_COUNTERS_DIR", "")
		g, rest, err := parseGlobals(tc.args)
		require.NoError(t, err, tc.args)
		require.Equal(t, tc.want, g, tc.args)
		require.Equal(t, tc.rest, rest, tc.args)
	}
	for _, bad := range [][]string{{"--metrics"}, {"--counters=maybe"}} {
		_, _, err := parseGlobals(bad)
		require.ErrorIs(t, err, errUsage, bad)
	}
	t.Setenv("MDBUS_COUNTERS_DIR", "/run/x")
	g, _, err := parseGlobals(nil)
	require.NoError(t, err)
	require.Equal(t, "/run/x", g.countersDir)
}

func TestRunRejectsBadGlobals(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 2, run([]string{"mdbus", "--log-format", "xml", "stat", "--once"}, &out, &errb))
	require.Contains(t, errb.String(), "want text or json")
}

func TestStatViewStaleAndLive(t *testing.T) { synctest.Test(t, testStatViewStaleAndLive) }

// testStatViewStaleAndLive runs in a bubble: rates divide by sampling
// times stamped from the bubble's clock.
func testStatViewStaleAndLive(t *testing.T) {
	dir := t.TempDir()
	const every = 20 * time.Millisecond
	start := time.Now() // the bubble's: the file samples every interval from its creation
	f, err := counters.Create(counters.Config{Dir: dir, Role: "sub", Interval: every})
	require.NoError(t, err)
	defer f.Close()
	f.Add(counters.SubMessages, counters.Free, "", "sub").Set(1000)
	f.Add(counters.StreamNextSeq, counters.Free, "", "sub/S1@127.0.0.1:5").Set(1001)
	f.Add(counters.StreamMessages, counters.Free, "", "sub/S1@127.0.0.1:5").Set(1000)
	f.SampleNow()
	sv := newStatViewer(dir, false, true)
	defer sv.close()
	_, procs, err := sv.view()
	require.NoError(t, err)
	require.Len(t, procs, 1)
	require.Equal(t, "live", procs[0].State)
	// A second view after the file's own sampling pass, one interval on:
	// rates appear, and a slot added meanwhile shows too.
	sampled := make(chan struct{})
	var once sync.Once
	f.Sample(func(time.Time) { once.Do(func() { close(sampled) }) })
	f.Add(counters.KindCustom, counters.Gauge, "x", "sub")
	<-sampled // the bubble's clock runs on while the sampler sleeps
	synctest.Wait()
	require.Equal(t, every, time.Since(start), "the pass came one interval after the first view")
	dirs, procs, err := sv.view()
	require.NoError(t, err)
	var b bytes.Buffer
	renderFull(&b, dir, dirs, procs)
	s := b.String()
	require.Contains(t, s, "sub  pid")
	require.Contains(t, s, "subscriber_messages_total 1000 (0/s)")
	require.Regexp(t, `sub/S1@127\.0\.0\.1:5 +1001 +- +1000 `, s)
	require.True(t, strings.Contains(s, "x 0"), s)
}

func TestHuman(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 12.5: "12.5", 12345: "12.3k", 1234567: "1.23M", 4.56e9: "4.56G", -20000: "-20.0k"} {
		require.Equal(t, want, human(v), v)
	}
}

// TestMetricsLoopbackByDefault: --metrics PORT and --metrics :PORT
// listen on 127.0.0.1 only (":PORT" listened on every address); an
// address given explicitly is kept.
func TestMetricsLoopbackByDefault(t *testing.T) {
	for in, want := range map[string]string{"9464": "127.0.0.1:9464", ":9464": "127.0.0.1:9464",
		"0.0.0.0:9464": "0.0.0.0:9464", "[::]:9464": "[::]:9464", "[::1]:9464": "[::1]:9464", "localhost:1": "localhost:1"} {
		require.Equal(t, want, metricsAddr(in), in)
	}
	saved, savedLog := env.globals, env.log
	t.Cleanup(func() { env.globals, env.log = saved, savedLog })
	env.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, m := range []string{":0", "0"} {
		env.globals = globals{counters: false, metrics: m}
		o, err := startOps("test")
		require.NoError(t, err, m)
		got := o.metrics.(*net.TCPAddr)
		o.Close()
		require.True(t, got.IP.IsLoopback(), "--metrics %s listened on %v", m, got)
	}
}
