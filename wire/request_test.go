package wire_test

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/wire"
)

func TestParseRequestErrors(t *testing.T) {
	valid := raw("REQ", 100, 5)
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"nil", nil, wire.ErrRequestLen},
		{"19 bytes", valid[:19], wire.ErrRequestLen},
		{"21 bytes", append(bytes.Clone(valid), 0), wire.ErrRequestLen},
		{"a downstream packet", raw("REQ", 100, 1, 0, 1, 'A'), wire.ErrRequestLen},
		{"zero seq", raw("REQ", 0, 5), wire.ErrZeroSeq},
		{"zero count", raw("REQ", 100, 0), wire.ErrZeroCount},
		{"0xFFFF count", raw("REQ", 100, 0xFFFF), wire.ErrZeroCount},
		{"overflow: max seq, count 1", raw("REQ", math.MaxUint64, 1), wire.ErrSeqOverflow},
		{"overflow: max-0xFFFD seq, count 0xFFFE", raw("REQ", math.MaxUint64-0xFFFD, 0xFFFE), wire.ErrSeqOverflow},
		{"bad session: NUL", raw("REQ\x00", 100, 5), wire.ErrBadSession},
		{"bad session: 0xFF", raw("\xff", 100, 5), wire.ErrBadSession},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := wire.ParseRequest(tc.b)
			require.ErrorIs(t, err, tc.want)
			require.Equal(t, wire.Request{}, r)
		})
	}
}

func TestParseRequestValid(t *testing.T) {
	s := mustSession(t, "REQ")
	for _, tc := range []struct {
		name string
		r    wire.Request
	}{
		{"first message", wire.Request{Session: s, Seq: 1, Count: 1}},
		{"max count", wire.Request{Session: s, Seq: 1, Count: wire.MaxCount}},
		{"last range", wire.Request{Session: s, Seq: math.MaxUint64 - wire.MaxCount, Count: wire.MaxCount}},
		{"last message", wire.Request{Session: s, Seq: math.MaxUint64 - 1, Count: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := wire.AppendRequest(nil, tc.r)
			require.Len(t, b, wire.RequestLen)
			require.Equal(t, wire.RequestLen, tc.r.Length())
			require.Equal(t, raw("REQ", uint64(tc.r.Seq), tc.r.Count), b)
			r, err := wire.ParseRequest(b)
			require.NoError(t, err)
			require.Equal(t, tc.r, r)
		})
	}
	// AppendRequest appends.
	b := wire.AppendRequest([]byte("xy"), wire.Request{Session: s, Seq: 3, Count: 4})
	require.Equal(t, append([]byte("xy"), raw("REQ", 3, 4)...), b)
}
