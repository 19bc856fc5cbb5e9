package replay

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConfigRule: a negative value is refused with the field's name where
// the field has no "none", Spin keeps negative as "never spins", and a
// zero value takes the default.
func TestConfigRule(t *testing.T) {
	for _, tc := range []struct {
		field string
		cfg   Config
	}{
		{"Speed", Config{Speed: -1}},
		{"Rate", Config{Rate: -1}},
		{"PPS", Config{PPS: -1}},
		{"Mbps", Config{Mbps: -1}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			_, err := tc.cfg.withDefaults()
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, tc.field+" -1")
		})
	}
	c, err := Config{Spin: -1}.withDefaults()
	require.NoError(t, err)
	require.Negative(t, c.Spin)
	c, err = Config{}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, 1.0, c.Speed)
	require.Equal(t, DefaultSpin, c.Spin)
	require.NotNil(t, c.Clock)
}
