package fanout

import (
	"errors"
	"io"
	"net/netip"
	"testing"

	"github.com/mdbus/mdbus/subscriber"
	"github.com/stretchr/testify/require"
)

func encoded(r Record) []byte {
	b := make([]byte, recordSpace(len(r.Data)))
	putRecord(b, &r)
	return b
}

// FuzzParseRecord: any bytes decode to a record, a short read or
// ErrCorrupt; never a panic, never a record longer than its input or room,
// and a decoded record encodes back to the same bytes.
func FuzzParseRecord(f *testing.F) {
	f.Add(encoded(Record{Type: TypeMessage, Stream: testStream, Seq: 7, Stamp: 99, Data: []byte("hello")}), uint64(1<<20))
	f.Add(encoded(Record{Type: TypeLoss, Stream: testStream, Seq: 7, To: 9}), uint64(56))
	f.Add(encoded(Record{Type: TypeEnd, Seq: 3}), uint64(56))
	f.Add(encoded(Record{Type: TypeMessage, Stream: subscriber.StreamID{Source: netipV6}, Seq: 1}), uint64(4096))
	pad := make([]byte, 8)
	putPadding(pad, 4096)
	f.Add(pad, uint64(4096))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 0, 4, 0}, uint64(1<<20))
	f.Fuzz(func(t *testing.T, b []byte, room uint64) {
		rec, n, err := ParseRecord(b, room)
		if err != nil {
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				require.ErrorIs(t, err, ErrCorrupt)
			}
			return
		}
		require.LessOrEqual(t, n, room)
		require.Zero(t, n%8)
		if rec.Type == TypePadding {
			return
		}
		require.LessOrEqual(t, len(rec.Data), MaxDataLen)
		require.LessOrEqual(t, uint64(RecordHeaderLen+len(rec.Data)), uint64(len(b)))
		again := encoded(rec)
		// Reserved bytes and the unused part of an IPv4 address are not
		// kept; everything decoded is.
		rec2, n2, err := ParseRecord(again, uint64(len(again)))
		require.NoError(t, err)
		require.Equal(t, n, n2)
		require.Equal(t, rec, rec2)
	})
}

var netipV6 = netip.MustParseAddrPort("[2001:db8::1]:5")

// FuzzParseHeader: a hostile header is refused with ErrBadHeader, never a
// panic; an accepted one names a capacity within bounds.
func FuzzParseHeader(f *testing.F) {
	h := make([]byte, HeaderLen)
	putHeader(h, MinCapacity)
	f.Add(h[:64], int64(HeaderLen+MinCapacity))
	f.Add([]byte("MDBUSFAN"), int64(0))
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		full := make([]byte, HeaderLen)
		copy(full, b)
		hd, err := ParseHeader(full, size)
		if err != nil {
			require.ErrorIs(t, err, ErrBadHeader)
			return
		}
		require.GreaterOrEqual(t, hd.Capacity, uint64(MinCapacity))
		require.LessOrEqual(t, hd.Capacity, uint64(MaxCapacity))
		require.EqualValues(t, HeaderLen+hd.Capacity, size)
	})
}

// FuzzReaderFile: a reader over a ring file whose data area, positions
// and marks are hostile delivers what parses, stops with ErrCorrupt at the
// first thing that does not, and never panics or reads outside the map.
func FuzzReaderFile(f *testing.F) {
	skipUnsupported(f)
	valid := append(encoded(Record{Type: TypeMessage, Stream: testStream, Seq: 1, Data: []byte("a")}),
		encoded(Record{Type: TypeMessage, Stream: testStream, Seq: 2, Data: make([]byte, 300)})...)
	f.Add(valid, uint64(len(valid)), uint64(0), uint64(0))
	f.Add(valid, uint64(len(valid)), uint64(MinCapacity-8), uint64(0))
	f.Add([]byte{1, 2, 3}, uint64(1<<40), uint64(8), uint64(5))
	f.Add(make([]byte, 64), uint64(64), uint64(0), uint64(MinCapacity+64))
	f.Add([]byte{1}, uint64(MinCapacity+7), uint64(MinCapacity-1), uint64(0)) // an unaligned position at the end of the area
	r, err := Create(f.TempDir()+"/fuzz.ring", MinCapacity)
	require.NoError(f, err)
	defer r.Close()
	f.Fuzz(func(t *testing.T, data []byte, tail, start, mark uint64) {
		clear(r.m.data)
		copy(r.m.data[start&r.m.mask:], data)
		r.tailW.Store(tail)
		r.intentW.Store(tail)
		r.m.u64(offMarks).Store(mark)
		r.m.u64(offMarks + 8).Store(start)
		rd, err := OpenReader(ReaderConfig{Path: r.Path(), OnMessage: func(m subscriber.Message) {
			_ = append([]byte(nil), m.Data...)
		}})
		require.NoError(t, err)
		defer rd.Close()
		rd.cursor = start
		for i := 0; i < 100; i++ {
			n, err := rd.Poll()
			if err != nil {
				require.ErrorIs(t, err, ErrCorrupt)
				break
			}
			if n == 0 && rd.cursor == rd.tail.Load() {
				break
			}
		}
	})
}

// TestReaderHostilePositions: positions a damaged header may hold (a
// record running past the tail, found by FuzzReaderFile; an unaligned
// position next to the end of the data area) stop the reader with
// ErrCorrupt instead of a panic.
func TestReaderHostilePositions(t *testing.T) {
	r := newRing(t, MinCapacity)
	for _, tc := range []struct {
		name        string
		start, tail uint64
	}{
		{"record past the tail", 0, 24},
		{"unaligned at the end", MinCapacity - 1, MinCapacity + 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clear(r.m.data)
			putRecord(r.m.data, &Record{Type: TypeMessage, Seq: 1, Data: []byte("x")})
			r.tailW.Store(tc.tail)
			r.intentW.Store(tc.tail)
			rd, err := OpenReader(ReaderConfig{Path: r.Path(), OnMessage: func(subscriber.Message) {}})
			require.NoError(t, err)
			defer rd.Close()
			rd.cursor = tc.start
			_, err = rd.Poll()
			require.ErrorIs(t, err, ErrCorrupt)
			_, err = rd.Poll()
			require.ErrorIs(t, err, ErrCorrupt, "the error stays")
		})
	}
}
