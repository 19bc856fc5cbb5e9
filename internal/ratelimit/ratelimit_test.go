package ratelimit

import (
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/stretchr/testify/require"
)

func TestRefillAndBurst(t *testing.T) {
	t0 := monotime.Time(1e9)
	b := New(t0, 1000, 100) // 1000 tokens/s, 100 deep
	require.True(t, b.Limited())
	require.True(t, b.Has(100))
	b.Take(100)
	require.False(t, b.Has(1))
	b.Refill(t0.Add(50 * time.Millisecond))
	require.InDelta(t, 50, b.Tokens(), 1e-9)
	b.Refill(t0.Add(10 * time.Second))
	require.InDelta(t, 100, b.Tokens(), 1e-9, "capped at the burst")
	b.Refill(t0) // time going backwards changes nothing
	require.InDelta(t, 100, b.Tokens(), 1e-9)
}

// TestDebt: Take spends more than there is; the debt is paid back before
// the bucket has anything, and Wait counts it in.
func TestDebt(t *testing.T) {
	t0 := monotime.Time(0)
	b := New(t0, 1000, 10)
	b.Take(30) // 20 in debt
	require.InDelta(t, -20, b.Tokens(), 1e-9)
	require.False(t, b.Has(0))
	d := b.Wait(1)
	require.Equal(t, 21*time.Millisecond+1, d, "21 tokens at 1000/s, rounded up")
	b.Refill(t0.Add(d))
	require.True(t, b.Has(1))
	require.Zero(t, b.Wait(1))
}

func TestUnlimited(t *testing.T) {
	for _, b := range []Bucket{{}, New(5, 0, 10), New(5, -1, 10)} {
		require.False(t, b.Limited())
		b.Take(1e12)
		b.Refill(1e12)
		require.True(t, b.Has(1e12))
		require.Zero(t, b.Wait(1e12))
		require.Zero(t, b.Tokens())
	}
}

// TestSetRate: a new rate counts from the last Refill; a smaller depth
// cuts the tokens at the next Refill; a rate of 0 does not unlimit.
func TestSetRate(t *testing.T) {
	t0 := monotime.Time(0)
	b := New(t0, 1000, 1000)
	b.Take(1000)
	b.Refill(t0.Add(100 * time.Millisecond)) // 100 at the old rate
	b.SetRate(10_000, 300)
	b.Refill(t0.Add(110 * time.Millisecond)) // +100 at the new one
	require.InDelta(t, 200, b.Tokens(), 1e-9)
	b.Refill(t0.Add(time.Second))
	require.InDelta(t, 300, b.Tokens(), 1e-9, "cut to the new depth")
	b.SetRate(0, 0)
	require.True(t, b.Limited())
	require.InDelta(t, 10_000, b.Rate(), 0)
}

func TestZeroAllocs(t *testing.T) {
	b := New(0, 1e6, 1e4)
	now := monotime.Time(0)
	require.Zero(t, testing.AllocsPerRun(1000, func() {
		now += 1000
		b.Refill(now)
		if b.Wait(10) == 0 {
			b.Take(10)
		}
	}))
}
