package journal

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/mdbus/mdbus/wire"
)

// FuzzRecord feeds arbitrary bytes to the record decoder: it must return a
// record or a status, never panic or read past its input, and a record it
// accepts must encode back to the same bytes.
func FuzzRecord(f *testing.F) {
	f.Add(appendMessage(nil, 1, 2, []byte("hello"), PacketUnknown))
	f.Add(appendMessage(nil, 1<<40, -5, make([]byte, 300), PacketStart))
	f.Add(appendMessage(nil, 3, 2, []byte("same"), PacketSame))
	f.Add(appendEnd(nil, 77, 123))
	f.Add(appendSeal(nil, 78, 124))
	f.Add(make([]byte, 16))                                                   // zero-filled
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3, 4, 1, 0, 0, 0, 0, 0, 0, 0}) // 4 GiB length
	f.Add(appendMessage(nil, 1, 2, []byte("torn"), PacketUnknown)[:20])
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, st := decodeFrame(b)
		if st != frameOK {
			return
		}
		if fr.n > len(b) || fr.n%recAlign != 0 || fr.n > MaxRecordLen {
			t.Fatalf("frame length %d of %d bytes", fr.n, len(b))
		}
		var again []byte
		switch fr.typ {
		case recMessage:
			again = appendMessage(nil, fr.seq, fr.ts, fr.data, fr.mark)
		case recEnd:
			again = appendEnd(nil, fr.seq, fr.ts)
		case recSeal:
			again = appendSeal(nil, fr.seq, fr.ts)
		default:
			t.Fatalf("accepted record type %d", fr.typ)
		}
		// Padding is not covered by the CRC; everything else must match.
		if !bytes.Equal(again[:RecordHeaderLen+msgFixedLen+len(fr.data)], b[:RecordHeaderLen+msgFixedLen+len(fr.data)]) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again, b[:fr.n])
		}
	})
}

// fuzzSegmentSeed is a small valid segment: header, messages, end.
func fuzzSegmentSeed(end bool) []byte {
	h := segHeader{id: StreamID{Session: testSession, Source: testSource, Incarnation: 1}, first: 10, created: 99}
	b := h.append(nil)
	for i := range 5 {
		b = appendMessage(b, wire.Seq(10+i), int64(i), bytes.Repeat([]byte{byte(i)}, 10*i), PacketUnknown)
	}
	if end {
		b = appendEnd(b, 15, 7)
	}
	return b
}

// FuzzSegment opens arbitrary bytes as the only segment of a stream: Open
// must succeed or fail with an error, and every record a reader returns
// must be one a writer framed (CRC-checked, in sequence), never a panic or
// an allocation sized by the input.
func FuzzSegment(f *testing.F) {
	good := fuzzSegmentSeed(false)
	f.Add(good)
	f.Add(fuzzSegmentSeed(true))
	f.Add(good[:len(good)-3])                                        // torn tail
	f.Add(append(append([]byte(nil), good...), make([]byte, 64)...)) // zero tail
	flipped := append([]byte(nil), good...)
	flipped[SegmentHeaderLen+20] ^= 1
	f.Add(flipped) // corrupt first record
	f.Add(good[:SegmentHeaderLen])
	f.Add(make([]byte, SegmentHeaderLen))
	f.Add([]byte("MDBUSJNL"))
	id := StreamID{Session: testSession, Source: testSource, Incarnation: 1}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<20 {
			return
		}
		dir, err := os.MkdirTemp("", "fuzzseg")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		sdir := filepath.Join(dir, streamDirName(id))
		if err := os.Mkdir(sdir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sdir, segName(10, segExt)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		j, err := Open(dir, Config{Sync: SyncNone})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrSession) {
				t.Fatalf("open: unexpected error class: %v", err)
			}
			return
		}
		defer j.Close()
		id, ok := j.Latest(testSession, testSource)
		if !ok {
			return // an incomplete header: the stream was dropped
		}
		r, err := j.OpenReader(id)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		want := wire.Seq(10)
		for i := 0; ; i++ {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("read: unexpected error class: %v", err)
				}
				break
			}
			if rec.Seq != want {
				t.Fatalf("record %d has sequence %d, want %d", i, rec.Seq, want)
			}
			want++
		}
		// A clean stream takes appends at Next.
		if w, err := j.Resume(id); err == nil {
			if err := w.Append(w.Next(), 1, []byte("more")); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
