package oneway

import (
	"context"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/cfgtest"
	"github.com/stretchr/testify/require"
)

// TestFeedConfigRule: a negative value is refused by name; a zero Rate
// takes DefaultFeedRate.
func TestFeedConfigRule(t *testing.T) {
	publish := func([][]byte) error { return nil }
	feed := func(c FeedConfig) error { _, err := Feed(context.Background(), c, publish); return err }
	cfgtest.Refuses(t, ErrConfig, feed, FeedConfig{}, "Rate", "Count", "Duration")
	// At the default 10k/s, 20 messages take about 2 ms; a zero rate
	// used to divide by zero and spin for ever after the first.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := Feed(ctx, FeedConfig{Count: 20}, publish)
	require.NoError(t, err)
	require.Equal(t, 20, n)
	require.NoError(t, ctx.Err(), "the zero Rate is the default, not a stall")
}
