package recorder

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/mdbus/mdbus/internal/labtest"
	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/retransmit"
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

// TestTapResumeFromBackup: a restarted tap continues the incarnation on
// disk, filling the range it missed from the second upstream when the
// first refuses.
func TestTapResumeFromBackup(t *testing.T) {
	j, err := journal.Open(t.TempDir(), journal.Config{})
	require.NoError(t, err)
	defer j.Close()
	s, _ := wire.ParseSession("RESUMED")
	id := subscriber.StreamID{Source: netip.MustParseAddrPort("127.0.0.1:5"), Session: s}
	data := func(seq wire.Seq) []byte { return fmt.Appendf(nil, "m%d", seq) }
	first := newTap(j, discard)
	for seq := wire.Seq(1); seq <= 10; seq++ {
		first.message(subscriber.Message{Stream: id, Seq: seq, Data: data(seq)})
	}
	require.NoError(t, first.close())

	cache := retransmit.NewCache(retransmit.CacheConfig{})
	for seq := wire.Seq(1); seq <= 100; seq += 10 {
		var e wire.Encoder
		e.Reset(nil, s, seq, wire.MaxPayloadSize)
		for k := range wire.Seq(10) {
			require.NoError(t, e.Add(data(seq+k)))
		}
		cache.SentPacket(e.Bytes())
	}
	srv, err := retransmit.NewServer(retransmit.ServerConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"), Sources: []retransmit.Source{cache}})
	require.NoError(t, err)
	defer srv.Close()
	deadAddr := labtest.RefusedAddr(t)

	second := newTap(j, discard)
	second.setUpstreams(deadAddr, []netip.AddrPort{srv.Addr()})
	second.message(subscriber.Message{Stream: id, Seq: 50, Data: data(50)}) // joins live at 50
	require.NoError(t, second.close())
	st, err := second.stats()
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Resumed)
	require.EqualValues(t, 39, st.Filled, "11..49 from the backup")
	streams := j.Streams()
	require.Len(t, streams, 1, "one incarnation, no hole")
	recs := readAll(t, j, streams[0].ID)
	require.Len(t, recs, 50)
	for i, r := range recs {
		require.Equal(t, string(data(wire.Seq(i+1))), string(r.Data))
	}
}
