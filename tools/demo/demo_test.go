package demo_test

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mdbus/mdbus/internal/labtest"
	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/tools/counters"
	"github.com/mdbus/mdbus/tools/demo"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// TestOutputFits80Columns runs a short lossy demo: every line fits an
// 80-column terminal, each interval has one line per role with one-way
// latency percentiles per subscriber, and the counters of every role are
// in the file.
func TestOutputFits80Columns(t *testing.T) {
	netlab.Require(t)
	f, err := counters.Create(counters.Config{Off: true, Role: "demo", Interval: -1})
	require.NoError(t, err)
	defer f.Close()
	var out bytes.Buffer
	sum, err := demo.Run(context.Background(), demo.Config{
		Group: netip.MustParseAddrPort("239.192.80.1:31801"), Subscribers: 2, Duration: 2500 * time.Millisecond,
		Rate: 20000, Loss: 0.01, Out: &out, Counters: f,
	})
	require.NoError(t, err)
	require.True(t, sum.Complete(), out.String())
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	intervals := 0
	for i, l := range lines {
		require.LessOrEqual(t, utf8.RuneCountInString(l), 80, "line %d: %q", i+1, l)
		if strings.HasPrefix(l, "t=") {
			intervals++
			require.Contains(t, l, " pub ")
			require.Contains(t, lines[i+1], "rewind")
			require.Contains(t, lines[i+2], "refused: ", "the rewinder's held, coalesced and refused requests")
			for j, name := range []string{"sub1", "sub2"} {
				require.Contains(t, lines[i+3+j], name)
				require.Regexp(t, `p50 \S+ p99 \S+ p99\.9 \S+ max \S+`, lines[i+3+j])
			}
		}
	}
	require.GreaterOrEqual(t, intervals, 2)
	require.NotContains(t, lines[1], "linger", "no linger by default")
	require.Equal(t, runtime.GOMAXPROCS(0), sum.Procs)
	require.Positive(t, sum.CPU, "getrusage on Linux")
	require.Contains(t, out.String(), fmt.Sprintf("of %d cores", sum.Procs))
	require.Regexp(t, `(?m)^t=.* cpu +\d+%/\d+$`, out.String())
	require.Equal(t, sum.Saturated(), strings.Contains(out.String(), "the cores were full"))
	for _, r := range sum.Subscribers {
		if r.Recovered > 0 { // 1% loss over 50,000 messages: some were repaired
			require.Positive(t, r.RecoveryP50, r.Name)
			require.Regexp(t, `recovery p50 \S+; NAK after \S+, repair \S+ after that`, out.String())
		}
	}
	for _, r := range sum.Subscribers {
		require.Equal(t, uint64(sum.Sent), r.Latency.Count, r.Name)
		require.Positive(t, r.Latency.P50)
	}
	f.SampleNow()
	owners := map[string]bool{}
	for _, v := range f.Snapshot().Values {
		owners[strings.SplitN(v.Owner, "/", 2)[0]] = true
	}
	require.Equal(t, map[string]bool{"pub": true, "rewind": true, "rewind-feed": true, "sub1": true, "sub2": true}, owners)
}

// TestLinger: with Config.Linger the publisher's packets wait to fill, so
// that a packet carries many messages where the default sends one or two,
// and the stream still arrives whole through loss; the header says so.
func TestLinger(t *testing.T) {
	netlab.Require(t)
	var out bytes.Buffer
	sum, err := demo.Run(context.Background(), demo.Config{
		Group: netip.MustParseAddrPort("239.192.80.2:31802"), Subscribers: 1, Duration: time.Second,
		Rate: 50000, Loss: 0.01, Linger: time.Millisecond, Out: &out,
	})
	require.NoError(t, err)
	require.True(t, sum.Complete(), out.String())
	// 50 messages fall due per millisecond of linger; a packet fills at
	// about 40 of these ITCH-shaped messages.
	require.GreaterOrEqual(t, float64(sum.Sent)/float64(sum.Packets), 8.0, out.String())
	require.Contains(t, out.String(), "packets linger up to 1ms")
	require.NotContains(t, out.String(), "--linger 50us", "the hint is for a run without linger")
}

// TestSaturated: the share is CPU over wall time and processors; from 85%
// the demo says its latencies include waiting for a CPU.
func TestSaturated(t *testing.T) {
	s := demo.Summary{Elapsed: 5 * time.Second, Procs: 2, CPU: 9 * time.Second}
	require.InDelta(t, 0.9, s.CPUShare(), 1e-9)
	require.True(t, s.Saturated())
	s.CPU = 8 * time.Second
	require.False(t, s.Saturated())
	require.Zero(t, demo.Summary{CPU: time.Second}.CPUShare(), "no elapsed time or processors: unknown")
	require.False(t, demo.Summary{}.Saturated())
}
