package impair

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConfigRule: a negative value is refused with the field's name, a
// zero value takes the default.
func TestConfigRule(t *testing.T) {
	for _, tc := range []struct {
		field string
		cfg   Config
	}{
		{"Loss", Config{Loss: -0.1}},
		{"Duplicate", Config{Duplicate: -0.1}},
		{"Reorder", Config{Reorder: -0.1}},
		{"ReorderDepth", Config{ReorderDepth: -1}},
		{"ReorderWait", Config{ReorderWait: -time.Millisecond}},
		{"Delay", Config{Delay: -1}},
		{"Jitter", Config{Jitter: -1}},
		{"MaxHeld", Config{MaxHeld: -1}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			_, err := tc.cfg.withDefaults()
			require.ErrorIs(t, err, ErrInvalidConfig)
			require.ErrorContains(t, err, tc.field+" -")
		})
	}
	s, err := Config{}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, DefaultReorderDepth, s.ReorderDepth)
	require.Equal(t, DefaultReorderWait, s.ReorderWait)
	require.Equal(t, DefaultMaxHeld, s.MaxHeld)
	require.False(t, s.holds)
}
