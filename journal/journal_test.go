package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/mdbus/mdbus/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	testSession = mustSession("JTEST00001")
	testSource  = netip.MustParseAddrPort("127.0.0.1:5000")
)

func mustSession(s string) wire.Session {
	sess, err := wire.ParseSession(s)
	if err != nil {
		panic(err)
	}
	return sess
}

// msgFor is the deterministic message of sequence seq: 20 to 100 bytes.
func msgFor(dst []byte, seed uint64, seq wire.Seq) []byte {
	x := seed*0x9E3779B97F4A7C15 ^ uint64(seq)
	next := func() uint64 { // splitmix64
		x += 0x9E3779B97F4A7C15
		z := x
		z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
		z = (z ^ z>>27) * 0x94D049BB133111EB
		return z ^ z>>31
	}
	n := 20 + int(next()%81)
	dst = dst[:0]
	for len(dst) < n {
		dst = binary.LittleEndian.AppendUint64(dst, next())
	}
	return dst[:n]
}

func tsFor(seq wire.Seq) int64 { return 1_700_000_000_000_000_000 + int64(seq)*1000 }

func openJ(t testing.TB, dir string, cfg Config) *Journal {
	t.Helper()
	j, err := Open(dir, cfg)
	require.NoError(t, err)
	return j
}

// closedStream writes n messages of seed (appendN) to a new stream of
// testSession from sequence 1, closes its writer and returns its ID.
func closedStream(t testing.TB, j *Journal, seed uint64, n int) StreamID {
	t.Helper()
	w, err := j.Create(testSession, testSource, 1)
	require.NoError(t, err)
	appendN(t, w, seed, n)
	require.NoError(t, w.Close())
	return w.ID()
}

func appendN(t testing.TB, w *Writer, seed uint64, n int) {
	t.Helper()
	var buf []byte
	for range n {
		seq := w.Next()
		buf = msgFor(buf, seed, seq)
		require.NoError(t, w.Append(seq, tsFor(seq), buf))
	}
}

// checkStream reads the whole stream and compares every record with the
// generator's.
func checkStream(t testing.TB, j *Journal, id StreamID, seed uint64, first, next wire.Seq) {
	t.Helper()
	r, err := j.OpenReader(id)
	require.NoError(t, err)
	defer r.Close()
	var buf []byte
	want := first
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		buf = msgFor(buf, seed, want)
		if rec.Seq != want || !bytes.Equal(buf, rec.Data) || rec.Time != tsFor(want) {
			t.Fatalf("record %d: got seq %d time %d data %x, want time %d data %x",
				want, rec.Seq, rec.Time, rec.Data, tsFor(want), buf)
		}
		want++
	}
	require.Equal(t, next, want)
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	j := openJ(t, dir, Config{Sync: SyncNone, SegmentBytes: MinSegmentBytes})
	w, err := j.Create(testSession, testSource, 5)
	require.NoError(t, err)
	require.Equal(t, StreamID{Session: testSession, Source: testSource, Incarnation: 1}, w.ID())
	appendN(t, w, 1, 20000)
	require.ErrorIs(t, w.Append(3, 0, []byte("x")), ErrOutOfOrder)
	require.NoError(t, w.Sync())
	require.Equal(t, wire.Seq(20005), w.Durable())
	checkStream(t, j, w.ID(), 1, 5, 20005) // while the writer is open
	require.NoError(t, w.Close())
	require.ErrorIs(t, w.Close(), ErrClosed)
	infos := j.Streams()
	require.Len(t, infos, 1)
	require.Equal(t, wire.Seq(5), infos[0].First)
	require.Equal(t, wire.Seq(20005), infos[0].Next)
	require.Greater(t, infos[0].Segments, 3, "rotation by size")
	require.Equal(t, tsFor(5), infos[0].FirstTime)
	require.Equal(t, tsFor(20004), infos[0].LastTime)
	require.NoError(t, j.Close())
	require.ErrorIs(t, j.Close(), ErrClosed)

	// Reopen: same content; resume and continue.
	j = openJ(t, dir, Config{SegmentBytes: MinSegmentBytes})
	defer j.Close()
	id, ok := j.Latest(testSession, netip.AddrPort{})
	require.True(t, ok)
	require.Empty(t, j.TornTails())
	checkStream(t, j, id, 1, 5, 20005)
	w, err = j.Resume(id)
	require.NoError(t, err)
	_, err = j.Resume(id)
	require.ErrorIs(t, err, ErrBusy)
	appendN(t, w, 1, 100)
	require.NoError(t, w.End(w.Next()))
	require.ErrorIs(t, w.Append(w.Next(), 0, nil), ErrEnded)
	require.NoError(t, w.Close())
	checkStream(t, j, id, 1, 5, 20105)
	require.True(t, j.Streams()[0].Ended)
	_, err = j.Resume(id)
	require.ErrorIs(t, err, ErrEnded)

	// A second incarnation.
	w2, err := j.Create(testSession, testSource, 1)
	require.NoError(t, err)
	require.Equal(t, uint32(2), w2.ID().Incarnation)
	require.NoError(t, w2.Close())
	id2, _ := j.Latest(testSession, testSource)
	require.Equal(t, uint32(2), id2.Incarnation)
}

func TestSeek(t *testing.T) {
	dir := t.TempDir()
	j := openJ(t, dir, Config{Sync: SyncNone, SegmentBytes: MinSegmentBytes})
	defer j.Close()
	w, err := j.Create(testSession, testSource, 1)
	require.NoError(t, err)
	appendN(t, w, 2, 30000)
	require.NoError(t, w.Close())
	for _, reopen := range []bool{false, true} {
		if reopen { // indexes rebuilt from disk
			require.NoError(t, j.Close())
			j = openJ(t, dir, Config{ReadOnly: true})
		}
		seekChecks(t, j, w.ID())
	}
}

func TestAppendPacket(t *testing.T) {
	j := openJ(t, t.TempDir(), Config{Sync: SyncNone})
	defer j.Close()
	w, err := j.Create(testSession, netip.AddrPort{}, 10)
	require.NoError(t, err)
	pkt := func(seq wire.Seq, n int) []byte {
		var enc wire.Encoder
		enc.Reset(nil, testSession, seq, wire.DefaultPayloadSizeIPv4)
		for i := range n {
			require.NoError(t, enc.Add(msgFor(nil, 3, seq+wire.Seq(i))))
		}
		return enc.Bytes()
	}
	require.NoError(t, w.AppendPacket(pkt(10, 5), 7))
	require.NoError(t, w.AppendPacket(pkt(12, 5), 7)) // 12..14 held, 15, 16 new
	require.ErrorIs(t, w.AppendPacket(pkt(20, 1), 7), ErrOutOfOrder)
	require.NoError(t, w.AppendPacket(wire.AppendHeartbeat(nil, testSession, 17), 7))
	w.SentPacket(pkt(17, 3))
	require.NoError(t, w.Err())
	require.Equal(t, wire.Seq(20), w.Next())

	// The journal as a retransmit.Source.
	first, next, ok := j.Bounds(testSession)
	require.True(t, ok)
	require.Equal(t, wire.Seq(10), first)
	require.Equal(t, wire.Seq(20), next)
	_, _, ok = j.Bounds(mustSession("OTHER"))
	require.False(t, ok)
	dst := make([]byte, 0, wire.DefaultPayloadSizeIPv4)
	out, n, err := j.AppendPacket(dst, testSession, 12, 4, wire.DefaultPayloadSizeIPv4)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Equal(t, pkt(12, 4), out)
	out, n, err = j.AppendPacket(dst, testSession, 16, 100, wire.DefaultPayloadSizeIPv4)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Equal(t, pkt(16, 4), out)
	out, n, err = j.AppendPacket(dst, testSession, 20, 100, wire.DefaultPayloadSizeIPv4)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Empty(t, out)
	_, _, err = j.AppendPacket(dst, testSession, 10, 10, wire.MinPayloadSize)
	require.ErrorIs(t, err, wire.ErrMessageTooLarge)
	allocs := testing.AllocsPerRun(200, func() {
		_, _, _ = j.AppendPacket(dst, testSession, 11, 3, wire.DefaultPayloadSizeIPv4)
		_, _, _ = j.AppendPacket(dst, testSession, 14, 3, wire.DefaultPayloadSizeIPv4)
	})
	require.Zero(t, allocs)
	require.NoError(t, w.End(20))
	require.NoError(t, w.Close())
}

func TestAppendAllocs(t *testing.T) {
	for _, p := range []SyncPolicy{SyncNone, SyncInterval} {
		t.Run(fmt.Sprint(p), func(t *testing.T) {
			j := openJ(t, t.TempDir(), Config{Sync: p, SegmentBytes: MinSegmentBytes * 4})
			defer j.Close()
			w, err := j.Create(testSession, testSource, 1)
			require.NoError(t, err)
			msg := make([]byte, 64)
			var enc wire.Encoder
			pkt := make([]byte, 0, wire.DefaultPayloadSizeIPv4)
			allocs := testing.AllocsPerRun(5000, func() {
				require.NoError(t, w.Append(w.Next(), 1, msg))
			})
			require.Zero(t, allocs)
			allocs = testing.AllocsPerRun(500, func() {
				enc.Reset(pkt[:0], testSession, w.Next(), wire.DefaultPayloadSizeIPv4)
				for enc.Add(msg) == nil {
				}
				require.NoError(t, w.AppendPacket(enc.Bytes(), 1))
			})
			require.Zero(t, allocs)
			require.NoError(t, w.Close())
		})
	}
}

// lastRecordOff returns the offset of the last record of a segment.
func lastRecordOff(t *testing.T, path string) (last, size int64) {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	off := int64(SegmentHeaderLen)
	for off < int64(len(b)) {
		fr, st := decodeFrame(b[off:])
		require.Equal(t, frameOK, st)
		last = off
		off += int64(fr.n)
	}
	return last, int64(len(b))
}

func newestSeg(t *testing.T, j *Journal, id StreamID) string {
	st := j.find(id)
	require.NotNil(t, st)
	return st.segs[len(st.segs)-1].path
}

// TestTornTail cuts the newest record at every byte, and zero-fills a
// tail: Open truncates to the last whole record and appending goes on.
func TestTornTail(t *testing.T) {
	base := t.TempDir()
	j := openJ(t, base, Config{Sync: SyncNone})
	id := closedStream(t, j, 4, 50)
	path := newestSeg(t, j, id)
	require.NoError(t, j.Close())
	orig, err := os.ReadFile(path)
	require.NoError(t, err)
	last, size := lastRecordOff(t, path)

	type variant struct {
		name string
		data []byte
		cut  int64 // expected size after recovery
		next wire.Seq
	}
	var vs []variant
	for n := last + 1; n < size; n++ { // a partial last record (n == last is a clean end)
		vs = append(vs, variant{fmt.Sprintf("truncated at %d", n), orig[:n], last, 50})
	}
	zeros := append(append([]byte(nil), orig...), make([]byte, 8192)...)
	vs = append(vs, variant{"zero-filled tail", zeros, size, 51})
	partZero := append(append([]byte(nil), orig[:last+5]...), make([]byte, 4096)...)
	vs = append(vs, variant{"partial record then zeros", partZero, last, 50})
	garbage := append([]byte(nil), orig...)
	for i := last + RecordHeaderLen + 3; i < size; i++ {
		garbage[i] = 0xEE // the last record's body never reached the disk whole
	}
	vs = append(vs, variant{"garbled last record", garbage, last, 50})
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			dir := t.TempDir()
			sdir := filepath.Join(dir, streamDirName(id))
			require.NoError(t, os.Mkdir(sdir, 0o755))
			p := filepath.Join(sdir, filepath.Base(path))
			require.NoError(t, os.WriteFile(p, v.data, 0o644))
			j := openJ(t, dir, Config{Sync: SyncNone})
			defer j.Close()
			require.Equal(t, []TornTail{{Path: p, Offset: v.cut, Bytes: int64(len(v.data)) - v.cut}}, j.TornTails())
			fi, err := os.Stat(p)
			require.NoError(t, err)
			require.Equal(t, v.cut, fi.Size())
			checkStream(t, j, id, 4, 1, v.next)
			w, err := j.Resume(id)
			require.NoError(t, err)
			require.Equal(t, v.next, w.Next())
			appendN(t, w, 4, 10)
			require.NoError(t, w.Close())
			checkStream(t, j, id, 4, 1, v.next+10)
		})
	}
}

// TestCorruptMidSegment flips one byte of an early record: readers stop
// there with a *CorruptError naming file and offset, never returning it.
func TestCorruptMidSegment(t *testing.T) {
	for _, sealed := range []bool{false, true} {
		t.Run(fmt.Sprintf("sealed=%v", sealed), func(t *testing.T) {
			dir := t.TempDir()
			j := openJ(t, dir, Config{Sync: SyncNone, SegmentBytes: MinSegmentBytes})
			id := closedStream(t, j, 5, 8000)
			st := j.find(id)
			require.Greater(t, len(st.segs), 1)
			seg := st.segs[len(st.segs)-1]
			if sealed {
				seg = st.segs[0]
			}
			require.NoError(t, j.Close())
			written, err := os.Stat(seg.path)
			require.NoError(t, err)
			off := flipMessageByte(t, seg.path, 100) // the record of seg.first+100

			j = openJ(t, dir, Config{})
			defer j.Close()
			require.Empty(t, j.TornTails())
			r, got := readToCorrupt(t, j, id, seg.path, off, func(rec Record) {
				require.Equal(t, msgFor(nil, 5, rec.Seq), rec.Data)
			})
			require.Equal(t, seg.first+99, got, "stopped right before the bad record")
			_, err = r.Next()
			require.ErrorIs(t, err, ErrCorrupt, "sticky")
			require.NoError(t, r.SeekSeq(seg.first+99))
			rec, err := r.Next()
			require.NoError(t, err)
			require.Equal(t, seg.first+99, rec.Seq)
			_, err = r.Next()
			require.ErrorIs(t, err, ErrCorrupt, "after a seek too")
			if !sealed {
				_, err := j.Resume(id)
				require.ErrorIs(t, err, ErrCorrupt, "no appends after corruption in the newest segment")
				fi, err := os.Stat(seg.path)
				require.NoError(t, err)
				require.Equal(t, written.Size(), fi.Size(), "acknowledged data never cut")
			}
		})
	}
}

func TestHugeLength(t *testing.T) {
	b := make([]byte, 64)
	binary.LittleEndian.PutUint32(b, 0xFFFFFFFF)
	binary.LittleEndian.PutUint32(b[4:], 0x12345678)
	_, st := decodeFrame(b)
	require.Equal(t, frameBadLen, st)
	allocs := testing.AllocsPerRun(100, func() { decodeFrame(b) })
	require.Zero(t, allocs)

	// In a sealed segment: corruption, reported without allocating 4 GiB.
	dir := t.TempDir()
	j := openJ(t, dir, Config{Sync: SyncNone})
	id := closedStream(t, j, 6, 10)
	path := newestSeg(t, j, id)
	require.NoError(t, j.Close())
	rewrite(t, path, func(b []byte) { binary.LittleEndian.PutUint32(b[SegmentHeaderLen:], 0xFFFFFFFF) })
	j = openJ(t, dir, Config{})
	defer j.Close()
	_, last := readToCorrupt(t, j, id, path, SegmentHeaderLen, nil)
	require.Zero(t, last, "the first record is the bad one")
}

func TestOtherSession(t *testing.T) {
	dir := t.TempDir()
	j := openJ(t, dir, Config{Sync: SyncNone})
	a, err := j.Create(testSession, testSource, 1)
	require.NoError(t, err)
	appendN(t, a, 7, 3)
	require.NoError(t, a.Close())
	b, err := j.Create(mustSession("OTHER"), testSource, 1000)
	require.NoError(t, err)
	appendN(t, b, 7, 3)
	require.NoError(t, b.Close())
	from := newestSeg(t, j, b.ID())
	to := filepath.Join(filepath.Dir(newestSeg(t, j, a.ID())), filepath.Base(from))
	require.NoError(t, j.Close())
	require.NoError(t, os.Rename(from, to))
	_, err = Open(dir, Config{})
	require.ErrorIs(t, err, ErrSession)
	require.Contains(t, err.Error(), to)
	require.Contains(t, err.Error(), `"OTHER"`)
}

func TestReadOnlyDir(t *testing.T) {
	if os.Geteuid() == 0 {
		// root ignores permission bits; a read-only file system stands in.
		_, err := Open("/proc/mdbus-journal", Config{})
		require.Error(t, err)
		require.Contains(t, err.Error(), "/proc/mdbus-journal")
		t.Skip("running as root: directory permissions do not apply")
	}
	dir := t.TempDir()
	j := openJ(t, dir, Config{})
	require.NoError(t, j.Close())
	require.NoError(t, os.Chmod(dir, 0o555))
	defer os.Chmod(dir, 0o755)
	j = openJ(t, dir, Config{})
	defer j.Close()
	_, err := j.Create(testSession, testSource, 1)
	require.ErrorIs(t, err, os.ErrPermission)
	require.Contains(t, err.Error(), "writable")
}

// TestRemovedDir deletes the journal under a running writer: appends and
// syncs fail with a clear, latched error, and nothing panics.
func TestRemovedDir(t *testing.T) {
	dir := t.TempDir()
	j := openJ(t, dir, Config{SyncInterval: 1e6, SegmentBytes: MinSegmentBytes})
	defer j.Close()
	w, err := j.Create(testSession, testSource, 1)
	require.NoError(t, err)
	appendN(t, w, 8, 100)
	require.NoError(t, os.RemoveAll(dir))
	var failed error
	var buf []byte
	for i := 0; i < 200000 && failed == nil; i++ {
		buf = msgFor(buf, 8, w.Next())
		failed = w.Append(w.Next(), 0, buf) // rotation cannot create a segment
		if failed == nil && i%1000 == 0 {
			failed = w.Sync()
		}
	}
	require.Error(t, failed)
	require.Contains(t, failed.Error(), "removed")
	require.ErrorIs(t, w.Err(), failed)
	require.Error(t, w.Append(w.Next(), 0, buf))
	require.Error(t, w.Close())
}

func TestErrors(t *testing.T) {
	err := error(&CorruptError{Path: "/x/1.seg", Offset: 4096, Reason: "CRC-32C mismatch"})
	require.True(t, errors.Is(err, ErrCorrupt))
	require.True(t, IsCorrupt(fmt.Errorf("wrap: %w", err)))
	require.Equal(t, "journal: corrupt record in /x/1.seg at offset 4096: CRC-32C mismatch", err.Error())
}

// seekChecks seeks a stream of 30000 messages of seed 2 from sequence 1.
func seekChecks(t *testing.T, j *Journal, id StreamID) {
	t.Helper()
	r, err := j.OpenReader(id)
	require.NoError(t, err)
	for _, seq := range []wire.Seq{1, 2, 17, 4095, 12345, 29999, 30000, 5} {
		require.NoError(t, r.SeekSeq(seq))
		rec, err := r.Next()
		require.NoError(t, err)
		require.Equal(t, seq, rec.Seq)
		require.Equal(t, msgFor(nil, 2, seq), rec.Data)
	}
	require.NoError(t, r.SeekSeq(30001))
	_, err = r.Next()
	require.Equal(t, io.EOF, err)
	require.ErrorIs(t, r.SeekSeq(30002), ErrNotFound)
	require.ErrorIs(t, r.SeekSeq(0), ErrNotFound)
	for _, seq := range []wire.Seq{1, 100, 20000, 30000} {
		require.NoError(t, r.SeekTime(tsFor(seq)-1))
		rec, err := r.Next()
		require.NoError(t, err)
		require.Equal(t, seq, rec.Seq)
	}
	require.NoError(t, r.SeekTime(tsFor(30000)+1))
	_, err = r.Next()
	require.Equal(t, io.EOF, err)
	require.NoError(t, r.Close())
}

func TestCompress(t *testing.T) {
	dir := t.TempDir()
	j := openJ(t, dir, Config{Sync: SyncNone, SegmentBytes: MinSegmentBytes, BlockBytes: 8 << 10})
	w, err := j.Create(testSession, testSource, 1)
	require.NoError(t, err)
	appendN(t, w, 2, 30000)
	id := w.ID()
	n, err := j.Compact()
	require.NoError(t, err)
	in := j.Streams()[0]
	require.Equal(t, in.Segments-1, n)
	require.Equal(t, n, in.Compressed)
	checkStream(t, j, id, 2, 1, 30001) // while the writer is open
	appendN(t, w, 2, 0)
	require.NoError(t, w.Close())
	seekChecks(t, j, id)
	require.NoError(t, j.Close())

	// Reopened: the compressed segments read back the same.
	j = openJ(t, dir, Config{})
	checkStream(t, j, id, 2, 1, 30001)
	seekChecks(t, j, id)
	in = j.Streams()[0]
	require.Equal(t, n, in.Compressed)
	require.Equal(t, tsFor(1), in.FirstTime)
	first := j.find(id).segs[0]
	require.True(t, first.zstd)
	require.NoError(t, j.Close())

	// A flipped byte in a compressed block: a CorruptError naming the file.
	boff := first.idx[1].off
	rewrite(t, first.path, func(b []byte) { b[boff+blockHdrLen+10] ^= 0x10 })
	j = openJ(t, dir, Config{})
	defer j.Close()
	_, last := readToCorrupt(t, j, id, first.path, boff, nil)
	require.Equal(t, first.idx[1].seq-1, last)
}

func TestBackgroundCompression(t *testing.T) {
	j := openJ(t, t.TempDir(), Config{Sync: SyncNone, SegmentBytes: MinSegmentBytes, Compress: true})
	defer j.Close()
	id := closedStream(t, j, 2, 30000)
	assert.Eventually(t, func() bool { in := j.Streams()[0]; return in.Compressed == in.Segments-1 }, 30*time.Second, 10*time.Millisecond)
	in := j.Streams()[0]
	require.Equal(t, in.Segments-1, in.Compressed)
	checkStream(t, j, id, 2, 1, 30001)
}

func TestRetention(t *testing.T) {
	t.Run("bytes", func(t *testing.T) {
		j := openJ(t, t.TempDir(), Config{Sync: SyncNone, SegmentBytes: MinSegmentBytes, RetainBytes: 3 * MinSegmentBytes})
		defer j.Close()
		w, err := j.Create(testSession, testSource, 1)
		require.NoError(t, err)
		appendN(t, w, 2, 50000)
		in := j.Streams()[0]
		// Checked when a segment is sealed: the sealed ones hold at most
		// RetainBytes, the newest grows on top.
		segs, err := j.Segments(in.ID)
		require.NoError(t, err)
		var sealed int64
		for _, s := range segs[:len(segs)-1] {
			sealed += s.Bytes
		}
		require.LessOrEqual(t, sealed, int64(3*MinSegmentBytes))
		require.Greater(t, in.First, wire.Seq(1))
		require.Equal(t, wire.Seq(50001), in.Next)
		checkStream(t, j, w.ID(), 2, in.First, 50001)
		require.NoError(t, w.Close())
	})
	t.Run("age", func(t *testing.T) {
		j := openJ(t, t.TempDir(), Config{Sync: SyncNone, SegmentBytes: MinSegmentBytes, RetainAge: time.Hour})
		defer j.Close()
		w, err := j.Create(testSession, testSource, 1)
		require.NoError(t, err)
		appendN(t, w, 2, 20000) // timestamps from 2023: all old
		in := j.Streams()[0]
		require.Equal(t, 1, in.Segments, "every sealed segment is older than an hour")
		checkStream(t, j, w.ID(), 2, in.First, 20001)
		require.NoError(t, w.Close())
	})
}

// flipMessageByte flips a byte in the message of the k-th record of an
// uncompressed segment and returns the record's offset.
func flipMessageByte(t *testing.T, path string, k int) int64 {
	off := int64(SegmentHeaderLen)
	rewrite(t, path, func(b []byte) {
		for range k {
			fr, st := decodeFrame(b[off:])
			require.Equal(t, frameOK, st)
			off += int64(fr.n)
		}
		b[off+RecordHeaderLen+msgFixedLen+1] ^= 0x01
	})
	return off
}

// rewrite applies change to the bytes of the file at path, in place.
func rewrite(t *testing.T, path string, change func(b []byte)) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	change(b)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// readToCorrupt reads id from its start, calling each (when set) on every
// record, until the reader reports corruption, which must be a
// *CorruptError matching ErrCorrupt that names path and offset off. It
// returns the reader (closed when the test ends) and the last sequence
// read, 0 for none.
func readToCorrupt(t *testing.T, j *Journal, id StreamID, path string, off int64, each func(Record)) (*Reader, wire.Seq) {
	t.Helper()
	r, err := j.OpenReader(id)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	var last wire.Seq
	for {
		rec, err := r.Next()
		if err != nil {
			var ce *CorruptError
			require.ErrorAs(t, err, &ce)
			require.ErrorIs(t, err, ErrCorrupt)
			require.Equal(t, path, ce.Path)
			require.Equal(t, off, ce.Offset)
			require.Contains(t, err.Error(), path)
			return r, last
		}
		if each != nil {
			each(rec)
		}
		last = rec.Seq
	}
}

func TestVerifyRepair(t *testing.T) {
	for _, c := range []struct {
		name    string
		compact bool
	}{{"plain", false}, {"compressed", true}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			j := openJ(t, dir, Config{Sync: SyncNone, SegmentBytes: MinSegmentBytes})
			id := closedStream(t, j, 9, 10000)
			if c.compact {
				_, err := j.Compact()
				require.NoError(t, err)
			}
			segs, err := j.Segments(id)
			require.NoError(t, err)
			require.Greater(t, len(segs), 2)
			require.NoError(t, j.Close())

			// Damage the newest segment (uncompressed) and a sealed one.
			offNewest := flipMessageByte(t, segs[len(segs)-1].Path, 7)
			sealed := segs[1]
			var sealedOff int64
			if c.compact {
				sealedOff = int64(SegmentHeaderLen)
				rewrite(t, sealed.Path, func(b []byte) { b[sealedOff+blockHdrLen+40] ^= 0x20 }) // the first block
			} else {
				sealedOff = flipMessageByte(t, sealed.Path, 30)
			}

			j = openJ(t, dir, Config{})
			defer j.Close()
			bad, err := j.Verify(id)
			require.NoError(t, err)
			require.Len(t, bad, 2)
			require.Equal(t, sealed.Path, bad[0].Path)
			require.Equal(t, sealedOff, bad[0].Offset)
			require.Equal(t, segs[len(segs)-1].Path, bad[1].Path)
			require.Equal(t, offNewest, bad[1].Offset)
			_, err = j.Resume(id)
			require.ErrorIs(t, err, ErrCorrupt)

			var asked []Range
			filled, err := j.Repair(id, func(r Range) ([][]byte, error) {
				asked = append(asked, r)
				var out [][]byte
				for s := r.From; s < r.To; s++ {
					out = append(out, msgFor(nil, 9, s))
				}
				return out, nil
			})
			require.NoError(t, err)
			require.Equal(t, asked, filled)
			require.Len(t, filled, 2)
			if !c.compact {
				require.Equal(t, Range{sealed.First + 30, sealed.First + 31}, filled[0])
			}
			require.Equal(t, Range{segs[len(segs)-1].First + 7, segs[len(segs)-1].First + 8}, filled[1])
			bad, err = j.Verify(id)
			require.NoError(t, err)
			require.Empty(t, bad)
			// Repaired messages are timed evenly between their neighbours:
			// the records are evenly spaced here, so exactly as written.
			r, err := j.OpenReader(id)
			require.NoError(t, err)
			for seq := wire.Seq(1); seq <= 10000; seq++ {
				rec, err := r.Next()
				require.NoError(t, err)
				if rec.Seq != seq || !bytes.Equal(rec.Data, msgFor(nil, 9, seq)) || rec.Time != tsFor(seq) {
					t.Fatalf("record %d wrong after repair: seq %d time %d (want %d)", seq, rec.Seq, rec.Time, tsFor(seq))
				}
			}
			_, err = r.Next()
			require.Equal(t, io.EOF, err)
			require.NoError(t, r.Close())
			w, err := j.Resume(id)
			require.NoError(t, err)
			appendN(t, w, 9, 10)
			require.NoError(t, w.Close())
			require.NoError(t, j.Close())
			j = openJ(t, dir, Config{ReadOnly: true})
			bad, err = j.Verify(id)
			require.NoError(t, err)
			require.Empty(t, bad)
		})
	}
}

func TestSyncEvery(t *testing.T) {
	j := openJ(t, t.TempDir(), Config{Sync: SyncEvery})
	defer j.Close()
	w, err := j.Create(testSession, testSource, 1)
	require.NoError(t, err)
	for range 20 {
		appendN(t, w, 1, 1)
		require.Equal(t, w.Next(), w.Durable())
	}
	require.NoError(t, w.Close())
}

// TestSyncIntervalDurable: the background sync makes appends durable
// SyncInterval after them, without any call. In a synctest bubble the
// interval is exact: not durable a nanosecond before, durable at it.
func TestSyncIntervalDurable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 5 * time.Millisecond
		j := openJ(t, t.TempDir(), Config{SyncInterval: interval})
		defer j.Close()
		w, err := j.Create(testSession, testSource, 1)
		require.NoError(t, err)
		appendN(t, w, 1, 100)
		advance(interval - time.Nanosecond)
		require.Less(t, w.Durable(), wire.Seq(101), "synced before the interval")
		advance(time.Nanosecond)
		require.Equal(t, wire.Seq(101), w.Durable(), "synced at the interval")
		require.NoError(t, w.Close())
	})
}

// advance moves a bubble's clock on by d and returns once every goroutine
// of the bubble is blocked again: the timers due by then have fired and
// what they started is done. Call it only in a bubble.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// TestLiveReader follows a stream while another goroutine writes it,
// across segment rotations.
func TestLiveReader(t *testing.T) {
	j := openJ(t, t.TempDir(), Config{SegmentBytes: MinSegmentBytes})
	defer j.Close()
	w, err := j.Create(testSession, testSource, 1)
	require.NoError(t, err)
	const n = 30000
	done := make(chan error, 1)
	go func() {
		var buf []byte
		for seq := wire.Seq(1); seq <= n; seq++ {
			buf = msgFor(buf, 11, seq)
			if err := w.Append(seq, tsFor(seq), buf); err != nil {
				done <- err
				return
			}
		}
		done <- w.Close()
	}()
	r, err := j.OpenReader(w.ID())
	require.NoError(t, err)
	defer r.Close()
	want := wire.Seq(1)
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(100 * time.Microsecond)
	defer tick.Stop()
	for want <= n && time.Now().Before(deadline) {
		rec, err := r.Next()
		if err == io.EOF {
			// Tailing a file being written: nothing to wait on but the
			// next record; a tick short against the writer's pace.
			<-tick.C
			continue
		}
		require.NoError(t, err)
		if rec.Seq != want || !bytes.Equal(rec.Data, msgFor(nil, 11, want)) {
			t.Fatalf("record %d: got %d", want, rec.Seq)
		}
		want++
	}
	require.Equal(t, wire.Seq(n+1), want)
	require.NoError(t, <-done)
}

func TestLocked(t *testing.T) {
	dir := t.TempDir()
	j := openJ(t, dir, Config{})
	_, err := Open(dir, Config{})
	require.ErrorIs(t, err, ErrLocked)
	ro := openJ(t, dir, Config{ReadOnly: true}) // readers need no lock
	require.NoError(t, ro.Close())
	require.NoError(t, j.Close())
	j = openJ(t, dir, Config{}) // released by Close
	require.NoError(t, j.Close())
}
