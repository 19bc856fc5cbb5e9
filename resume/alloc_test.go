package resume

import (
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/mdbus/mdbus/subscriber"
	"github.com/stretchr/testify/require"
)

// TestLiveDeliveryAllocs pins the live path of a Consumer (delivery and
// checkpoint update, between two saves) at zero allocations.
func TestLiveDeliveryAllocs(t *testing.T) {
	cp, err := OpenCheckpoint(filepath.Join(t.TempDir(), "cp"), CheckpointConfig{Interval: time.Hour})
	require.NoError(t, err)
	n := 0
	c := &Consumer{cfg: Config{Checkpoint: cp, OnMessage: func(subscriber.Message) { n++ }}, streams: map[subscriber.StreamID]*cstream{}}
	id := subscriber.StreamID{Source: netip.MustParseAddrPort("127.0.0.1:1"), Session: sess(t, "LIVE")}
	m := subscriber.Message{Stream: id, Seq: 1, Data: []byte("x")}
	c.onLive(m) // the stream's state (live start: no catch-up)
	allocs := testing.AllocsPerRun(10_000, func() {
		m.Seq++
		c.onLive(m)
	})
	require.Zero(t, allocs)
	require.Equal(t, 10_002, n)
	_, next, ok := cp.Position(id.Session)
	require.True(t, ok)
	require.Equal(t, m.Seq+1, next)
	require.Equal(t, uint64(10_002), c.Stats().Live)
}
