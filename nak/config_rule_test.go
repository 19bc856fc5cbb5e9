package nak

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
		{"Delay", Config{Delay: -time.Millisecond}},
		{"Retry", Config{Retry: -1}},
		{"MaxRetry", Config{MaxRetry: -1}},
		{"Continue", Config{Continue: -1}},
		{"Deadline", Config{Deadline: -time.Second}},
		{"MaxRequest", Config{MaxRequest: -5}},
		{"Window", Config{Window: -1}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			err := tc.cfg.Check()
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, tc.field+" -")
		})
	}
	require.NoError(t, Config{}.Check())
	got := NewLossDetector(Config{}).Config()
	require.Equal(t, DefaultDelay, got.Delay)
	require.Equal(t, DefaultRetry, got.Retry)
	require.Equal(t, DefaultMaxRetry, got.MaxRetry)
	require.Equal(t, DefaultContinue, got.Continue)
	require.Equal(t, DefaultDeadline, got.Deadline)
	require.Equal(t, DefaultMaxRequest, got.MaxRequest)
	require.Equal(t, DefaultWindow, got.Window)
}
