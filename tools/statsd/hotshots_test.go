package statsd

import (
	"context"
	"math"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/internal/race"
)

// envInt reads a size from the environment, else def (short under
// -short or -race).
func envInt(name string, def, short int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	if testing.Short() || race.Enabled {
		return short
	}
	return def
}

// oneInterval is a flush interval no test run straddles in practice
// (intervals are aligned to the Unix epoch): every metric of a run lands
// in one flush, so per-interval aggregates (set sizes, percentiles) can
// be checked against the whole run.
const oneInterval = 10000 * time.Hour

// TestHotShots is acceptance 1: the npm client hot-shots sends 1,000,000
// metrics of seven kinds through the relay while the collector's socket
// loses 5% of bus datagrams; counters, gauges, set sizes and sample counts
// must equal what was sent, and percentiles the exact sort within the
// histogram's precision. The client -> relay hop must be lossless, which
// the relay's kernel drop counter (SO_RXQ_OVFL) proves.
func TestHotShots(t *testing.T) {
	modules := requireNode(t)
	n := envInt("STATSD_HOTSHOTS_N", 1_000_000, 70_000)
	burst := envInt("STATSD_HOTSHOTS_BURST", 400, 400)
	p := newPipeline(t, pipeOpts{loss: 0.05, flush: oneInterval,
		relay: func(c *RelayConfig) { c.EndGrace = time.Second },
		collector: func(c *CollectorConfig) {
			c.MaxSetMembers = 1 << 21
			c.HistDigits = 3
		}})
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := nodeCmd(ctx, modules, "hotshots_send.js", "127.0.0.1", strconv.Itoa(int(p.relay.Addr().Port())), strconv.Itoa(n), strconv.Itoa(burst))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "node: %s", out)
	sendTime := time.Since(start)
	// Let the relay drain its socket before ending the session.
	poll(2*time.Second, func() bool { rs := p.relay.Stats(); return rs.Metrics+rs.BadTotal >= uint64(n) })
	r := p.relay
	p.finish(t, 30*time.Second)
	rs := r.Stats()
	total := time.Since(start)

	// What hot-shots was asked to send.
	counters := map[string]float64{}
	var gauge, gdelta float64
	var timers, hists, dists []float64
	sets := 0
	for i := range n {
		switch i % 7 {
		case 0:
			counters["hs.counter|env:test,k:"+strconv.Itoa(i%3)] += float64(1 + i%5)
		case 1:
			gauge = float64(i % 1000)
		case 2:
			if i%2 == 1 {
				gdelta += 2
			} else {
				gdelta--
			}
		case 3:
			timers = append(timers, 0.1+float64((i*7919)%100000)/100)
		case 4:
			hists = append(hists, float64((i*31)%5000))
		case 5:
			dists = append(dists, 1+float64((i*17)%20000)/10)
		case 6:
			sets++
		}
	}
	tot := p.recs[0].totals()
	imp := p.imps[0].Stats()
	t.Logf("hot-shots sent %d metrics in %v (%.0f/s); end to end %v; relay %+v; bus impairment dropped %d of %d datagrams",
		n, sendTime, float64(n)/sendTime.Seconds(), total, rs, imp.Dropped, imp.Seen)
	require.Zero(t, rs.KernelDrops, "the client->relay hop dropped datagrams: pace the client (STATSD_HOTSHOTS_BURST)")
	require.Zero(t, rs.BadTotal)
	require.Equal(t, uint64(n), rs.Metrics)
	require.NotZero(t, imp.Dropped)
	require.Zero(t, tot.lost, "unrecovered bus loss")
	require.Equal(t, float64(n), tot.metrics)
	for k, v := range counters {
		require.Equal(t, v, tot.counters[k], k)
	}
	require.Equal(t, gauge, tot.gauges["hs.gauge|"])
	require.Equal(t, gdelta, tot.gauges["hs.gdelta|"])
	require.Equal(t, sets, tot.sets["hs.set|"])
	// Percentiles: one flush holds the run.
	var flushes []*Flush
	for _, f := range p.recs[0].flushes {
		for _, s := range f.Series {
			if s.Name == "hs.timer" && s.N > 0 {
				flushes = append(flushes, f)
			}
		}
	}
	require.Len(t, flushes, 1, "the run straddled an interval boundary")
	for _, tc := range []struct {
		key  string
		vals []float64
	}{{"hs.timer|", timers}, {"hs.hist|h:1", hists}, {"hs.dist|", dists}} {
		require.Equal(t, float64(len(tc.vals)), tot.samples[tc.key], tc.key)
		var sum float64
		for _, v := range tc.vals {
			sum += v
		}
		require.InDelta(t, sum, tot.sums[tc.key], math.Abs(sum)*1e-9, tc.key)
		checkPercentiles(t, flushes[0], tc.key, tc.vals, 1e-3)
	}
}

// checkPercentiles compares a series' percentiles with an exact sort of
// vals: the value of rank ceil(p/100*n) must lie within rel (the
// histogram's precision) of the reported one, min and max exactly.
func checkPercentiles(t *testing.T, f *Flush, key string, vals []float64, rel float64) {
	t.Helper()
	sorted := slices.Clone(vals)
	slices.Sort(sorted)
	for _, s := range f.Series {
		if seriesKey(&s) != key {
			continue
		}
		require.Equal(t, sorted[0], s.Min, key)
		require.Equal(t, sorted[len(sorted)-1], s.Max, key)
		require.Len(t, s.Values, len(f.Percentiles))
		for i, pct := range f.Percentiles {
			rank := int(math.Ceil(pct / 100 * float64(len(sorted))))
			exact := sorted[max(rank-1, 0)]
			require.InDelta(t, exact, s.Values[i], math.Max(math.Abs(exact)*rel, 1.0/HistScale), "%s p%v", key, pct)
		}
		return
	}
	t.Fatalf("no series %s", key)
}
