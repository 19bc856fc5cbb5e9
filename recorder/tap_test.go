package recorder

import (
	"net/netip"
	"testing"

	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// TestTapAllocs pins the journaling path of a delivered message at zero
// allocations.
func TestTapAllocs(t *testing.T) {
	j, err := journal.Open(t.TempDir(), journal.Config{Sync: journal.SyncNone})
	require.NoError(t, err)
	defer j.Close()
	tp := newTap(j, discard)
	s, _ := wire.ParseSession("ALLOC")
	m := subscriber.Message{Stream: subscriber.StreamID{Source: netip.MustParseAddrPort("127.0.0.1:5"), Session: s}, Seq: 1, Data: make([]byte, 64)}
	tp.message(m) // creates the incarnation
	allocs := testing.AllocsPerRun(10_000, func() {
		m.Seq++
		tp.message(m)
	})
	require.Zero(t, allocs)
	st, err := tp.stats()
	require.NoError(t, err)
	require.Equal(t, uint64(10_002), st.Messages)
	require.NoError(t, tp.close())
}

// TestTapRestartAndLoss: a sequence that restarts, or skips a range the
// subscriber declared lost, starts a new incarnation; the journal never
// holds a hole.
func TestTapRestartAndLoss(t *testing.T) {
	j, err := journal.Open(t.TempDir(), journal.Config{})
	require.NoError(t, err)
	defer j.Close()
	tp := newTap(j, discard)
	s, _ := wire.ParseSession("HOLES")
	id := subscriber.StreamID{Source: netip.MustParseAddrPort("127.0.0.1:5"), Session: s}
	for _, seq := range []wire.Seq{1, 2, 3, 7, 8, 1, 2} {
		tp.message(subscriber.Message{Stream: id, Seq: seq, Data: []byte{byte(seq)}})
	}
	require.NoError(t, tp.close())
	st, err := tp.stats()
	require.NoError(t, err)
	require.Equal(t, TapStats{Messages: 7, Bytes: 7, Incarnations: 3, Restarts: 2}, st)
	var got [][2]wire.Seq
	for _, si := range j.Streams() {
		got = append(got, [2]wire.Seq{si.First, si.Next})
	}
	require.Equal(t, [][2]wire.Seq{{1, 4}, {7, 9}, {1, 3}}, got)
}
