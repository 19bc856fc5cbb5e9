package publisher_test

import (
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/wire"
)

// TestCloseGrace: after the end of session Close goes on repeating it for
// Grace, so a subscriber that lost the tail finds out and has time to ask,
// and returns only then; with Sinks the grace is on by default; a
// negative Grace skips it. On virtual time (bubble_test.go) the ends are
// counted exactly.
func TestCloseGrace(t *testing.T) {
	netlab.Require(t)
	for i, tc := range []struct {
		name     string
		cfg      publisher.Config
		minClose time.Duration
		minEnds  int
	}{
		{"grace", publisher.Config{Grace: 300 * time.Millisecond}, 300 * time.Millisecond, 5},
		{"heartbeat-paces", publisher.Config{Grace: 300 * time.Millisecond, HeartbeatInterval: 20 * time.Millisecond}, 300 * time.Millisecond, 10},
		{"default-with-sinks", publisher.Config{Sinks: []publisher.Sink{nopSink{}}}, publisher.DefaultGrace, 5},
		{"skipped", publisher.Config{Sinks: []publisher.Sink{nopSink{}}, Grace: -1}, 0, 1},
		{"none-without-sinks", publisher.Config{}, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := tc.cfg
				cfg.Group = netip.AddrPortFrom(netip.MustParseAddr("239.10.0.30"), uint16(31300+i))
				p, cc := openCaptured(t, cfg)
				_, err := p.Publish([]byte("last"))
				require.NoError(t, err)
				t0 := time.Now()
				require.NoError(t, p.Close())
				took := time.Since(t0)
				require.GreaterOrEqual(t, took, tc.minClose)
				if tc.minClose == 0 {
					require.Less(t, took, 500*time.Millisecond, "no grace")
				}
				ends := 0
				var last time.Time
				for _, pk := range cc.sent() {
					if pk.IsEndOfSession() {
						ends++
						require.Equal(t, wire.Seq(2), pk.Seq, "every end of session says where the session ends")
						last = pk.at
					}
				}
				require.GreaterOrEqual(t, ends, tc.minEnds)
				require.EqualValues(t, ends, p.Stats().EndOfSession)
				if tc.minEnds == 1 {
					require.Equal(t, 1, ends)
				}
				require.Less(t, last.Sub(t0), max(tc.minClose, time.Nanosecond), "no end of session after the grace")
			})
		})
	}
}
