package retransmit

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// TestAmplificationFlood measures the bytes a hostile flood of re-requests
// buys: requests for the largest legal range (count 0xFFFE) at random
// sequences of a cache holding 20,000 small messages, from 1,000 source
// addresses, with the rate limits out of the way, so that only the cap per
// answer bounds it. By default an answer is one packet, as a MoldUDP64
// server's: at most one payload per 20-byte request.
func TestAmplificationFlood(t *testing.T) {
	const (
		msgs     = 20_000
		sources  = 1_000
		requests = 20_000
	)
	s := mustSession(t, "FLOOD")
	c := NewCache(CacheConfig{})
	fill(c, s, 1, msgs+1, 40) // 1 to 40 bytes, as small ticks
	for _, tc := range []struct {
		name     string
		cfg      ServerConfig
		maxRatio float64 // bytes out per byte in
	}{
		{"default", ServerConfig{}, float64(wire.DefaultPayloadSizeIPv4) / wire.RequestLen},
		{"configured-16KiB", ServerConfig{MaxRequestBytes: 16 << 10}, float64(16<<10) / wire.RequestLen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Sources = []Source{c}
			cfg.CoalesceWindow = -1
			cfg.RateBytes, cfg.RequesterRateBytes = 1e15, 1e15
			h, uni, _, st := testHandler(t, cfg)
			now := monotime.Now()
			in := 0
			for i := range requests {
				from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i % sources >> 8), byte(i % sources), 1}), uint16(1024+i))
				seq := wire.Seq(1 + (i*7919)%msgs)
				req := request(s, seq, wire.MaxCount-1)
				in += len(req)
				h.handle(now, req, false, from)
				now += monotime.Time(time.Microsecond)
			}
			h.flush()
			snap := st.snapshot()
			ratio := float64(uni.bytes) / float64(in)
			t.Logf("%s: %d requests (%d bytes) from %d sources: %d answered, %d packets, %d bytes out: %.1f bytes out per byte in, %.0f per request",
				tc.name, requests, in, sources, snap.Answered, uni.packets, uni.bytes, ratio, float64(uni.bytes)/requests)
			require.EqualValues(t, requests, snap.Answered)
			if tc.cfg.MaxRequestBytes == 0 {
				require.Equal(t, requests, uni.packets, "one packet per answer")
			}
			require.LessOrEqual(t, ratio, tc.maxRatio, fmt.Sprintf("cap %.0f", tc.maxRatio))
		})
	}
}
