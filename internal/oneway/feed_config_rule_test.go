package oneway

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFeedConfigRule: a negative value is refused with the field's name,
// a zero Rate takes DefaultFeedRate.
func TestFeedConfigRule(t *testing.T) {
	publish := func([][]byte) error { return nil }
	for _, tc := range []struct {
		field string
		cfg   FeedConfig
	}{
		{"Rate", FeedConfig{Rate: -1}},
		{"Count", FeedConfig{Count: -1}},
		{"Duration", FeedConfig{Duration: -time.Second}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			_, err := Feed(context.Background(), tc.cfg, publish)
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, tc.field+" -")
		})
	}
	// At the default 10k/s, 20 messages take about 2 ms; a zero rate
	// used to divide by zero and wait for ever after the first.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := Feed(ctx, FeedConfig{Count: 20}, publish)
	require.NoError(t, err)
	require.Equal(t, 20, n)
	require.NoError(t, ctx.Err(), "the zero Rate is the default, not a stall")
}
