package journal

import (
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/internal/synth"
	"github.com/mdbus/mdbus/wire"
)

// Throughput benchmarks (acceptance 3). Run side by side:
//
//	go test -run '^$' -bench 'Append|RawWrite|Replay|RawRead' -benchtime 2000000x ./journal
//
// Every journal benchmark has a raw twin doing the same I/O with plain
// os.File calls on the same disk (the test's temporary directory), so the
// ratio is the journal's overhead.

const benchMsgLen = 64

// benchRetain bounds the disk a long benchmark uses.
const benchRetain = 512 << 20

// reportRate reports messages per second of wall time and, because this
// machine is shared, per second of the process's CPU time (user+system)
// since the timer was last reset.
func reportRate(b *testing.B, msgs int) {
	b.ReportMetric(float64(msgs)/b.Elapsed().Seconds(), "msgs/s")
	if cpu := cpuTime() - benchCPU; cpu > 0 {
		b.ReportMetric(float64(msgs)/cpu.Seconds(), "msgs/cpu-s")
	}
}

var benchCPU time.Duration

// resetTimer is b.ResetTimer that also starts the CPU-time count.
func resetTimer(b *testing.B) {
	b.ResetTimer()
	benchCPU = cpuTime()
}

func BenchmarkAppend(b *testing.B) {
	for _, p := range []struct {
		name string
		sync SyncPolicy
	}{{"SyncNone", SyncNone}, {"SyncInterval", SyncInterval}} {
		b.Run(p.name, func(b *testing.B) {
			j := openJ(b, b.TempDir(), Config{Sync: p.sync, RetainBytes: benchRetain})
			defer j.Close()
			w, err := j.Create(testSession, testSource, 1)
			require.NoError(b, err)
			msg := make([]byte, benchMsgLen)
			b.SetBytes(int64(frameLen(benchMsgLen)))
			b.ReportAllocs()
			resetTimer(b)
			for i := 0; i < b.N; i++ {
				if err := w.Append(w.Next(), int64(i), msg); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportRate(b, b.N)
			require.NoError(b, w.Close())
		})
	}
}

// rawFiles is the raw twin of a stream's segments: files of the segment
// size, each fdatasync'd when full (as sealing does) and removed beyond
// the benchmark's retention.
type rawFiles struct {
	b     *testing.B
	dir   string
	f     *os.File
	off   int64
	files []string
}

func newRawFiles(b *testing.B) *rawFiles {
	r := &rawFiles{b: b, dir: b.TempDir()}
	r.next()
	return r
}

func (r *rawFiles) next() {
	if r.f != nil {
		if err := fdatasync(r.f); err != nil {
			r.b.Fatal(err)
		}
		r.f.Close()
	}
	name := filepath.Join(r.dir, strconv.Itoa(len(r.files)))
	f, err := os.Create(name)
	if err != nil {
		r.b.Fatal(err)
	}
	r.f, r.off, r.files = f, 0, append(r.files, name)
	if len(r.files) > benchRetain/DefaultSegmentBytes {
		_ = os.Remove(r.files[len(r.files)-1-benchRetain/DefaultSegmentBytes])
	}
}

func (r *rawFiles) write(p []byte) {
	if r.off+int64(len(p)) > DefaultSegmentBytes {
		r.next()
	}
	if _, err := r.f.Write(p); err != nil {
		r.b.Fatal(err)
	}
	r.off += int64(len(p))
}

func (r *rawFiles) close() { r.f.Close() }

// BenchmarkRawWrite writes the same framed bytes as BenchmarkAppend, one
// os.File.Write per record, into files of the segment size.
func BenchmarkRawWrite(b *testing.B) {
	rawWrites(b, appendMessage(nil, 1, 1, make([]byte, benchMsgLen), PacketUnknown), 1)
}

// rawWrites writes chunk, framed bytes of per records, once per op with
// rawFiles, and reports the rate in records.
func rawWrites(b *testing.B, chunk []byte, per int) {
	raw := newRawFiles(b)
	defer raw.close()
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	resetTimer(b)
	for i := 0; i < b.N; i++ {
		raw.write(chunk)
	}
	b.StopTimer()
	reportRate(b, b.N*per)
}

// BenchmarkAppendPacket appends full 1472-byte packets of 64-byte
// messages (one write per packet); BenchmarkRawWritePacket writes the same
// framed bytes in the same chunks.
func BenchmarkAppendPacket(b *testing.B) {
	j := openJ(b, b.TempDir(), Config{Sync: SyncNone, RetainBytes: benchRetain})
	defer j.Close()
	w, err := j.Create(testSession, testSource, 1)
	require.NoError(b, err)
	msg := make([]byte, benchMsgLen)
	var enc wire.Encoder
	pkt := make([]byte, 0, wire.DefaultPayloadSizeIPv4)
	per := 0
	b.ReportAllocs()
	resetTimer(b)
	for i := 0; i < b.N; i++ {
		enc.Reset(pkt[:0], testSession, w.Next(), wire.DefaultPayloadSizeIPv4)
		for enc.Add(msg) == nil {
		}
		per = enc.Count()
		if err := w.AppendPacket(enc.Bytes(), int64(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.SetBytes(int64(per * frameLen(benchMsgLen)))
	reportRate(b, b.N*per)
	require.NoError(b, w.Close())
}

func BenchmarkRawWritePacket(b *testing.B) {
	per := (wire.DefaultPayloadSizeIPv4 - wire.HeaderLen) / (benchMsgLen + wire.MsgLenLen)
	var chunk []byte
	for k := range per {
		chunk = appendMessage(chunk, wire.Seq(k+1), 1, make([]byte, benchMsgLen), PacketUnknown)
	}
	rawWrites(b, chunk, per)
}

const replayMsgs = 600_000 // one 64 MiB segment: Replay and RawRead read the same file

// replayJournal builds (once per benchmark) a stream of replayMsgs 64-byte
// messages and returns it with the path of its first segment.
func replayJournal(b *testing.B) (*Journal, StreamID, string) {
	j := openJ(b, b.TempDir(), Config{Sync: SyncNone})
	w, err := j.Create(testSession, testSource, 1)
	require.NoError(b, err)
	msg := make([]byte, benchMsgLen)
	for i := 0; i < replayMsgs; i++ {
		require.NoError(b, w.Append(w.Next(), int64(i), msg))
	}
	require.NoError(b, w.Close())
	return j, w.ID(), j.find(w.ID()).segs[0].path
}

// BenchmarkReplay reads a stream sequentially at top speed (from the page
// cache), one Next per op, starting over at the end.
func BenchmarkReplay(b *testing.B) {
	j, id, _ := replayJournal(b)
	defer j.Close()
	r, err := j.OpenReader(id)
	require.NoError(b, err)
	defer r.Close()
	b.SetBytes(int64(frameLen(benchMsgLen)))
	b.ReportAllocs()
	resetTimer(b)
	for i := 0; i < b.N; i++ {
		rec, err := r.Next()
		if err == io.EOF {
			if err := r.SeekSeq(1); err != nil {
				b.Fatal(err)
			}
			rec, err = r.Next()
		}
		if err != nil || len(rec.Data) != benchMsgLen {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportRate(b, b.N)
}

// BenchmarkRawRead reads the same segment with ReadAt in the Reader's
// chunk size, and only finds the record boundaries (no CRC, no checks).
func BenchmarkRawRead(b *testing.B) {
	j, _, path := replayJournal(b)
	defer j.Close()
	f, err := os.Open(path)
	require.NoError(b, err)
	defer f.Close()
	fi, err := f.Stat()
	require.NoError(b, err)
	buf := make([]byte, readBufLen)
	flen := int64(frameLen(benchMsgLen))
	b.SetBytes(flen)
	b.ReportAllocs()
	resetTimer(b)
	off, pos, n := int64(SegmentHeaderLen), 0, 0
	for i := 0; i < b.N; i++ {
		if pos+int(flen) > n {
			if off >= fi.Size() {
				off = SegmentHeaderLen
			}
			got, err := f.ReadAt(buf, off)
			if err != nil && err != io.EOF {
				b.Fatal(err)
			}
			n, pos = got-got%int(flen), 0
			off += int64(n)
		}
		if binary.LittleEndian.Uint32(buf[pos:]) == 0 {
			b.Fatal("zero length")
		}
		pos += int(flen)
	}
	b.StopTimer()
	reportRate(b, b.N)
}

// BenchmarkCompressedRandomRead reports (acceptance 4) the zstd ratio of
// sealed segments on synthetic ITCH data (internal/synth) and on the real
// ITCH messages of wire/testdata, and measures one random read by
// sequence (SeekSeq + Next on a fresh block) from the compressed segments.
func BenchmarkCompressedRandomRead(b *testing.B) {
	real, err := loadITCH("../wire/testdata/nasdaq-itch50-1000-messages.bin")
	require.NoError(b, err)
	synthNext := func() func([]byte, int) []byte {
		g := synth.New(1)
		return func(dst []byte, _ int) []byte { return g.Next(dst[:0]) }
	}
	for _, src := range []struct {
		name  string
		n     int
		block int
		next  func() func(dst []byte, i int) []byte
	}{
		{"synth/block=64KiB", 1_000_000, 64 << 10, synthNext},
		{"synth/block=16KiB", 1_000_000, 16 << 10, synthNext},
		{"itch-1000/block=64KiB", len(real), 64 << 10, func() func([]byte, int) []byte {
			return func(dst []byte, i int) []byte { return append(dst[:0], real[i]...) }
		}},
	} {
		b.Run(src.name, func(b *testing.B) {
			next := src.next()
			j := openJ(b, b.TempDir(), Config{Sync: SyncNone, SegmentBytes: 8 << 20, BlockBytes: src.block})
			defer j.Close()
			w, err := j.Create(testSession, testSource, 1)
			require.NoError(b, err)
			var msg []byte
			t0 := time.Now().UnixNano()
			for i := 0; i < src.n; i++ {
				msg = next(msg, i)
				require.NoError(b, w.Append(w.Next(), t0+int64(i)*1000, msg))
			}
			require.NoError(b, w.End(w.Next()))
			require.NoError(b, w.Close())
			// The stream has ended, so Compact compresses its newest
			// segment too.
			st := j.find(w.ID())
			var raw int64
			for _, s := range st.segs {
				raw += s.size.Load()
			}
			_, err = j.Compact()
			require.NoError(b, err)
			st.mu.Lock()
			var comp int64
			for _, s := range st.segs {
				require.True(b, s.zstd)
				comp += s.size.Load()
			}
			st.mu.Unlock()
			r, err := j.OpenReader(w.ID())
			require.NoError(b, err)
			defer r.Close()
			seqs := make([]wire.Seq, 4096)
			x := uint64(12345)
			for i := range seqs {
				x = x*6364136223846793005 + 1442695040888963407
				seqs[i] = 1 + wire.Seq((x>>33)%uint64(src.n))
			}
			b.ReportAllocs()
			resetTimer(b)
			for i := 0; i < b.N; i++ {
				seq := seqs[i%len(seqs)]
				// SeekSeq always loads and decompresses the block.
				if err := r.SeekSeq(seq); err != nil {
					b.Fatal(err)
				}
				rec, err := r.Next()
				if err != nil || rec.Seq != seq {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-benchCPU)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(raw)/float64(comp), "ratio")
			b.ReportMetric(float64(raw), "raw-bytes")
			b.ReportMetric(float64(comp), "zstd-bytes")
		})
	}
}

// loadITCH reads length-prefixed (2-byte big-endian) ITCH messages.
func loadITCH(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for len(b) >= 2 {
		n := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+n {
			return nil, io.ErrUnexpectedEOF
		}
		out = append(out, b[2:2+n])
		b = b[2+n:]
	}
	return out, nil
}
