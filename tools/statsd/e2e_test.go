package statsd

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRelayCollectorExact sends every type through the relay while the
// collector's socket loses 5% of bus datagrams: NAK recovery must make
// every total exact.
func TestRelayCollectorExact(t *testing.T) {
	p := newPipeline(t, pipeOpts{loss: 0.05, relay: func(c *RelayConfig) { c.EndGrace = 300 * time.Millisecond }})
	conn := udpSender(t, p.relay.Addr())
	const rounds = 2000
	var wantSum float64
	for i := range rounds {
		v := float64(i%97) + 0.5
		wantSum += v
		d := fmt.Sprintf("c.a:1|c\nc.b:2|c|@0.5|#env:prod\ng.a:%d|g\ng.b:+1|g\nt.a:%g|ms\nh.a:%g|h|#x:y\nd.a:%g:%g|d\ns.a:m%d|s\nbad\n", i, v, v, v, v, i%500)
		_, err := conn.Write([]byte(d))
		require.NoError(t, err)
		if i%200 == 0 {
			p.readAll(t, uint64(i+1))
		}
	}
	p.readAll(t, rounds)
	p.finish(t, 10*time.Second)
	tot := p.recs[0].totals()
	t.Logf("flushes %d, metrics %v, lost %v, impair %+v", tot.flushes, tot.metrics, tot.lost, p.imps[0].Stats())
	require.Zero(t, tot.lost)
	require.Equal(t, float64(rounds), tot.counters["c.a|"])
	require.Equal(t, float64(4*rounds), tot.counters["c.b|env:prod"])
	require.Equal(t, float64(rounds-1), tot.gauges["g.a|"])
	require.Equal(t, float64(rounds), tot.gauges["g.b|"])
	require.Equal(t, float64(rounds), tot.samples["t.a|"])
	require.Equal(t, float64(rounds), tot.samples["h.a|x:y"])
	require.Equal(t, float64(2*rounds), tot.samples["d.a|"])
	require.InDelta(t, wantSum, tot.sums["t.a|"], 1e-6)
	require.Equal(t, float64(8*rounds), tot.metrics)
	require.Equal(t, float64(rounds), tot.relayBad["no_value"])
	st := p.imps[0].Stats()
	require.NotZero(t, st.Dropped, "the impairment dropped nothing: the test proves no recovery")
	_ = math.Inf
}
