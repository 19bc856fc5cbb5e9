package demo

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
		{"Subscribers", Config{Subscribers: -1}},
		{"Duration", Config{Duration: -time.Second}},
		{"Rate", Config{Rate: -1}},
		{"Loss", Config{Loss: -0.1}},
		{"Reorder", Config{Reorder: -0.1}},
		{"Dup", Config{Dup: -0.1}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			_, err := tc.cfg.withDefaults()
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, tc.field+" -")
		})
	}
	c, err := Config{}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, "239.192.0.1:31001", c.Group.String())
	require.Equal(t, "lo", c.Interface)
	require.Equal(t, 3, c.Subscribers)
	require.Equal(t, 5*time.Second, c.Duration)
	require.Equal(t, 200_000.0, c.Rate)
	require.Equal(t, uint64(1), c.Seed)
}
