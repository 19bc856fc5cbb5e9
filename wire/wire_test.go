package wire_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/wire"
)

func TestLayout(t *testing.T) {
	// The MoldUDP64 header: session 0..9, sequence 10..17, count 18..19.
	require.Equal(t, 0, wire.SessionOffset)
	require.Equal(t, 10, wire.SeqOffset)
	require.Equal(t, 18, wire.CountOffset)
	require.Equal(t, 20, wire.HeaderLen)
	require.Equal(t, 20, wire.RequestLen)
	require.Equal(t, 2, wire.MsgLenLen)
	require.Equal(t, 1472, wire.DefaultPayloadSizeIPv4)
	require.Equal(t, 1452, wire.DefaultPayloadSizeIPv6)
	require.Equal(t, 65535-20-8, wire.MaxPayloadSize)
	require.Equal(t, 23, wire.MinPayloadSize)
}

func TestParseSession(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    string // the 10 bytes
		wantStr string // String()
	}{
		{"A", "A         ", "A"},
		{"000010059B", "000010059B", "000010059B"},
		{"S1", "S1        ", "S1"},
		{"a b", "a b       ", "a b"},
		{" lead", " lead     ", " lead"},
		{"~!@#$%^&*(", "~!@#$%^&*(", "~!@#$%^&*("},
	} {
		t.Run(tc.in, func(t *testing.T) {
			s, err := wire.ParseSession(tc.in)
			require.NoError(t, err)
			require.Equal(t, tc.want, string(s[:]))
			require.Equal(t, tc.wantStr, s.String())
			require.True(t, s.Valid())
			// String and ParseSession round-trip.
			s2, err := wire.ParseSession(s.String())
			require.NoError(t, err)
			require.Equal(t, s, s2)
		})
	}
}

func TestParseSessionErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     string
		badSes bool // matches ErrBadSession
	}{
		{"empty", "", false},
		{"11 characters", "ABCDEFGHIJK", false},
		{"NUL", "AB\x00", true},
		{"newline", "AB\n", true},
		{"tab", "\tAB", true},
		{"DEL", "AB\x7f", true},
		{"UTF-8", "café", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := wire.ParseSession(tc.in)
			require.Error(t, err)
			require.True(t, strings.HasPrefix(err.Error(), "wire: session"), err.Error())
			if tc.badSes {
				require.ErrorIs(t, err, wire.ErrBadSession)
			}
		})
	}
}

func TestNewSession(t *testing.T) {
	seen := map[wire.Session]bool{}
	for range 100 {
		s := wire.NewSession()
		require.True(t, s.Valid())
		for _, c := range s {
			require.True(t, c >= '0' && c <= '9' || c >= 'A' && c <= 'Z', "byte %q", c)
		}
		require.Len(t, s.String(), wire.SessionLen, "no padding")
		parsed, err := wire.ParseSession(s.String())
		require.NoError(t, err)
		require.Equal(t, s, parsed)
		seen[s] = true
	}
	// 100 draws from 36^10 collide with probability about 1e-12.
	require.Len(t, seen, 100)
}

func TestSessionString(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    wire.Session
		want string
	}{
		{"all spaces", wire.Session{' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '}, ""},
		{"trailing spaces trimmed", wire.Session{'A', 'B', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '}, "AB"},
		{"inner and leading spaces kept", wire.Session{' ', 'A', ' ', 'B', ' ', ' ', ' ', ' ', ' ', ' '}, " A B"},
		{"full", wire.Session{'0', '1', '2', '3', '4', '5', '6', '7', '8', '9'}, "0123456789"},
		{"NUL padding is not trimmed", wire.Session{'A'}, "A\x00\x00\x00\x00\x00\x00\x00\x00\x00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.s.String())
		})
	}
	require.False(t, wire.Session{}.Valid(), "the zero Session is NULs")
}
