package journal

import (
	"io"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/wire"
)

// TestPacketMarks: AppendPacket records which messages shared a packet,
// AppendMarked what the caller says, Append nothing; the marks read back
// through rotation, reopen and compression.
func TestPacketMarks(t *testing.T) {
	dir := t.TempDir()
	j := openJ(t, dir, Config{Sync: SyncNone, SegmentBytes: MinSegmentBytes})
	w, err := j.Create(testSession, testSource, 1)
	require.NoError(t, err)
	var want []PacketMark
	seq := wire.Seq(1)
	for i := range 3000 {
		n := 1 + i%9
		var enc wire.Encoder
		enc.Reset(nil, testSession, seq, wire.DefaultPayloadSizeIPv4)
		for k := range n {
			require.NoError(t, enc.Add(msgFor(nil, 5, seq+wire.Seq(k))))
			want = append(want, map[bool]PacketMark{true: PacketStart, false: PacketSame}[k == 0])
		}
		require.NoError(t, w.AppendPacket(enc.Bytes(), tsFor(seq)))
		seq += wire.Seq(n)
	}
	require.NoError(t, w.Append(seq, tsFor(seq), []byte("plain")))
	want = append(want, PacketUnknown)
	require.NoError(t, w.AppendMarked(seq+1, tsFor(seq+1), []byte("marked"), PacketSame))
	want = append(want, PacketSame)
	require.NoError(t, w.End(seq+2))
	require.NoError(t, w.Close())
	require.Greater(t, j.Streams()[0].Segments, 3)

	check := func(j *Journal) {
		r, err := j.OpenReader(w.ID())
		require.NoError(t, err)
		defer r.Close()
		for i := 0; ; i++ {
			rec, err := r.Next()
			if err == io.EOF {
				require.Equal(t, len(want), i)
				return
			}
			require.NoError(t, err)
			require.Equal(t, want[i], rec.Packet, "record %d", rec.Seq)
		}
	}
	check(j)
	require.NoError(t, j.Close())
	j = openJ(t, dir, Config{Sync: SyncNone})
	check(j)
	_, err = j.Compact()
	require.NoError(t, err)
	check(j)
	require.NoError(t, j.Close())
}

func TestInterpolate(t *testing.T) {
	const none = math.MinInt64
	for _, c := range []struct {
		lo, hi    int64
		k, n      int
		want      int64
		situation string
	}{
		{100, 400, 0, 2, 200, "first of two between"},
		{100, 400, 1, 2, 300, "second of two between"},
		{100, none, 3, 5, 100, "tail: the time before"},
		{none, 400, 0, 5, 400, "head: the time after"},
		{none, none, 0, 1, 7, "no neighbour: the default"},
		{400, 100, 0, 1, 400, "times going back: the time before"},
		{0, math.MaxInt64, 0, 1, math.MaxInt64 / 2, "no overflow"},
	} {
		require.InDelta(t, c.want, interpolate(c.lo, c.hi, c.k, c.n, 7), 1024, c.situation)
	}
}
