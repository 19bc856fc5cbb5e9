package journal

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/wire"
)

// floodResult is what a flood of random old-range re-requests cost.
type floodResult struct {
	requests            int
	answerBytes, read   uint64 // totals
	worst               float64
	p50, p99            float64 // per request read/answer
	blocks              uint64  // compressed blocks read
	blocksPerRequestMax uint64
}

// flood answers n random re-requests of stream s from j the way
// retransmit.Server does (AppendPacket per packet until the request's
// count or a 1472-byte packet's worth), measuring Stats().BytesRead per
// answered request.
func flood(t *testing.T, j *Journal, s wire.Session, n int, seed uint64) floodResult {
	t.Helper()
	first, next, ok := j.Bounds(s)
	require.True(t, ok)
	rng := rand.New(rand.NewPCG(seed, 1))
	dst := make([]byte, 0, wire.DefaultPayloadSizeIPv4)
	var res floodResult
	ratios := make([]float64, 0, n)
	for range n {
		from := first + wire.Seq(rng.Uint64N(uint64(next-first-200)))
		count := 1 + rng.IntN(100)
		before := j.Stats()
		pkt, k, err := j.AppendPacket(dst[:0], s, from, count, wire.DefaultPayloadSizeIPv4)
		require.NoError(t, err)
		require.NotZero(t, k)
		after := j.Stats()
		read := after.BytesRead - before.BytesRead
		res.requests++
		res.answerBytes += uint64(len(pkt))
		res.read += read
		res.blocks += after.Blocks - before.Blocks
		res.blocksPerRequestMax = max(res.blocksPerRequestMax, after.Blocks-before.Blocks)
		r := float64(read) / float64(len(pkt))
		ratios = append(ratios, r)
		res.worst = max(res.worst, r)
	}
	sort.Float64s(ratios)
	res.p50, res.p99 = ratios[len(ratios)/2], ratios[len(ratios)*99/100]
	return res
}

func (r floodResult) String() string {
	return fmt.Sprintf("%d requests: %d bytes read for %d answered (%.2fx), per request p50 %.2fx p99 %.2fx max %.2fx, blocks per request %.2f, max %d",
		r.requests, r.read, r.answerBytes, float64(r.read)/float64(r.answerBytes), r.p50, r.p99, r.worst,
		float64(r.blocks)/float64(r.requests), r.blocksPerRequestMax)
}

// TestRereadsBounded floods the journal's retransmit.Source path with
// 10,000 random old-range re-requests: what a request reads from a plain
// segment stays within twice what it answers, and from a compressed
// segment within one block, with indexes built by the writer, and after
// a reopen once the one-time index scan of each sealed segment is done.
func TestRereadsBounded(t *testing.T) {
	dir := t.TempDir()
	j := openJ(t, dir, Config{Sync: SyncNone, SegmentBytes: 1 << 20})
	w, err := j.Create(testSession, testSource, 1)
	require.NoError(t, err)
	appendN(t, w, 7, 100_000) // 20-100 byte messages, ~8.7 MB in 9 segments
	require.NoError(t, w.End(w.Next()))
	require.NoError(t, w.Close())

	check := func(name string, j *Journal) {
		res := flood(t, j, testSession, 10_000, 1)
		t.Logf("%s: %s", name, res)
		require.LessOrEqual(t, float64(res.read), 2*float64(res.answerBytes), name)
		require.LessOrEqual(t, res.p99, 2.0, name)
	}
	check("written by this journal", j)
	require.NoError(t, j.Close())

	j = openJ(t, dir, Config{ReadOnly: true})
	before := j.Stats().BytesRead
	for _, s := range j.Streams() {
		r, err := j.OpenReader(s.ID)
		require.NoError(t, err)
		for seq := s.First; seq < s.Next; seq += 10_000 {
			require.NoError(t, r.SeekSeq(seq))
		}
		require.NoError(t, r.Close())
	}
	t.Logf("reopened: indexing the sealed segments read %d bytes once", j.Stats().BytesRead-before)
	check("reopened", j)
	require.NoError(t, j.Close())

	j = openJ(t, dir, Config{Sync: SyncNone})
	n, err := j.Compact()
	require.NoError(t, err)
	require.NotZero(t, n)
	res := flood(t, j, testSession, 10_000, 2)
	t.Logf("compressed: %s", res)
	// A request reads only the blocks holding what it answers: one,
	// or the next ones too when its range crosses a block boundary (a
	// segment's last block may be small, so three at a segment's end).
	require.LessOrEqual(t, float64(res.blocks)/float64(res.requests), 1.2)
	require.LessOrEqual(t, res.blocksPerRequestMax, uint64(3))
	require.NoError(t, j.Close())
}
