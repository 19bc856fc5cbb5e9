package publisher

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
	group := netip.MustParseAddrPort("239.192.0.1:31001")
	for _, tc := range []struct {
		field string
		cfg   Config
	}{
		{"TTL", Config{TTL: -1}},
		{"PayloadSize", Config{PayloadSize: -1}},
		{"RateMessages", Config{RateMessages: -1}},
		{"RateBytes", Config{RateBytes: -1}},
		{"BatchPackets", Config{BatchPackets: -1}},
		{"QueuePackets", Config{QueuePackets: -1}},
		{"Linger", Config{Linger: -time.Millisecond}},
	} {
		t.Run("negative "+tc.field, func(t *testing.T) {
			tc.cfg.Group = group
			_, err := tc.cfg.withDefaults()
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, tc.field+" ")
		})
	}
	s, err := Config{Group: group, HeartbeatInterval: -1, WriteBuffer: -1, Grace: -1, Sinks: []Sink{nopSink{}}}.withDefaults()
	require.NoError(t, err, "negative: none, where the doc says so")
	require.Negative(t, s.HeartbeatInterval, "no heartbeats")
	require.Zero(t, s.WriteBuffer, "no SO_SNDBUF request")
	require.Zero(t, s.Grace)

	s, err = Config{Group: group, Sinks: []Sink{nopSink{}}}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, DefaultInterface, s.Interface)
	require.Equal(t, DefaultHeartbeatInterval, s.HeartbeatInterval)
	require.Equal(t, DefaultWriteBuffer, s.WriteBuffer)
	require.Equal(t, DefaultBatchPackets, s.BatchPackets)
	require.Equal(t, DefaultQueuePackets, s.QueuePackets)
	require.Equal(t, DefaultGrace, s.Grace)
	require.Equal(t, 1472, s.PayloadSize)
}

type nopSink struct{}

func (nopSink) SentPacket([]byte) {}
