package bench

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRunMatrixCases: every size × rate × system, mdbus again at each
// loss, and a ping-pong once per size without loss, in run order.
func TestRunMatrixCases(t *testing.T) {
	small, big := Sizes{Min: 64, Max: 64}, Sizes{Min: 1024, Max: 1024}
	m := RunMatrix{Systems: []System{Mdbus, Raw}, Sizes: []Sizes{small, big}, Rates: []float64{1000, 2000},
		Modes: []string{OneWay, PingPong}, Subscribers: 3, Processes: true, Losses: []float64{0.01, 0.05}}

	tc := ThroughputCases(m)
	require.Len(t, tc, 2*2*(2+2)) // per size and rate: mdbus, mdbus at 2 losses, raw
	require.Equal(t, []ThroughputCase{
		{System: Mdbus, Sizes: small, Rate: 1000, Subscribers: 3, Processes: true},
		{System: Mdbus, Sizes: small, Rate: 1000, Subscribers: 3, Processes: true, Loss: 0.01},
		{System: Mdbus, Sizes: small, Rate: 1000, Subscribers: 3, Processes: true, Loss: 0.05},
		{System: Raw, Sizes: small, Rate: 1000, Subscribers: 3, Processes: true},
	}, tc[:4])
	require.Equal(t, ThroughputCase{System: Raw, Sizes: big, Rate: 2000, Subscribers: 3, Processes: true}, tc[len(tc)-1])

	lc := LatencyCases(m)
	// Per size: one-way at 2 rates (mdbus, its 2 losses, raw), ping-pong
	// at the first rate only (mdbus, raw; no loss).
	require.Len(t, lc, 2*(2*4+2))
	require.Equal(t, []LatencyCase{
		{System: Mdbus, Mode: OneWay, Sizes: small, Rate: 1000, Subscribers: 3, Processes: true},
		{System: Mdbus, Mode: OneWay, Sizes: small, Rate: 1000, Subscribers: 3, Processes: true, Loss: 0.01},
		{System: Mdbus, Mode: OneWay, Sizes: small, Rate: 1000, Subscribers: 3, Processes: true, Loss: 0.05},
		{System: Raw, Mode: OneWay, Sizes: small, Rate: 1000, Subscribers: 3, Processes: true},
		{System: Mdbus, Mode: PingPong, Sizes: small, Rate: 1000},
		{System: Raw, Mode: PingPong, Sizes: small, Rate: 1000},
		{System: Mdbus, Mode: OneWay, Sizes: small, Rate: 2000, Subscribers: 3, Processes: true},
	}, lc[:7])

	m.Losses = nil
	require.Len(t, ThroughputCases(m), 2*2*2)
}

// TestRunCases: errors are joined; an interruption stops before the next
// case and is not an error.
func TestRunCases(t *testing.T) {
	boom := errors.New("boom")
	var ran []int
	run := func(_ context.Context, c int) (struct{}, error) {
		ran = append(ran, c)
		if c == 2 {
			return struct{}{}, boom
		}
		return struct{}{}, nil
	}
	require.ErrorIs(t, runCases(context.Background(), []int{1, 2, 3}, run), boom)
	require.Equal(t, []int{1, 2, 3}, ran)

	ctx, cancel := context.WithCancel(context.Background())
	ran = nil
	stop := func(_ context.Context, c int) (struct{}, error) {
		ran = append(ran, c)
		if c == 2 {
			cancel()
			return struct{}{}, context.Canceled
		}
		return struct{}{}, boom
	}
	require.NoError(t, runCases(ctx, []int{1, 2, 3}, stop))
	require.Equal(t, []int{1, 2}, ran)
}
