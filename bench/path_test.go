package bench

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/stretchr/testify/require"
)

// TestPathVeth runs short throughput and latency cases with the sender
// and the receivers in two namespaces of the lab: every message crosses
// the veth pairs and the bridge, and is delivered whole.
func TestPathVeth(t *testing.T) {
	netlab.Require(t)
	cfg := smokeConfig(t, 43200)
	cfg.Path, cfg.PathHosts = PathVeth, labHosts
	cfg.Spawn = func(args []string) *exec.Cmd {
		// As the command's children: killed when the thread that
		// started them ends, which must not be before the run's end.
		cmd := testSpawn(args)
		killWithParent(cmd)
		return cmd
	}
	cfg.Duration, cfg.Count = 10*time.Second, 50_000
	b, err := New(cfg)
	require.NoError(t, err)
	defer b.Close()
	sz, err := ParseSizes("64", 1450)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, c := range []ThroughputCase{
		{System: Mdbus, Sizes: sz, Rate: 500_000},
		{System: RawGSO, Sizes: sz, Rate: 500_000},
		{System: Raw, Sizes: sz, Rate: 100_000},
		{System: Mdbus, Sizes: sz, Rate: 200_000, Processes: true},
	} {
		t.Run(string(c.System), func(t *testing.T) {
			port := b.path.snd.PathHost.(*netlab.Host).Port // the bridge's side of the sender's link
			rx0 := rxPackets(t, port)
			run, err := b.Throughput(ctx, c)
			require.NoError(t, err)
			// GSO trains are cut into datagrams before the bridge: it
			// sees every packet (and a few of the lab's own).
			require.GreaterOrEqual(t, rxPackets(t, port)-rx0, run.Sent.Packets)
			require.True(t, strings.HasSuffix(run.Name, " over veth"), run.Name)
			require.Equal(t, uint64(50_000), run.Sent.Messages)
			require.Len(t, run.Subs, 1)
			require.True(t, run.Subs[0].Complete, "%+v", run.Subs[0])
			require.Equal(t, run.Sent.Messages, run.Subs[0].Messages)
		})
	}
	b.s.Count = 0
	b.s.Duration = 600 * time.Millisecond
	b.s.Warmup = 100 * time.Millisecond
	for _, c := range []LatencyCase{
		{System: Mdbus, Mode: RoundTrip, Sizes: sz, Rate: 2000},
		{System: Raw, Mode: RoundTrip, Sizes: sz, Rate: 2000},
		{System: RawGSO, Mode: OneWay, Sizes: sz, Rate: 2000},
		{System: Mdbus, Mode: PingPong, Sizes: sz},
	} {
		t.Run(string(c.System)+"-"+c.Mode, func(t *testing.T) {
			run, err := b.Latency(ctx, c)
			require.NoError(t, err)
			require.Positive(t, run.Sent)
			require.Zero(t, run.Lost, "%+v", run)
			require.Positive(t, run.Total.P50)
		})
	}
	require.Equal(t, PathVeth, b.Report().Settings.Path)
}

// rxPackets reads the received-packet count of dev in this thread's
// namespace, the lab's, from /proc/thread-self/net/dev (/proc/net is the
// main thread's, which may have entered a host of the lab).
func rxPackets(t *testing.T, dev string) uint64 {
	t.Helper()
	runtime.LockOSThread()
	b, err := os.ReadFile("/proc/thread-self/net/dev")
	runtime.UnlockOSThread()
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(l, ":")
		if !ok || strings.TrimSpace(name) != dev {
			continue
		}
		f := strings.Fields(rest)
		require.GreaterOrEqual(t, len(f), 2)
		n, err := strconv.ParseUint(f[1], 10, 64)
		require.NoError(t, err)
		return n
	}
	t.Fatalf("no device %s in /proc/net/dev", dev)
	return 0
}

// labHosts makes the hosts of the veth path in the lab, as mdbus bench
// does.
func labHosts() (PathHost, PathHost, error) {
	s, r, err := netlab.NICPair("bsnd", "brcv")
	if err != nil {
		return nil, nil, err
	}
	return s, r, nil
}

// TestPathConfig: an unknown path, or the veth path without its hosts,
// is a config error.
func TestPathConfig(t *testing.T) {
	netlab.Require(t)
	_, err := New(Config{Path: "wifi"})
	require.ErrorIs(t, err, ErrConfig)
	_, err = New(Config{Path: PathVeth})
	require.ErrorIs(t, err, ErrConfig)
}
