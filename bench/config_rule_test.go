package bench

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConfigRule: a negative value is refused with the field's name where
// the field has no "none", means none where its doc says so, and a zero
// value takes the default.
func TestConfigRule(t *testing.T) {
	for _, tc := range []struct {
		field string
		cfg   Config
	}{
		{"Duration", Config{Duration: -time.Second}},
		{"Count", Config{Count: -1}},
		{"PayloadSize", Config{PayloadSize: -1}},
		{"Batch", Config{Batch: -1}},
		{"ReadBuffer", Config{ReadBuffer: -1}},
		{"WriteBuffer", Config{WriteBuffer: -1}},
		{"BusyPoll", Config{BusyPoll: -1}},
		{"Interval", Config{Interval: -time.Second}},
		{"Drain", Config{Drain: -time.Second}},
		{"TTL", Config{TTL: -1}},
	} {
		t.Run("Config."+tc.field, func(t *testing.T) {
			_, err := tc.cfg.withDefaults()
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, tc.field+" -")
		})
	}
	s, err := Config{Warmup: -1, Linger: -1, Spin: -1}.withDefaults()
	require.NoError(t, err, "negative: none, where the doc says so")
	require.Zero(t, s.Warmup)
	require.Zero(t, s.Linger)
	require.Zero(t, s.Spin)
	s, err = Config{}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, DefaultDuration, s.Duration)
	require.Equal(t, DefaultWarmup, s.Warmup)
	require.Equal(t, DefaultLinger, s.Linger)
	require.Equal(t, DefaultSpin, s.Spin)
	require.Equal(t, DefaultReadBuffer, s.ReadBuffer)
	require.Equal(t, DefaultWriteBuffer, s.WriteBuffer)
	require.Equal(t, DefaultBatch, s.Batch)
	require.Equal(t, DefaultInterval, s.Interval)
	require.Equal(t, DefaultDrain, s.Drain)

	group := GroupConfig{Subs: 1, Count: 1, Rate: 1, Size: 8, Group: netip.MustParseAddrPort("239.192.0.1:31001")}
	bad := group
	bad.Timeout = -time.Second
	_, err = bad.withDefaults()
	require.ErrorIs(t, err, ErrConfig)
	require.ErrorContains(t, err, "Timeout -1s")
	g, err := group.withDefaults()
	require.NoError(t, err)
	require.Equal(t, 60*time.Second, g.Timeout)

	for _, tc := range []struct {
		field string
		cfg   SearchConfig
	}{
		{"Min", SearchConfig{Start: 1, Min: -1}},
		{"Factor", SearchConfig{Start: 1, Factor: -1}},
		{"Resolution", SearchConfig{Start: 1, Resolution: -1}},
		{"MaxProbes", SearchConfig{Start: 1, MaxProbes: -1}},
		{"Budget", SearchConfig{Start: 1, Budget: -1}},
	} {
		t.Run("SearchConfig."+tc.field, func(t *testing.T) {
			_, err := tc.cfg.withDefaults()
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, tc.field)
		})
	}
	sc, err := SearchConfig{Start: 1}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, SearchConfig{Start: 1, Min: 1, Max: MaxRate, Factor: 2, Resolution: DefaultResolution, MaxProbes: DefaultMaxProbes}, sc)
}
