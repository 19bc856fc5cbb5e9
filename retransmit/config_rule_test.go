package retransmit

import (
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestServerConfigNegative: the house rule on ServerConfig. A negative
// value is refused with an error naming its field, but where the field's
// doc gives it a meaning ("none"); zero is the default.
func TestServerConfigNegative(t *testing.T) {
	base := ServerConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"), Sources: []Source{NewCache(CacheConfig{})}}
	for _, tc := range []struct {
		field string
		set   func(*ServerConfig)
	}{
		{"MaxPerRequest", func(c *ServerConfig) { c.MaxPerRequest = -1 }},
		{"MaxRequestBytes", func(c *ServerConfig) { c.MaxRequestBytes = -1 }},
		{"RateBytes", func(c *ServerConfig) { c.RateBytes = -1 }},
		{"RateBytes", func(c *ServerConfig) { c.RateBytes = math.NaN() }},
		{"RequesterRateBytes", func(c *ServerConfig) { c.RequesterRateBytes = -5 }},
		{"Burst", func(c *ServerConfig) { c.Burst = -time.Millisecond }},
		{"MaxRequesters", func(c *ServerConfig) { c.MaxRequesters = -1 }},
		{"ReadBuffer", func(c *ServerConfig) { c.ReadBuffer = -1 }},
		{"PayloadSize", func(c *ServerConfig) { c.PayloadSize = -1 }},
	} {
		cfg := base
		tc.set(&cfg)
		_, err := cfg.withDefaults()
		require.ErrorIs(t, err, ErrConfig, tc.field)
		require.ErrorContains(t, err, tc.field)
	}
	// Negative means "none" where the doc says so.
	cfg := base
	cfg.CoalesceWindow, cfg.MaxDeferred = -1, -1
	got, err := cfg.withDefaults()
	require.NoError(t, err)
	require.Negative(t, got.CoalesceWindow, "coalescing off")
	require.Zero(t, got.MaxDeferred, "nothing held back")
	// Zero is the default.
	got, err = base.withDefaults()
	require.NoError(t, err)
	require.Equal(t, DefaultCoalesceWindow, got.CoalesceWindow)
	require.Equal(t, DefaultMaxPerRequest, got.MaxPerRequest)
	require.Equal(t, DefaultMaxDeferred, got.MaxDeferred)
	require.InDelta(t, DefaultRateBytes, got.RateBytes, 0)
	require.Equal(t, DefaultBurst, got.Burst)
	require.Equal(t, DefaultReadBuffer, got.ReadBuffer)
}

func TestCacheConfigValidate(t *testing.T) {
	require.NoError(t, CacheConfig{}.Validate())
	require.NoError(t, CacheConfig{MaxMessages: 5, MaxBytes: 1 << 20, MaxSessions: 2}.Validate())
	for field, cfg := range map[string]CacheConfig{
		"MaxMessages": {MaxMessages: -1},
		"MaxBytes":    {MaxBytes: -1},
		"MaxSessions": {MaxSessions: -3},
	} {
		err := cfg.Validate()
		require.ErrorIs(t, err, ErrConfig, field)
		require.ErrorContains(t, err, field)
	}
	got := CacheConfig{MaxMessages: -1}.withDefaults()
	require.Equal(t, DefaultMaxMessages, got.MaxMessages, "NewCache takes a negative value as the default")
}
