package nak

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/wire"
)

func TestRangeLen(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Range
		want uint64
	}{
		{"one", rg(5, 6), 1},
		{"several", rg(1, 1025), 1024},
		{"empty", rg(7, 7), 0},
		{"reversed is empty", rg(9, 3), 0},
		{"huge", rg(1, 1<<40+1), 1 << 40},
		{"whole space", rg(0, math.MaxUint64), math.MaxUint64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.r.Len())
		})
	}
	require.Equal(t, "[3,9)", rg(3, 9).String())
}

func TestConfigDefaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Config
		want Config
	}{
		{
			name: "zero value is the LAN default",
			want: Config{Delay: DefaultDelay, Retry: DefaultRetry, MaxRetry: DefaultMaxRetry,
				Deadline: DefaultDeadline, Continue: DefaultContinue, MaxRequest: DefaultMaxRequest, MaxPending: DefaultMaxPending, Window: DefaultWindow},
		},
		{
			name: "negative durations take defaults",
			in:   Config{Delay: -1, Retry: -1, MaxRetry: -1, Deadline: -1, MaxRequest: -5},
			want: Config{Delay: DefaultDelay, Retry: DefaultRetry, MaxRetry: DefaultMaxRetry,
				Deadline: DefaultDeadline, Continue: DefaultContinue, MaxRequest: DefaultMaxRequest, MaxPending: DefaultMaxPending, Window: DefaultWindow},
		},
		{
			name: "MaxRetry below Retry is raised",
			in:   Config{Retry: 50 * ms, MaxRetry: 20 * ms},
			want: Config{Delay: DefaultDelay, Retry: 50 * ms, MaxRetry: 50 * ms,
				Deadline: DefaultDeadline, Continue: DefaultContinue, MaxRequest: DefaultMaxRequest, MaxPending: DefaultMaxPending, Window: DefaultWindow},
		},
		{
			name: "MaxRequest capped at wire.MaxCount",
			in:   Config{MaxRequest: 1 << 20, MaxPending: 7, Seed: 9},
			want: Config{Delay: DefaultDelay, Retry: DefaultRetry, MaxRetry: DefaultMaxRetry,
				Deadline: DefaultDeadline, Continue: DefaultContinue, MaxRequest: wire.MaxCount, MaxPending: 7, Seed: 9, Window: DefaultWindow},
		},
		{
			name: "huge durations clamped",
			in:   Config{Deadline: math.MaxInt64, MaxRetry: math.MaxInt64},
			want: Config{Delay: DefaultDelay, Retry: DefaultRetry, MaxRetry: maxDuration,
				Deadline: maxDuration, Continue: DefaultContinue, MaxRequest: DefaultMaxRequest, MaxPending: DefaultMaxPending, Window: DefaultWindow},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.in.withDefaults())
			require.Equal(t, tc.want, NewLossDetector(tc.in).Config())
		})
	}
}

func TestUniformDelay(t *testing.T) {
	const max = 2 * time.Millisecond
	a, b := NewUniformDelay(max, 42), NewUniformDelay(max, 42)
	c := NewUniformDelay(max, 43)
	require.Equal(t, max, a.Max())
	var sum time.Duration
	same := 0
	const n = 20000
	var buckets [10]int
	for range n {
		da, db, dc := a.Delay(), b.Delay(), c.Delay()
		require.Equal(t, da, db, "same seed replays")
		require.GreaterOrEqual(t, da, time.Duration(0))
		require.Less(t, da, max)
		if da == dc {
			same++
		}
		sum += da
		buckets[da*10/max]++
	}
	require.Less(t, same, 10, "different seeds give different sequences")
	mean := sum / n
	require.InDelta(t, float64(max/2), float64(mean), float64(max)/50, "mean near max/2")
	for i, k := range buckets {
		require.InDelta(t, n/10, k, n/50, "bucket %d", i)
	}

	require.Zero(t, NewUniformDelay(0, 1).Delay())
	require.Zero(t, NewUniformDelay(-time.Second, 1).Delay())
	require.Equal(t, 100*time.Microsecond, FixedDelay(100*time.Microsecond).Delay())

	allocs := testing.AllocsPerRun(100, func() { _ = a.Delay() })
	require.Zero(t, allocs)
}

// The detector's first-NAK delays replay for a seed and differ between seeds.
func TestSeedReplays(t *testing.T) {
	firstNAKs := func(seed uint64) []time.Duration {
		d := NewLossDetector(Config{Seed: seed})
		var out []time.Duration
		for i := range 50 {
			d.Reset()
			d.OnGap(t0, rg(wire.Seq(10*i+1), wire.Seq(10*i+2)))
			at, ok := d.Next()
			require.True(t, ok)
			out = append(out, at.Sub(t0))
		}
		return out
	}
	require.Equal(t, firstNAKs(7), firstNAKs(7))
	require.NotEqual(t, firstNAKs(7), firstNAKs(8))
	// Seed 0 draws a random seed; two such detectors differ.
	require.NotEqual(t, firstNAKs(0), firstNAKs(0))
}
