package synth

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSizesAndDeterminism(t *testing.T) {
	a, b := New(7), New(7)
	seen := map[byte]int{}
	var ba, bb []byte
	for range 10000 {
		ba, bb = a.Next(ba[:0]), b.Next(bb[:0])
		require.True(t, bytes.Equal(ba, bb))
		require.Equal(t, Size(ba[0]), len(ba), "type %c", ba[0])
		seen[ba[0]]++
	}
	require.Len(t, seen, 6)
	require.Greater(t, seen[AddOrder], seen[Trade])
}

func TestRandomSizes(t *testing.T) {
	r := NewRandomSizes(1, 1, 1000)
	var b []byte
	lo, hi := 1000, 0
	for range 20000 {
		b = r.Next(b[:0])
		lo, hi = min(lo, len(b)), max(hi, len(b))
	}
	require.Equal(t, 1, lo)
	require.Equal(t, 1000, hi)
}

func TestNoAllocs(t *testing.T) {
	g := New(1)
	buf := make([]byte, 0, 64)
	require.Zero(t, testing.AllocsPerRun(1000, func() { buf = g.Next(buf[:0]) }))
}
