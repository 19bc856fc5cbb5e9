package journal

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConfigRule: a negative value is refused with the field's name where
// the field has no "none", keeps all where its doc says so, and a zero
// value takes the default.
func TestConfigRule(t *testing.T) {
	for _, tc := range []struct {
		field string
		cfg   Config
	}{
		{"SyncInterval", Config{SyncInterval: -time.Millisecond}},
		{"SegmentBytes", Config{SegmentBytes: -1}},
		{"BlockBytes", Config{BlockBytes: -1}},
	} {
		t.Run("negative "+tc.field, func(t *testing.T) {
			_, err := Open(t.TempDir(), tc.cfg)
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, tc.field+" -")
		})
	}
	c, err := Config{RetainBytes: -1, RetainAge: -1}.withDefaults()
	require.NoError(t, err, "negative: none, where the doc says so")
	require.Zero(t, c.RetainBytes)
	require.Zero(t, c.RetainAge)

	c, err = Config{}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, DefaultSyncInterval, c.SyncInterval)
	require.Equal(t, int64(DefaultSegmentBytes), c.SegmentBytes)
	require.Equal(t, DefaultBlockBytes, c.BlockBytes)
	require.Equal(t, DefaultPerm, int(c.Perm))
}
