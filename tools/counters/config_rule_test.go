package counters

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConfigRule: a negative Slots is refused with its name, a negative
// Interval means no sampling goroutine, and a zero value takes the
// default.
func TestConfigRule(t *testing.T) {
	_, err := Config{Slots: -1}.withDefaults()
	require.ErrorIs(t, err, ErrConfig)
	require.ErrorContains(t, err, "Slots -1")
	c, err := Config{Interval: -1}.withDefaults()
	require.NoError(t, err, "Interval: negative means no sampling goroutine")
	require.Negative(t, c.Interval)
	c, err = Config{}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, DefaultDir(), c.Dir)
	require.Equal(t, "mdbus", c.Role)
	require.Equal(t, DefaultSlots, c.Slots)
	require.Equal(t, DefaultInterval, c.Interval)
}
