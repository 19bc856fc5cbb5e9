package statsd

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConfigRule: a negative value is refused with the field's name where
// the field has no "none", SelfInterval keeps negative as never, and a
// zero value takes the default.
func TestConfigRule(t *testing.T) {
	for _, tc := range []struct {
		field string
		cfg   RelayConfig
	}{
		{"ReadBuffer", RelayConfig{ReadBuffer: -1}},
		{"BatchSize", RelayConfig{BatchSize: -1}},
		{"DatagramSize", RelayConfig{DatagramSize: -1}},
		{"PreAggregate", RelayConfig{PreAggregate: -1}},
		{"TickInterval", RelayConfig{TickInterval: -1}},
		{"MaxMessageLen", RelayConfig{MaxMessageLen: -1}},
		{"EndGrace", RelayConfig{EndGrace: -1}},
		{"LogEvery", RelayConfig{LogEvery: -1}},
		{"Limits.MaxLineLen", RelayConfig{Limits: Limits{MaxLineLen: -1}}},
		{"Limits.MaxValues", RelayConfig{Limits: Limits{MaxValues: -1}}},
	} {
		t.Run("Relay "+tc.field, func(t *testing.T) {
			_, err := tc.cfg.withDefaults()
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, tc.field+" -")
		})
	}
	for _, tc := range []struct {
		field string
		cfg   ClientConfig
	}{
		{"FlushEvery", ClientConfig{FlushEvery: -1}},
		{"TickInterval", ClientConfig{TickInterval: -1}},
		{"MaxMessageLen", ClientConfig{MaxMessageLen: -1}},
		{"Limits.MaxTags", ClientConfig{Limits: Limits{MaxTags: -1}}},
	} {
		t.Run("Client "+tc.field, func(t *testing.T) {
			_, err := NewClient(tc.cfg)
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, tc.field+" -")
		})
	}
	for _, tc := range []struct {
		field string
		cfg   CollectorConfig
	}{
		{"MaxSeries", CollectorConfig{MaxSeries: -1}},
		{"MaxSetMembers", CollectorConfig{MaxSetMembers: -1}},
		{"MaxHistograms", CollectorConfig{MaxHistograms: -1}},
		{"IdleExpiry", CollectorConfig{IdleExpiry: -1}},
		{"StreamTimeout", CollectorConfig{StreamTimeout: -1}},
		{"Limits.MaxTagBytes", CollectorConfig{Limits: Limits{MaxTagBytes: -1}}},
	} {
		t.Run("Collector "+tc.field, func(t *testing.T) {
			_, err := tc.cfg.withDefaults()
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, tc.field+" -")
		})
	}

	r, err := RelayConfig{SelfInterval: -1}.withDefaults()
	require.NoError(t, err, "SelfInterval: negative means never")
	require.Negative(t, r.SelfInterval)
	r, err = RelayConfig{}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, DefaultRelayBuffer, r.ReadBuffer)
	require.Equal(t, DefaultRelayBatch, r.BatchSize)
	require.Equal(t, DefaultDatagramSize, r.DatagramSize)
	require.Equal(t, DefaultTickInterval, r.TickInterval)
	require.Equal(t, DefaultSelfInterval, r.SelfInterval)
	require.Equal(t, time.Second, r.EndGrace)
	require.Equal(t, DefaultLogEvery, r.LogEvery)
	require.Equal(t, DefaultMaxLineLen, r.Limits.MaxLineLen)
	cl, err := ClientConfig{}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, time.Millisecond, cl.FlushEvery)
	require.Equal(t, DefaultTickInterval, cl.TickInterval)
	co, err := CollectorConfig{}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, DefaultMaxSeries, co.MaxSeries)
	require.Equal(t, DefaultMaxSetMembers, co.MaxSetMembers)
	require.Equal(t, DefaultMaxHistograms, co.MaxHistograms)
	require.Equal(t, DefaultIdleExpiry, co.IdleExpiry)
	require.Equal(t, DefaultStreamTimeout, co.StreamTimeout)
	require.Equal(t, DefaultFlushInterval, co.FlushInterval)
}
