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
		// Answers on the repair group, with at most one confirm each
		// (one per 10 ms, and one per change of the group size): one
		// packet and at most 30 bytes per request.
		{"repair-group", ServerConfig{RepairGroup: netip.MustParseAddrPort("239.1.2.3:5000")},
			float64(wire.DefaultPayloadSizeIPv4+wire.ConfirmLen) / wire.RequestLen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Sources = []Source{c}
			cfg.CoalesceWindow = -1
			cfg.RateBytes, cfg.RequesterRateBytes = 1e15, 1e15
			h, uni, multi, st := testHandler(t, cfg)
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
			out, packets := uni.bytes+multi.bytes, uni.packets+multi.packets
			ratio := float64(out) / float64(in)
			t.Logf("%s: %d requests (%d bytes) from %d sources: %d answered, %d packets (%d confirms), %d bytes out: %.1f bytes out per byte in, %.0f per request",
				tc.name, requests, in, sources, snap.Answered, packets, snap.Confirms, out, ratio, float64(out)/requests)
			require.EqualValues(t, requests, snap.Answered)
			switch {
			case tc.cfg.RepairGroup.IsValid():
				require.Equal(t, requests+int(snap.Confirms), packets, "one packet per answer, plus the confirms")
				require.LessOrEqual(t, int(snap.Confirms), requests/10, "confirms now and then, not one per answer")
			case tc.cfg.MaxRequestBytes == 0:
				require.Equal(t, requests, packets, "one packet per answer")
			}
			if tc.cfg.MaxRequestBytes == 0 { // the shipped caps
				require.LessOrEqual(t, ratio, 80.0, "never more than 80 bytes out per byte in")
			}
			require.LessOrEqual(t, ratio, tc.maxRatio, fmt.Sprintf("cap %.0f", tc.maxRatio))
		})
	}
}

// TestAmplificationHeldBack: a flood the buckets cannot pay for is held
// (up to MaxDeferred, a share per requester) and confirmed "later"; the
// confirms are paid from the global bucket, so the bytes out stay within
// its rate, and the bytes per request stay under 80.
func TestAmplificationHeldBack(t *testing.T) {
	s := mustSession(t, "HELD")
	c := NewCache(CacheConfig{})
	fill(c, s, 1, 20_001, 40)
	const rate = 1e6 // bytes/s, global and per requester
	h, uni, multi, st := testHandler(t, ServerConfig{Sources: []Source{c}, CoalesceWindow: -1,
		RepairGroup: netip.MustParseAddrPort("239.1.2.3:5000"), RateBytes: rate, RequesterRateBytes: rate})
	now := monotime.Now()
	start := now
	in := 0
	const requests = 50_000
	for i := range requests {
		from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i % 64), 0, 1}), uint16(1024+i))
		req := request(s, wire.Seq(1+(i*7919)%20_000), 100)
		in += len(req)
		h.handle(now, req, false, from)
		if i%64 == 63 {
			h.serveLater(now)
			h.flush()
		}
		now += monotime.Time(2 * time.Microsecond) // 500,000 requests/s for 100 ms
	}
	for range 1000 { // then 100 ms for the held ones
		now += monotime.Time(100 * time.Microsecond)
		h.serveLater(now)
		h.flush()
	}
	snap := st.snapshot()
	out := uni.bytes + multi.bytes
	elapsed := time.Duration(now - start)
	limit := rate*elapsed.Seconds() + max(rate*DefaultBurst.Seconds(), float64(wire.DefaultPayloadSizeIPv4))
	t.Logf("%d requests in %v: %d answered (%d after being held), %d held, refused %s; %d bytes out (limit %.0f), %.2f bytes out per byte in",
		requests, elapsed, snap.Answered, snap.DeferredAnswered, snap.Deferred, snap.Refused, out, limit, float64(out)/float64(in))
	require.Positive(t, snap.Deferred)
	require.Positive(t, snap.DeferredAnswered)
	require.Positive(t, snap.Refused.RateLimited, "a full queue refuses")
	require.LessOrEqual(t, float64(out), limit, "within the global rate, confirms included")
	require.LessOrEqual(t, float64(out)/float64(in), 80.0)
}
