package resume

import (
	"path/filepath"
	"testing"

	"github.com/mdbus/mdbus/subscriber"
	"github.com/stretchr/testify/require"
)

// TestConfigRule: a negative value is refused with the field's name, a
// zero value takes the default.
func TestConfigRule(t *testing.T) {
	on := func(subscriber.Message) {}
	for _, tc := range []struct {
		field string
		cfg   Config
	}{
		{"MaxBuffered", Config{MaxBuffered: -1}},
		{"MaxBufferedBytes", Config{MaxBufferedBytes: -1}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			tc.cfg.OnMessage = on
			_, err := New(tc.cfg)
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, tc.field+" -1")
		})
	}
	_, err := OpenCheckpoint(filepath.Join(t.TempDir(), "ckpt"), CheckpointConfig{Interval: -1})
	require.ErrorIs(t, err, ErrConfig)
	require.ErrorContains(t, err, "Interval -1ns")

	c, err := Config{OnMessage: on}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, DefaultMaxBuffered, c.MaxBuffered)
	require.Equal(t, DefaultMaxBufferedBytes, c.MaxBufferedBytes)
	ck, err := OpenCheckpoint(filepath.Join(t.TempDir(), "ckpt"), CheckpointConfig{})
	require.NoError(t, err)
	require.Equal(t, DefaultInterval, ck.cfg.Interval)
	require.NoError(t, ck.Close())
}
