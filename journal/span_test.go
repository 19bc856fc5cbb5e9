package journal

import (
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/wire"
)

// TestSpan: a span reads the records it selects, by sequence, by time or
// both, and ends with io.EOF.
func TestSpan(t *testing.T) {
	j := openJ(t, t.TempDir(), Config{Sync: SyncNone})
	defer j.Close()
	id := closedStream(t, j, 9, 100) // 1..100 at tsFor(seq)
	var info StreamInfo
	for _, in := range j.Streams() {
		info = in
	}
	for _, tc := range []struct {
		name        string
		sp          Span
		first, last wire.Seq
		records     uint64
		lastTime    int64
	}{
		{"whole stream", Span{}, 1, 100, 100, tsFor(100)},
		{"by sequence", Span{From: 10, Last: 20}, 10, 20, 11, 0},
		{"from a sequence on", Span{From: 90}, 90, 100, 11, tsFor(100)},
		{"by time", Span{FromTime: tsFor(30), ToTime: tsFor(40)}, 30, 40, 0, tsFor(40)},
		{"time between records", Span{FromTime: tsFor(30) + 1, ToTime: tsFor(40) - 1}, 31, 39, 0, tsFor(40) - 1},
		{"sequence start, time end", Span{From: 50, ToTime: tsFor(55)}, 50, 55, 0, tsFor(55)},
		{"last beyond the stream", Span{From: 95, Last: 1000}, 95, 100, 6, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := j.OpenSpan(id, tc.sp)
			require.NoError(t, err)
			defer r.Close()
			var got []wire.Seq
			for {
				rec, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
				require.Equal(t, msgFor(nil, 9, rec.Seq), rec.Data)
				got = append(got, rec.Seq)
			}
			require.NotEmpty(t, got)
			require.Equal(t, tc.first, got[0])
			require.Equal(t, tc.last, got[len(got)-1])
			require.Len(t, got, int(tc.last-tc.first)+1)
			n, lt := tc.sp.Extent(info)
			require.Equal(t, tc.records, n, "records")
			require.Equal(t, tc.lastTime, lt, "last time")
		})
	}
	_, err := j.OpenSpan(id, Span{From: 500})
	require.Error(t, err, "a start beyond the stream")
	_, err = j.OpenSpan(wire.StreamID{Session: testSession, Incarnation: 7}, Span{})
	require.ErrorIs(t, err, ErrNotFound)
}
