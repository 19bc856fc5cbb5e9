package journal

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/wire"
)

func sinkPacket(t *testing.T, seq wire.Seq, n int) []byte {
	t.Helper()
	var enc wire.Encoder
	enc.Reset(nil, testSession, seq, wire.DefaultPayloadSizeIPv4)
	for i := range n {
		require.NoError(t, enc.Add(msgFor(nil, 4, seq+wire.Seq(i))))
	}
	return enc.Bytes()
}

// TestSink: what a publisher sends after Start is journaled as one stream
// of its session and source, ended at End; what it sent before is not.
func TestSink(t *testing.T) {
	j := openJ(t, t.TempDir(), Config{Sync: SyncNone})
	defer j.Close()
	s := NewSink(j)
	require.NoError(t, s.End(1), "End before Start does nothing")
	s.SentPacket(sinkPacket(t, 1, 2)) // no stream yet: dropped
	require.Empty(t, j.Streams())

	require.NoError(t, s.Start(testSession, testSource, 3))
	s.SentPacket(sinkPacket(t, 3, 4))
	s.SentPacket(sinkPacket(t, 7, 1))
	require.NoError(t, s.End(8))

	infos := j.Streams()
	require.Len(t, infos, 1)
	in := infos[0]
	require.Equal(t, wire.StreamID{Source: testSource, Session: testSession, Incarnation: 1}, in.ID)
	require.Equal(t, wire.Seq(3), in.First)
	require.Equal(t, wire.Seq(8), in.Next)
	require.True(t, in.Ended)
	checkStreamData(t, j, in.ID, 4, 3, 8)
}

// TestSinkLatchesAppendErrors: a packet that does not continue the stream
// is refused by the writer; End reports it.
func TestSinkLatchesAppendErrors(t *testing.T) {
	j := openJ(t, t.TempDir(), Config{Sync: SyncNone})
	defer j.Close()
	s := NewSink(j)
	require.NoError(t, s.Start(testSession, testSource, 1))
	s.SentPacket(sinkPacket(t, 5, 1)) // 1..4 never sent
	require.ErrorIs(t, s.End(6), ErrOutOfOrder)
}

// checkStreamData reads stream id and compares its records with msgFor's.
func checkStreamData(t *testing.T, j *Journal, id wire.StreamID, seed uint64, first, next wire.Seq) {
	t.Helper()
	r, err := j.OpenReader(id)
	require.NoError(t, err)
	defer r.Close()
	for seq := first; seq < next; seq++ {
		rec, err := r.Next()
		require.NoError(t, err)
		require.Equal(t, seq, rec.Seq)
		require.Equal(t, msgFor(nil, seed, seq), rec.Data)
	}
	_, err = r.Next()
	require.ErrorIs(t, err, io.EOF)
}
