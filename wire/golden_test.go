package wire_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/wire"
)

// TestGolden checks the hand-built vectors in testdata/golden: valid ones
// decode to the fields and messages the file states and encode back to the
// same bytes; malformed ones fail with the sentinel the file names.
//
// The vectors are written by hand from the MoldUDP64 specification, not
// produced by this package, so there is deliberately no -update flag: a
// mismatch means the code or the vector is wrong, and a person decides which.
func TestGolden(t *testing.T) {
	seen := map[string]bool{}
	for _, g := range loadGoldens(t) {
		seen[g.want] = true
		t.Run(g.name, func(t *testing.T) {
			switch g.kind {
			case "packet":
				checkGoldenPacket(t, g)
			case "request":
				checkGoldenRequest(t, g)
			}
		})
	}
	for name := range sentinels {
		require.True(t, seen[name], "no golden vector expects %s", name)
	}
	require.True(t, seen["ok"], "no valid golden vector")
}

func checkGoldenPacket(t *testing.T, g golden) {
	p, err := wire.ParsePacket(g.data)
	if g.want != "ok" {
		require.ErrorIs(t, err, sentinels[g.want])
		require.Equal(t, wire.Packet{}, p, "a failed parse returns the zero Packet")
		return
	}
	require.NoError(t, err)
	require.Equal(t, *g.session, p.Session, "session")
	require.Equal(t, *g.seq, p.Seq, "sequence")
	require.Equal(t, *g.count, p.Count, "count")
	require.Equal(t, len(g.data), p.Len(), "Len")
	require.Equal(t, g.data[wire.HeaderLen:], p.Body(), "Body")
	require.Equal(t, len(g.msgs), p.MessageCount(), "MessageCount")

	msgs := collect(t, p)
	require.Len(t, msgs, len(g.msgs))
	for i := range msgs {
		require.Equal(t, string(g.msgs[i]), string(msgs[i]), "message %d", i)
	}

	var enc []byte
	switch {
	case p.IsHeartbeat():
		require.Empty(t, g.msgs)
		enc = wire.AppendHeartbeat(nil, p.Session, p.Seq)
	case p.IsEndOfSession():
		require.Empty(t, g.msgs)
		enc = wire.AppendEndOfSession(nil, p.Session, p.Seq)
	default:
		// The exact datagram size as the limit: the vector must fit it.
		enc = encodePacket(t, *g.session, *g.seq, len(g.data), g.msgs...)
	}
	require.Equal(t, g.data, enc, "encoding")
	require.Equal(t, len(g.data), wire.PacketLen(len(g.msgs), len(g.data)-wire.HeaderLen-wire.MsgLenLen*len(g.msgs)))
}

func checkGoldenRequest(t *testing.T, g golden) {
	r, err := wire.ParseRequest(g.data)
	if g.want != "ok" {
		require.ErrorIs(t, err, sentinels[g.want])
		require.Equal(t, wire.Request{}, r, "a failed parse returns the zero Request")
		return
	}
	require.NoError(t, err)
	require.Empty(t, g.msgs, "requests carry no messages")
	require.Equal(t, wire.Request{Session: *g.session, Seq: *g.seq, Count: *g.count}, r)
	require.Equal(t, len(g.data), r.Length())
	require.Equal(t, g.data, wire.AppendRequest(nil, r), "encoding")
}

// TestGoldenFormat checks that the golden-file parser rejects malformed
// files instead of silently testing less than the file says.
func TestGoldenFormat(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text string
	}{
		{"unknown key", "kind: packet\nwant: ErrShortHeader\nsesion: \"A\"\nhex:\n00\n"},
		{"odd hex digits", "kind: packet\nwant: ErrShortHeader\nhex:\n0\n"},
		{"not hex", "kind: packet\nwant: ErrShortHeader\nhex:\nzz\n"},
		{"no hex section", "kind: packet\nwant: ErrShortHeader\n"},
		{"bad kind", "kind: packets\nwant: ErrShortHeader\nhex:\n"},
		{"unknown sentinel", "kind: packet\nwant: ErrNope\nhex:\n"},
		{"valid without fields", "kind: packet\nwant: ok\nhex:\n00\n"},
		{"bad string", "kind: packet\nwant: ok\nmsg: \"abc\nhex:\n"},
		{"text after string", "kind: packet\nwant: ok\nmsg: \"abc\" def\nhex:\n"},
		{"bad session", "kind: packet\nwant: ok\nsession: \"ABCDEFGHIJK\"\nhex:\n"},
		{"seq too large", "kind: packet\nwant: ok\nseq: 18446744073709551616\nhex:\n"},
		{"count too large", "kind: packet\nwant: ok\ncount: 65536\nhex:\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".hex")
			require.NoError(t, os.WriteFile(path, []byte(tc.text), 0o644))
			_, err := parseGolden(path)
			require.Error(t, err)
		})
	}
	// Comments after values and quoted strings holding '#' and '"'.
	path := filepath.Join(dir, "ok.hex")
	require.NoError(t, os.WriteFile(path, []byte(
		"kind: packet # c\nwant: ok\nsession: \"A#\" # say \"x\"\nseq: 1\ncount: 1\nmsg: \"\\x00#\\\"\"\nhex:\n00 # c\n"), 0o644))
	g, err := parseGolden(path)
	require.NoError(t, err)
	require.Equal(t, "A#", g.session.String())
	require.Equal(t, [][]byte{{0, '#', '"'}}, g.msgs)
	require.Equal(t, []byte{0}, g.data)
}
