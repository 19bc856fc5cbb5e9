package wire_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/wire"
)

// raw builds a datagram field by field, without the package's encoders, so
// that it can be malformed at will. body is appended as is.
func raw(session string, seq uint64, count uint16, body ...byte) []byte {
	b := []byte(session)
	for len(b) < wire.SessionLen {
		b = append(b, ' ')
	}
	b = b[:wire.SessionLen]
	b = binary.BigEndian.AppendUint64(b, seq)
	b = binary.BigEndian.AppendUint16(b, count)
	return append(b, body...)
}

func TestParsePacketErrors(t *testing.T) {
	valid := raw("SESS", 7, 2, 0, 1, 'A', 0, 2, 'B', 'C')
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"nil", nil, wire.ErrShortHeader},
		{"short header 19 bytes", valid[:19], wire.ErrShortHeader},
		{"truncated length: no length bytes", valid[:20], wire.ErrTruncatedMessage},
		{"truncated length: 1 of 2 bytes", valid[:21], wire.ErrTruncatedMessage},
		{"length past datagram: first message", valid[:22], wire.ErrTruncatedMessage},
		{"length past datagram: second message", valid[:len(valid)-1], wire.ErrTruncatedMessage},
		{"length past datagram: 0xFFFF", raw("SESS", 7, 1, 0xFF, 0xFF, 'A'), wire.ErrTruncatedMessage},
		{"count higher than messages", raw("SESS", 7, 3, 0, 1, 'A', 0, 2, 'B', 'C'), wire.ErrTruncatedMessage},
		{"trailing bytes: count lower than messages", raw("SESS", 7, 1, 0, 1, 'A', 0, 2, 'B', 'C'), wire.ErrTrailingBytes},
		{"trailing bytes: one stray byte", append(bytes.Clone(valid), 0), wire.ErrTrailingBytes},
		{"max count with too few bytes", raw("SESS", 7, wire.MaxCount, 0, 0), wire.ErrTruncatedMessage},
		{"end of session with data", raw("SESS", 7, wire.CountEndOfSession, 0), wire.ErrEndOfSessionData},
		{"end of session with message", raw("SESS", 7, wire.CountEndOfSession, 0, 1, 'A'), wire.ErrEndOfSessionData},
		{"heartbeat with data", raw("SESS", 7, wire.CountHeartbeat, 0), wire.ErrHeartbeatData},
		{"heartbeat with message", raw("SESS", 7, wire.CountHeartbeat, 0, 1, 'A'), wire.ErrHeartbeatData},
		{"zero seq", raw("SESS", 0, 1, 0, 1, 'A'), wire.ErrZeroSeq},
		{"seq overflow: max seq, count 1", raw("SESS", math.MaxUint64, 1, 0, 0), wire.ErrSeqOverflow},
		{"seq overflow: max-1 seq, count 2", raw("SESS", math.MaxUint64-1, 2, 0, 0, 0, 0), wire.ErrSeqOverflow},
		{"bad session: NUL padding", raw("SESS\x00\x00\x00\x00\x00\x00", 7, 1, 0, 0), wire.ErrBadSession},
		{"bad session: control byte", raw("SE\nS", 7, 1, 0, 0), wire.ErrBadSession},
		{"bad session: DEL", raw("SESS\x7f", 7, 1, 0, 0), wire.ErrBadSession},
		{"bad session: 8-bit byte", raw("SESS\xc3\xa9", 7, 1, 0, 0), wire.ErrBadSession},
		{"bad session on heartbeat", raw("\x00", 7, wire.CountHeartbeat), wire.ErrBadSession},
		{"bad session on end of session", raw("\x00", 7, wire.CountEndOfSession), wire.ErrBadSession},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := wire.ParsePacket(tc.b)
			require.ErrorIs(t, err, tc.want)
			require.Equal(t, wire.Packet{}, p)
		})
	}
	_, err := wire.ParsePacket(valid)
	require.NoError(t, err, "the base of the table is valid")
}

func TestParsePacketValid(t *testing.T) {
	for _, tc := range []struct {
		name  string
		b     []byte
		count uint16
		msgs  []string
	}{
		{"one message", raw("S", 1, 1, 0, 1, 'A'), 1, []string{"A"}},
		{"empty messages", raw("S", 5, 3, 0, 0, 0, 1, 'x', 0, 0), 3, []string{"", "x", ""}},
		{"heartbeat", raw("S", 9, 0), 0, nil},
		// The decoder does not judge the sequence of a heartbeat or end of
		// session: a heartbeat before the first message announces 1, but 0
		// carries no message, so nothing can be misnumbered by it.
		{"heartbeat with seq 0", raw("S", 0, 0), 0, nil},
		{"heartbeat with max seq", raw("S", math.MaxUint64, 0), 0, nil},
		{"end of session", raw("S", 9, wire.CountEndOfSession), wire.CountEndOfSession, nil},
		{"end of session with seq 0", raw("S", 0, wire.CountEndOfSession), wire.CountEndOfSession, nil},
		{"last seq range", raw("S", math.MaxUint64-2, 2, 0, 0, 0, 0), 2, []string{"", ""}},
		{"full session of printable ASCII", raw(" !~Zz09/:@", 1, 1, 0, 0), 1, []string{""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := wire.ParsePacket(tc.b)
			require.NoError(t, err)
			require.Equal(t, tc.count, p.Count)
			require.Equal(t, len(tc.b), p.Len())
			require.Equal(t, tc.count == wire.CountHeartbeat, p.IsHeartbeat())
			require.Equal(t, tc.count == wire.CountEndOfSession, p.IsEndOfSession())
			require.Equal(t, len(tc.msgs), p.MessageCount())
			require.Equal(t, p.Seq+wire.Seq(len(tc.msgs)), p.Next())
			got := collect(t, p)
			require.Len(t, got, len(tc.msgs))
			for i := range got {
				require.Equal(t, tc.msgs[i], string(got[i]))
			}
		})
	}
}

// TestParsePacketMaxCount decodes the largest count that carries messages:
// 0xFFFE empty messages, a 131,092-byte datagram (larger than any UDP
// payload, which the decoder does not police; it only checks consistency).
func TestParsePacketMaxCount(t *testing.T) {
	b := raw("S", 1, wire.MaxCount, make([]byte, wire.MsgLenLen*wire.MaxCount)...)
	p, err := wire.ParsePacket(b)
	require.NoError(t, err)
	require.Equal(t, wire.MaxCount, p.MessageCount())
	it := p.Messages()
	n := 0
	for {
		m, seq, ok := it.Next()
		if !ok {
			break
		}
		require.Empty(t, m)
		require.Equal(t, wire.Seq(1+n), seq)
		n++
	}
	require.Equal(t, wire.MaxCount, n)
	require.Equal(t, wire.Seq(1+wire.MaxCount), p.Next())
}

// TestParsePacketTruncations parses every prefix of a valid packet: each is
// rejected, with the sentinel for where it was cut.
func TestParsePacketTruncations(t *testing.T) {
	b := raw("SESS", 7, 3, 0, 2, 'A', 'B', 0, 0, 0, 3, 'C', 'D', 'E')
	for n := range len(b) {
		_, err := wire.ParsePacket(b[:n])
		if n < wire.HeaderLen {
			require.ErrorIs(t, err, wire.ErrShortHeader, "prefix %d", n)
		} else {
			require.ErrorIs(t, err, wire.ErrTruncatedMessage, "prefix %d", n)
		}
	}
	_, err := wire.ParsePacket(b)
	require.NoError(t, err)
}

// TestParsePacketCorruption flips every bit of a valid packet in turn: the
// decoder never panics, and what it accepts re-encodes to the same bytes.
func TestParsePacketCorruption(t *testing.T) {
	b := raw("SESS", 7, 3, 0, 2, 'A', 'B', 0, 0, 0, 3, 'C', 'D', 'E')
	for i := range len(b) * 8 {
		c := bytes.Clone(b)
		c[i/8] ^= 1 << (i % 8)
		p, err := wire.ParsePacket(c)
		if err != nil {
			require.True(t, isSentinel(err), "bit %d: %v", i, err)
			continue
		}
		require.Equal(t, c, reencode(t, p, len(c)), "bit %d", i)
	}
}

// TestParsePacketAliases checks that messages are sub-slices of the datagram
// (no copy) whose capacity ends with the message, so appending to one cannot
// overwrite the next.
func TestParsePacketAliases(t *testing.T) {
	b := raw("S", 1, 2, 0, 2, 'A', 'B', 0, 1, 'C')
	p, err := wire.ParsePacket(b)
	require.NoError(t, err)
	it := p.Messages()
	m, _, ok := it.Next()
	require.True(t, ok)
	require.Equal(t, 2, cap(m))
	require.Same(t, &b[wire.HeaderLen+wire.MsgLenLen], &m[0])
	_ = append(m, 'X')
	m, _, ok = it.Next()
	require.True(t, ok)
	require.Equal(t, "C", string(m))
	require.Same(t, &b[len(b)-1], &m[0])
}

func TestMessageIter(t *testing.T) {
	t.Run("zero value yields nothing", func(t *testing.T) {
		var it wire.MessageIter
		m, seq, ok := it.Next()
		require.False(t, ok)
		require.Nil(t, m)
		require.Equal(t, wire.InvalidSeq, seq)
	})
	t.Run("zero Packet yields nothing", func(t *testing.T) {
		it := wire.Packet{}.Messages()
		_, _, ok := it.Next()
		require.False(t, ok)
	})
	t.Run("heartbeat and end of session yield nothing", func(t *testing.T) {
		for _, b := range [][]byte{
			wire.AppendHeartbeat(nil, mustSession(t, "S"), 5),
			wire.AppendEndOfSession(nil, mustSession(t, "S"), 5),
		} {
			p, err := wire.ParsePacket(b)
			require.NoError(t, err)
			it := p.Messages()
			_, _, ok := it.Next()
			require.False(t, ok)
		}
	})
	t.Run("stays done", func(t *testing.T) {
		p, err := wire.ParsePacket(raw("S", 1, 1, 0, 1, 'A'))
		require.NoError(t, err)
		it := p.Messages()
		_, _, ok := it.Next()
		require.True(t, ok)
		for range 3 {
			_, _, ok = it.Next()
			require.False(t, ok)
		}
	})
	t.Run("skip", func(t *testing.T) {
		p, err := wire.ParsePacket(raw("S", 10, 4, 0, 1, 'A', 0, 1, 'B', 0, 1, 'C', 0, 1, 'D'))
		require.NoError(t, err)
		it := p.Messages()
		it.Skip(0)
		it.Skip(2)
		m, seq, ok := it.Next()
		require.True(t, ok)
		require.Equal(t, "C", string(m))
		require.Equal(t, wire.Seq(12), seq)
		it.Skip(100) // past the end: stops there
		_, _, ok = it.Next()
		require.False(t, ok)
	})
}

func TestHeader(t *testing.T) {
	s := mustSession(t, "HDR")
	for _, tc := range []struct {
		name      string
		h         wire.Header
		heartbeat bool
		eos       bool
		messages  int
		next      wire.Seq
	}{
		{"heartbeat", wire.Header{Session: s, Seq: 10, Count: 0}, true, false, 0, 10},
		{"end of session", wire.Header{Session: s, Seq: 10, Count: 0xFFFF}, false, true, 0, 10},
		{"one message", wire.Header{Session: s, Seq: 10, Count: 1}, false, false, 1, 11},
		{"max count", wire.Header{Session: s, Seq: 10, Count: wire.MaxCount}, false, false, wire.MaxCount, 10 + wire.MaxCount},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.heartbeat, tc.h.IsHeartbeat())
			require.Equal(t, tc.eos, tc.h.IsEndOfSession())
			require.Equal(t, tc.messages, tc.h.MessageCount())
			require.Equal(t, tc.next, tc.h.Next())

			b := wire.AppendHeader([]byte("prefix"), tc.h)
			require.Len(t, b, len("prefix")+wire.HeaderLen)
			require.Equal(t, "prefix", string(b[:6]))
			h, err := wire.ParseHeader(b[6:])
			require.NoError(t, err)
			require.Equal(t, tc.h, h)
		})
	}
	_, err := wire.ParseHeader(make([]byte, wire.HeaderLen-1))
	require.ErrorIs(t, err, wire.ErrShortHeader)
}

func TestAppendHeartbeatEndOfSession(t *testing.T) {
	s := mustSession(t, "ABC")
	require.Equal(t, raw("ABC", 42, 0), wire.AppendHeartbeat(nil, s, 42))
	require.Equal(t, raw("ABC", 42, 0xFFFF), wire.AppendEndOfSession(nil, s, 42))
	// Appends after what is there.
	b := wire.AppendHeartbeat([]byte{1, 2}, s, 42)
	require.Equal(t, append([]byte{1, 2}, raw("ABC", 42, 0)...), b)
}

func TestPacketLen(t *testing.T) {
	require.Equal(t, wire.HeaderLen, wire.PacketLen(0, 0))
	require.Equal(t, 20+2*2+11, wire.PacketLen(2, 11))
	b := encodePacket(t, mustSession(t, "S"), 1, wire.MaxPayloadSize, []byte("HELLO"), []byte("WORLD!"))
	require.Len(t, b, wire.PacketLen(2, 11))
}

// reencode encodes p again: its messages through an Encoder limited to
// payloadSize, or the heartbeat or end of session it is.
func reencode(tb testing.TB, p wire.Packet, payloadSize int) []byte {
	tb.Helper()
	switch {
	case p.IsHeartbeat():
		return wire.AppendHeartbeat(nil, p.Session, p.Seq)
	case p.IsEndOfSession():
		return wire.AppendEndOfSession(nil, p.Session, p.Seq)
	}
	var enc wire.Encoder
	enc.Reset(make([]byte, 0, p.Len()), p.Session, p.Seq, payloadSize)
	it := p.Messages()
	for {
		m, _, ok := it.Next()
		if !ok {
			break
		}
		require.NoError(tb, enc.Add(m))
	}
	require.Equal(tb, int(p.Count), enc.Count())
	return enc.Bytes()
}
