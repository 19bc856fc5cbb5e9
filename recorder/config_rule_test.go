package recorder

import (
	"net/netip"
	"testing"
	"time"

	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/nak"
	"github.com/stretchr/testify/require"
)

// TestConfigRule: a negative value is refused with the field's name,
// before any socket is opened, where the field has no "none"; a zero
// value takes the default.
func TestConfigRule(t *testing.T) {
	feed := netip.MustParseAddrPort("239.192.0.1:31001")
	j, err := journal.Open(t.TempDir(), journal.Config{})
	require.NoError(t, err)
	defer j.Close()
	for _, tc := range []struct {
		field string
		cfg   Config
	}{
		{"ReadBuffer", Config{ReadBuffer: -1}},
		{"MaxStreams", Config{MaxStreams: -1}},
		{"NAK: nak: invalid config: Deadline", Config{NAK: nak.Config{Deadline: -1}}},
	} {
		t.Run("Recorder "+tc.field, func(t *testing.T) {
			tc.cfg.Feed, tc.cfg.Journal = feed, j
			_, err := NewRecorder(tc.cfg)
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, tc.field+" -")
		})
	}
	for _, tc := range []struct {
		field string
		cfg   RewinderConfig
	}{
		{"ReadBuffer", RewinderConfig{ReadBuffer: -1}},
		{"NAK: nak: invalid config: Retry", RewinderConfig{NAK: nak.Config{Retry: -1}}},
	} {
		t.Run("Rewinder "+tc.field, func(t *testing.T) {
			tc.cfg.Feed = feed
			_, err := NewRewinder(tc.cfg)
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, tc.field+" -")
		})
	}
	c, err := Config{Feed: feed, Journal: j, MaxStreamsPerSource: -1}.withDefaults()
	require.NoError(t, err, "MaxStreamsPerSource: negative means no bound")
	require.Equal(t, DefaultRewinderReadBuffer, c.ReadBuffer)
	require.Equal(t, DefaultNAKDeadline, c.NAK.Deadline)
	rc, err := RewinderConfig{Feed: feed, Upstream: netip.MustParseAddrPort("127.0.0.1:31100"), Heartbeat: -1}.withDefaults()
	require.NoError(t, err, "Heartbeat: negative means none")
	require.Negative(t, rc.Heartbeat)
	require.Equal(t, DefaultRewinderReadBuffer, rc.ReadBuffer)
	require.Equal(t, DefaultNAKDeadline, rc.NAK.Deadline)
	rc, err = RewinderConfig{Feed: feed}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, time.Second, rc.Heartbeat)
}
