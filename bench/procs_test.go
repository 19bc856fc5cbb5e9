package bench

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPublisherSideRestores checks that overlapping runs with subscriber
// processes give this process Config.PubProcs processors and that the
// last to end restores the count it found.
func TestPublisherSideRestores(t *testing.T) {
	prev := runtime.GOMAXPROCS(2)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	b := &Bench{s: settings{Config: Config{PubProcs: 1}}}
	b.publisherSide(false)()
	require.Equal(t, 2, runtime.GOMAXPROCS(0), "subscribers in this process: left alone")
	end1 := b.publisherSide(true)
	require.Equal(t, 1, runtime.GOMAXPROCS(0))
	end2 := b.publisherSide(true)
	end1()
	require.Equal(t, 1, runtime.GOMAXPROCS(0), "a run is still going")
	end2()
	require.Equal(t, 2, runtime.GOMAXPROCS(0))
	(&Bench{s: settings{Config: Config{PubProcs: -1}}}).publisherSide(true)()
	require.Equal(t, 2, runtime.GOMAXPROCS(0), "negative: left alone")
}

// TestProcsBounded: the Go runtime allocates per processor and does not
// bound the count, so the configurations do.
func TestProcsBounded(t *testing.T) {
	_, err := Config{SubProcs: MaxProcs + 1}.withDefaults()
	require.ErrorContains(t, err, "at most 1024 Go processors")
	_, err = Config{PubProcs: 1 << 30}.withDefaults()
	require.ErrorContains(t, err, "at most 1024 Go processors")
	_, err = GroupConfig{Subs: 1, Count: 1, Rate: 1, Size: 8, Procs: MaxProcs + 1}.withDefaults()
	require.ErrorContains(t, err, "at most 1024 Go processors")
}
