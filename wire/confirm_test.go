package wire_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/wire"
)

func TestConfirmRoundTrip(t *testing.T) {
	s := mustSession(t, "NCF")
	for _, c := range []wire.Confirm{
		{Session: s, Seq: 1, Count: 1, Kind: wire.ConfirmSending, Group: 1},
		{Session: s, Seq: 1 << 40, Count: wire.MaxCount, Kind: wire.ConfirmLater, Group: 65535, After: 1e6},
	} {
		b := wire.AppendConfirm(nil, c)
		require.Len(t, b, wire.ConfirmLen)
		require.Equal(t, c.Length(), len(b))
		require.True(t, wire.IsConfirm(b))
		got, err := wire.ParseConfirm(b)
		require.NoError(t, err)
		require.Equal(t, c, got)
		// A MoldUDP64 parser refuses it: a confirm is never read as data.
		_, err = wire.ParsePacket(b)
		require.ErrorIs(t, err, wire.ErrTruncatedMessage)
		// Nor as a re-request.
		_, err = wire.ParseRequest(b)
		require.ErrorIs(t, err, wire.ErrRequestLen)
	}
}

func TestConfirmErrors(t *testing.T) {
	s := mustSession(t, "NCF")
	good := wire.AppendConfirm(nil, wire.Confirm{Session: s, Seq: 5, Count: 3, Kind: wire.ConfirmSending})
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, wire.ErrNotConfirm},
		{"short", good[:wire.ConfirmLen-1], wire.ErrNotConfirm},
		{"long", append(bytes.Clone(good), 0), wire.ErrNotConfirm},
		{"magic", func() []byte { b := bytes.Clone(good); b[wire.HeaderLen] = 'X'; return b }(), wire.ErrNotConfirm},
		{"kind", func() []byte { b := bytes.Clone(good); b[wire.HeaderLen+3] = 9; return b }(), wire.ErrBadConfirm},
		{"zero seq", wire.AppendConfirm(nil, wire.Confirm{Session: s, Seq: 0, Count: 3, Kind: wire.ConfirmSending}), wire.ErrZeroSeq},
		{"zero count", wire.AppendConfirm(nil, wire.Confirm{Session: s, Seq: 1, Count: 0, Kind: wire.ConfirmSending}), wire.ErrZeroCount},
		{"overflow", wire.AppendConfirm(nil, wire.Confirm{Session: s, Seq: ^wire.Seq(0), Count: 2, Kind: wire.ConfirmSending}), wire.ErrSeqOverflow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := wire.ParseConfirm(tc.b)
			require.True(t, errors.Is(err, tc.want), "got %v, want %v", err, tc.want)
			require.Equal(t, wire.Confirm{}, c)
		})
	}
}

func TestConfirmAllocs(t *testing.T) {
	s := mustSession(t, "NCF")
	buf := make([]byte, 0, wire.ConfirmLen)
	c := wire.Confirm{Session: s, Seq: 9, Count: 2, Kind: wire.ConfirmLater, Group: 3, After: 40}
	n := testing.AllocsPerRun(100, func() {
		b := wire.AppendConfirm(buf[:0], c)
		if _, err := wire.ParseConfirm(b); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, n)
}

func FuzzParseConfirm(f *testing.F) {
	s := mustSession(f, "FUZZ")
	f.Add(wire.AppendConfirm(nil, wire.Confirm{Session: s, Seq: 1, Count: 1, Kind: wire.ConfirmSending, Group: 4}))
	f.Add(wire.AppendConfirm(nil, wire.Confirm{Session: s, Seq: 77, Count: 1024, Kind: wire.ConfirmLater, After: 5000}))
	f.Add(wire.AppendRequest(nil, wire.Request{Session: s, Seq: 1, Count: 1}))
	f.Add([]byte(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := wire.ParseConfirm(b)
		if err != nil {
			if !isSentinel(err) && !errors.Is(err, wire.ErrNotConfirm) && !errors.Is(err, wire.ErrBadConfirm) {
				t.Fatalf("error %v is not a sentinel", err)
			}
			if c != (wire.Confirm{}) {
				t.Fatalf("failed parse returned %+v", c)
			}
			return
		}
		if !c.Session.Valid() || c.Seq == wire.InvalidSeq || c.Count == 0 || c.Count > wire.MaxCount ||
			c.Seq+wire.Seq(c.Count) < c.Seq {
			t.Fatalf("accepted invalid confirm %+v", c)
		}
		if !bytes.Equal(wire.AppendConfirm(nil, c), b) {
			t.Fatalf("re-encoding differs")
		}
		if _, err := wire.ParsePacket(b); err == nil {
			t.Fatalf("a confirm parsed as a downstream packet")
		}
	})
}
