package oneway

import (
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/synth"
	"github.com/stretchr/testify/require"
)

func TestStampLatency(t *testing.T) {
	g := synth.New(1)
	sent := time.Date(2026, 11, 30, 14, 0, 0, 123456789, time.UTC)
	for range 100 {
		msg := g.Next(nil)
		require.True(t, Stamp(msg, sent))
		d, ok := Latency(msg, sent.Add(37*time.Microsecond), time.Second)
		require.True(t, ok)
		require.Equal(t, 37*time.Microsecond, d)
		_, ok = Latency(msg, sent.Add(-time.Microsecond), time.Second)
		require.False(t, ok, "negative")
		_, ok = Latency(msg, sent.Add(2*time.Second), time.Second)
		require.False(t, ok, "beyond max")
	}
	// Across midnight.
	msg := g.Next(nil)
	before := time.Date(2026, 11, 30, 23, 59, 59, 999_990_000, time.UTC)
	require.True(t, Stamp(msg, before))
	d, ok := Latency(msg, before.Add(20*time.Microsecond), time.Second)
	require.True(t, ok)
	require.Equal(t, 20*time.Microsecond, d)
	// Not ITCH.
	require.False(t, Stamp([]byte("hello"), before))
	_, ok = Latency([]byte("hello"), before, time.Second)
	require.False(t, ok)
	_, ok = Latency(nil, before, time.Second)
	require.False(t, ok)
}

func TestRecorder(t *testing.T) {
	g := synth.New(2)
	r := NewRecorder()
	base := time.Now()
	msgs := make([][]byte, 1000)
	for i := range msgs {
		msgs[i] = g.Next(nil)
		Stamp(msgs[i], base)
	}
	for i, m := range msgs {
		r.Record(m, base.Add(time.Duration(i+1)*time.Microsecond))
	}
	r.Record([]byte("x"), base)
	s := r.Interval()
	require.Equal(t, uint64(1000), s.Count)
	require.Equal(t, uint64(1), s.Unstamped)
	require.InDelta(t, 500e3, float64(s.P50), 2e3)
	require.InDelta(t, 990e3, float64(s.P99), 2e3)
	require.InDelta(t, 1000e3, float64(s.Max), 2e3)
	require.Contains(t, s.String(), "p50 500µs")
	require.Zero(t, r.Interval().Count)
	require.Equal(t, uint64(1000), r.Total().Count)
	n := testing.AllocsPerRun(1000, func() { r.Record(msgs[0], base.Add(time.Millisecond)) })
	require.Zero(t, n)
}

// The bench stamp's bytes are a payload format other programs read
// (bench's tests cover the round trip through bench.PutStamp).
func TestBenchStampLayout(t *testing.T) {
	msg := make([]byte, BenchStampLen)
	PutBenchStamp(msg, 123456789, 42)
	require.Equal(t, []byte{0, 0, 0, 0, 0x07, 0x5b, 0xcd, 0x15, 0, 0, 0, 0, 0, 0, 0, 42}, msg, "big-endian time, then sequence")
}
