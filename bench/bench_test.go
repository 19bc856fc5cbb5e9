package bench

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/labtest"
	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/stretchr/testify/require"
)

// childEnv makes the test binary act as a separate-process subscriber.
const childEnv = "MDBUS_BENCH_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		if err := ChildMain(context.Background(), os.Args[1:], os.Stdin, os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	labtest.Main(m)
}

func testSpawn(args []string) *exec.Cmd {
	exe, _ := os.Executable()
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	return cmd
}

// smokeConfig is a tiny run: a half-second per case, short warm-up.
func smokeConfig(t *testing.T, port uint16) Config {
	t.Helper()
	return Config{
		Command:  "test",
		Duration: 500 * time.Millisecond,
		Warmup:   100 * time.Millisecond,
		Drain:    time.Second,
		Interval: 100 * time.Millisecond,
		Spawn:    testSpawn,
		Group:    netip.AddrPortFrom(DefaultGroup.Addr(), port),
	}
}

func TestConfigErrors(t *testing.T) {
	netlab.Require(t)
	for _, tc := range []struct {
		name string
		cfg  Config
		want error
	}{
		{"negative duration", Config{Duration: -time.Second}, ErrConfig},
		{"duration above the limit", Config{Duration: 2 * MaxDuration}, ErrConfig},
		{"negative count", Config{Count: -1}, ErrConfig},
		{"payload size too small", Config{PayloadSize: 10}, ErrConfig},
		{"payload size too large", Config{PayloadSize: 70000}, ErrConfig},
		{"negative batch", Config{Batch: -1}, ErrConfig},
		{"negative buffer", Config{ReadBuffer: -1}, ErrConfig},
		{"warm-up longer than the run", Config{Duration: time.Second, Warmup: 2 * time.Second}, ErrConfig},
		{"tiny interval", Config{Interval: time.Millisecond}, ErrConfig},
		{"unicast group", Config{Group: netip.MustParseAddrPort("10.0.0.1:41000")}, ErrConfig},
		{"no such interface", Config{Interface: "nonexistent0"}, ErrConfig},
		{"veth without permission", Config{Interface: netlab.VethA}, ErrNotLoopback},
		{"TTL without permission", Config{TTL: 1}, ErrNotLoopback},
		{"TTL out of range", Config{TTL: 300, AllowNetwork: true}, ErrConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			require.ErrorIs(t, err, tc.want)
		})
	}
}

func TestCaseErrors(t *testing.T) {
	netlab.Require(t)
	b, err := New(smokeConfig(t, 42000))
	require.NoError(t, err)
	defer b.Close()
	sz64, err := ParseSizes("64", 1450)
	require.NoError(t, err)
	big := Sizes{Spec: "9000", Min: 9000, Max: 9000}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		c    ThroughputCase
	}{
		{"negative rate", ThroughputCase{System: Mdbus, Sizes: sz64, Rate: -1}},
		{"unknown system", ThroughputCase{System: "carrier-pigeon", Sizes: sz64}},
		{"too many subscribers", ThroughputCase{System: Mdbus, Sizes: sz64, Subscribers: 1000}},
		{"message above the payload", ThroughputCase{System: Mdbus, Sizes: big}},
		{"loss on raw", ThroughputCase{System: Raw, Sizes: sz64, Loss: 0.01}},
		{"loss above half", ThroughputCase{System: Mdbus, Sizes: sz64, Loss: 0.9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.Throughput(ctx, tc.c)
			require.ErrorIs(t, err, ErrConfig)
		})
	}
	_, err = b.Latency(ctx, LatencyCase{System: Mdbus, Mode: "sideways"})
	require.ErrorIs(t, err, ErrConfig)
	_, err = b.Latency(ctx, LatencyCase{System: Mdbus, Mode: RoundTrip, Subscribers: 2})
	require.ErrorIs(t, err, ErrConfig)
	require.Empty(t, b.Report().Throughput, "nothing ran")
}

func TestSmokeThroughput(t *testing.T) {
	netlab.Require(t)
	b, err := New(smokeConfig(t, 42100))
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()
	for _, spec := range []string{"64", "itch"} {
		sz, err := ParseSizes(spec, 1450)
		require.NoError(t, err)
		for _, sys := range []System{Mdbus, Raw} {
			t.Run(string(sys)+"-"+spec, func(t *testing.T) {
				run, err := b.Throughput(ctx, ThroughputCase{System: sys, Sizes: sz, Rate: 100_000, Subscribers: 2})
				require.NoError(t, err)
				require.Len(t, run.Subs, 2)
				require.Greater(t, run.Sent.Messages, uint64(10_000))
				for _, s := range run.Subs {
					require.Greater(t, s.Messages, uint64(0), s.Name)
					require.Greater(t, s.Packets, uint64(0))
					require.Zero(t, s.Disorder)
					if sys == Raw {
						require.InDelta(t, 1.0, s.MsgsPerPacket, 1e-9, "raw: one datagram per message")
					}
				}
				if sys == Mdbus {
					require.True(t, run.Complete, "%+v", run.Subs)
					require.Greater(t, run.Sent.MsgsPerPacket, 1.0)
				}
				require.NotNil(t, run.Latency)
			})
		}
	}
	rep := b.Finish(false)
	require.NotEmpty(t, rep.Ratios)
}

func TestSmokeProcesses(t *testing.T) {
	netlab.Require(t)
	b, err := New(smokeConfig(t, 42200))
	require.NoError(t, err)
	defer b.Close()
	sz, err := ParseSizes("64", 1450)
	require.NoError(t, err)
	run, err := b.Throughput(context.Background(), ThroughputCase{System: Mdbus, Sizes: sz, Rate: 50_000, Subscribers: 2, Processes: true})
	require.NoError(t, err)
	require.Len(t, run.Subs, 2)
	for _, s := range run.Subs {
		require.True(t, s.Complete, "%+v", s)
		require.Equal(t, run.Sent.Messages, s.Messages)
		require.Equal(t, 1, s.Procs, "a subscriber process runs on one Go processor by default, as mdbus sub does")
	}
	require.NotNil(t, run.Latency, "children hand their histograms back")
	require.Greater(t, run.Latency.Count, int64(0))
	lat, err := b.Latency(context.Background(), LatencyCase{System: Mdbus, Mode: OneWay, Sizes: sz, Rate: 2000, Subscribers: 2, Processes: true})
	require.NoError(t, err)
	require.Equal(t, 2*lat.Sent, lat.Received, "children and sender agree on the warm-up")
	require.Equal(t, int64(lat.Received), lat.Total.Count)
}

func TestSmokeLatency(t *testing.T) {
	netlab.Require(t)
	cfg := smokeConfig(t, 42300)
	cfg.Timestamps = true
	b, err := New(cfg)
	require.NoError(t, err)
	defer b.Close()
	sz, err := ParseSizes("64", 1450)
	require.NoError(t, err)
	for _, mode := range []string{RoundTrip, OneWay} {
		for _, sys := range []System{Mdbus, Raw} {
			t.Run(string(sys)+"-"+mode, func(t *testing.T) {
				run, err := b.Latency(context.Background(), LatencyCase{System: sys, Mode: mode, Sizes: sz, Rate: 2000})
				require.NoError(t, err)
				// 400 ms after the warm-up at 2k/s.
				require.InDelta(t, 800, float64(run.Sent), 80)
				require.Equal(t, run.Sent, run.Received+run.Lost)
				require.Greater(t, run.Total.Count, int64(700))
				require.Positive(t, run.Total.P50)
				require.LessOrEqual(t, run.Total.P50, run.Total.P999)
				require.NotEmpty(t, run.Spectrum)
				if sys == Raw {
					require.NotNil(t, run.Wire, "kernel timestamps split raw latency")
				}
			})
		}
	}
	dir := t.TempDir()
	b.Finish(false)
	files, err := b.WriteFiles(dir, "t")
	require.NoError(t, err)
	var hgrm, svg, js, hlog int
	for _, f := range files {
		switch filepath.Ext(f) {
		case ".hgrm":
			hgrm++
		case ".svg":
			svg++
		case ".json":
			js++
		case ".hlog":
			hlog++
		}
	}
	require.GreaterOrEqual(t, hgrm, 4)
	require.Equal(t, []int{1, 1, 1}, []int{svg, js, hlog})
	series, err := LoadChartSeries(filepath.Join(dir, "t.json"))
	require.NoError(t, err)
	require.Len(t, series, 4)
	series, err = LoadChartSeries(filepath.Join(dir, "t-raw-rtt-64B-2k.hgrm"))
	require.NoError(t, err)
	require.Len(t, series, 1)
}

func TestSmokeLoss(t *testing.T) {
	netlab.Require(t)
	b, err := New(smokeConfig(t, 42400))
	require.NoError(t, err)
	defer b.Close()
	sz, err := ParseSizes("64", 1450)
	require.NoError(t, err)
	run, err := b.Throughput(context.Background(), ThroughputCase{System: Mdbus, Sizes: sz, Rate: 50_000, Loss: 0.05, Subscribers: 2})
	require.NoError(t, err)
	for _, s := range run.Subs {
		require.Positive(t, s.Gaps, "5%% loss makes gaps")
		require.Positive(t, s.Repairs, "the retransmitter repairs them")
		require.Zero(t, s.Lost)
		require.True(t, s.Complete, "%+v", s)
	}
	require.NotNil(t, run.Recovery, "recovery time measured")
	require.Positive(t, run.Recovery.P99)
	lat, err := b.Latency(context.Background(), LatencyCase{System: Mdbus, Mode: RoundTrip, Sizes: sz, Rate: 2000, Loss: 0.05})
	require.NoError(t, err)
	require.Zero(t, lat.Lost)
	require.NotNil(t, lat.Recovery)
}

func TestInterruptedRunReports(t *testing.T) {
	netlab.Require(t)
	cfg := smokeConfig(t, 42500)
	cfg.Duration = 30 * time.Second
	b, err := New(cfg)
	require.NoError(t, err)
	defer b.Close()
	sz, err := ParseSizes("64", 1450)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	run, err := b.Throughput(ctx, ThroughputCase{System: Mdbus, Sizes: sz, Rate: 100_000})
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, time.Since(start), 5*time.Second, "an interrupted run stops")
	require.True(t, run.Interrupted)
	require.Positive(t, run.Sent.Messages)
	require.True(t, run.Complete, "what was sent before the interrupt was delivered")
	rep := b.Finish(true)
	require.True(t, rep.Interrupted)
	require.Len(t, rep.Throughput, 1)
	_, err = b.Throughput(context.Background(), ThroughputCase{System: Mdbus, Sizes: sz})
	require.ErrorIs(t, err, ErrClosed, "a finished Bench runs nothing more")
	require.NoError(t, b.Close())
	require.ErrorIs(t, b.Close(), ErrClosed)
}

func TestChildNeedsSpec(t *testing.T) {
	err := ChildMain(context.Background(), nil, strings.NewReader(""), os.Stdout)
	require.ErrorIs(t, err, ErrConfig)
	err = ChildMain(context.Background(), []string{"-spec", "{"}, strings.NewReader(""), os.Stdout)
	require.True(t, errors.Is(err, ErrConfig))
}
