package main

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/oneway"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/subscriber"
)

// TestPubSyntheticStampsSendMoment runs pub --synthetic's loop over real
// sockets in the lab: --rate R --duration D sends R x D messages, and the
// stamp is the send moment, not the moment the message was wished for.
// At 200 messages/s a stamp taken before the pacing wait makes every
// one-way latency about one interval (5 ms); stamped after it, the
// median is the bus's own latency (tens of µs on loopback). The bound,
// 1 ms, leaves room for a loaded CI machine and still fails the old way.
func TestPubSyntheticStampsSendMoment(t *testing.T) {
	netlab.Require(t)
	for _, tc := range []struct {
		rate float64
		dur  time.Duration
		want int
	}{{200, time.Second, 200}, {4000, 500 * time.Millisecond, 2000}} {
		group := netip.MustParseAddrPort("239.192.9.1:31901")
		var mu sync.Mutex
		var lat []time.Duration
		received := 0
		sub, err := subscriber.New(subscriber.Config{Group: group, OnMessage: func(m subscriber.Message) {
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			received++
			if d, ok := oneway.Latency(m.Data, now, time.Second); ok {
				lat = append(lat, d)
			}
		}})
		require.NoError(t, err)
		pub, err := publisher.New(publisher.Config{Group: group, Inline: true})
		require.NoError(t, err)
		sent, err := pubSynthetic(context.Background(), pub, 0, tc.dur, tc.rate, 1, true)
		require.NoError(t, err)
		require.NoError(t, pub.Close())
		require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return received >= sent }, 5*time.Second, 10*time.Millisecond)
		require.NoError(t, sub.Close())
		require.Equal(t, tc.want, sent, "rate %v for %v", tc.rate, tc.dur)
		require.Equal(t, sent, received)
		slices.Sort(lat)
		require.Len(t, lat, sent)
		p50 := lat[len(lat)/2]
		t.Logf("rate %v: %d messages, one-way p50 %v, max %v", tc.rate, sent, p50, lat[len(lat)-1])
		require.Less(t, p50, time.Millisecond, "rate %v: the stamp includes a pacing wait", tc.rate)
	}
}

// TestPubSyntheticCount: --count ends the run exactly, before --duration.
func TestPubSyntheticCount(t *testing.T) {
	netlab.Require(t)
	pub, err := publisher.New(publisher.Config{Group: netip.MustParseAddrPort("239.192.9.2:31902"), Inline: true})
	require.NoError(t, err)
	defer pub.Close()
	sent, err := pubSynthetic(context.Background(), pub, 300, time.Minute, 1e6, 1, true)
	require.NoError(t, err)
	require.Equal(t, 300, sent)
	require.Equal(t, uint64(301), uint64(pub.NextSeq()))
}
