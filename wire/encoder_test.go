package wire_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/wire"
)

// TestEncoderBoundary fills a 100-byte payload exactly and checks that the
// Encoder refuses one byte more with ErrPacketFull and changes nothing.
func TestEncoderBoundary(t *testing.T) {
	const size = 100
	s := mustSession(t, "EDGE")
	var enc wire.Encoder

	t.Run("one message fills the payload", func(t *testing.T) {
		enc.Reset(nil, s, 1, size)
		require.Equal(t, size-wire.HeaderLen-wire.MsgLenLen, wire.MaxMessageLen(size))
		require.True(t, enc.Fits(78))
		require.False(t, enc.Fits(79))
		require.NoError(t, enc.Add(make([]byte, 78))) // 20 + 2 + 78 = 100
		require.Equal(t, size, enc.Len())
		before := bytes.Clone(enc.Bytes())
		require.False(t, enc.Fits(0))
		require.ErrorIs(t, enc.Add(nil), wire.ErrPacketFull)
		require.Equal(t, before, enc.Bytes(), "a refused Add changes nothing")
		require.Equal(t, 1, enc.Count())
	})
	t.Run("second message to the byte", func(t *testing.T) {
		enc.Reset(nil, s, 1, size)
		require.NoError(t, enc.Add(make([]byte, 10))) // 32 bytes
		require.False(t, enc.Fits(67))
		err := enc.Add(make([]byte, 67)) // 32 + 2 + 67 = 101
		require.ErrorIs(t, err, wire.ErrPacketFull)
		require.NotErrorIs(t, err, wire.ErrMessageTooLarge, "it fits an empty packet")
		require.Equal(t, 32, enc.Len())
		require.NoError(t, enc.Add(make([]byte, 66))) // 32 + 2 + 66 = 100
		require.Equal(t, size, enc.Len())
		require.Equal(t, 2, enc.Count())
		p, err := wire.ParsePacket(enc.Bytes())
		require.NoError(t, err)
		require.Equal(t, uint16(2), p.Count)
	})
}

func TestEncoderMessageTooLarge(t *testing.T) {
	s := mustSession(t, "BIG")
	for _, tc := range []struct {
		name    string
		payload int
		msgLen  int
	}{
		{"one byte over", 100, 79},
		{"default IPv4", wire.DefaultPayloadSizeIPv4, wire.DefaultPayloadSizeIPv4},
		{"largest payload", wire.MaxPayloadSize, wire.MaxPayloadSize - wire.HeaderLen - wire.MsgLenLen + 1},
		{"beyond a uint16 length", wire.MaxPayloadSize, 0x10000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var enc wire.Encoder
			enc.Reset(nil, s, 1, tc.payload)
			err := enc.Add(make([]byte, tc.msgLen))
			require.ErrorIs(t, err, wire.ErrMessageTooLarge)
			require.NotErrorIs(t, err, wire.ErrPacketFull)
			require.Contains(t, err.Error(), "wire: message too large")
			require.Zero(t, enc.Count())
			require.Equal(t, wire.HeaderLen, enc.Len())

			// Too large also on a packet that already holds a message.
			require.NoError(t, enc.Add([]byte("x")))
			require.ErrorIs(t, enc.Add(make([]byte, tc.msgLen)), wire.ErrMessageTooLarge)
			require.Equal(t, 1, enc.Count())
			// And one byte less always fits an empty packet.
			enc.Reset(nil, s, 1, tc.payload)
			if n := min(tc.msgLen-1, wire.MaxMessageLen(tc.payload)); n >= 0 {
				require.NoError(t, enc.Add(make([]byte, n)))
			}
		})
	}
}

// TestEncoderMaxMessages fills the largest payload with empty messages.
//
// A count of MaxCount (0xFFFE) cannot be reached through the Encoder: 0xFFFE
// empty messages need 20 + 2*0xFFFE = 131,092 bytes, and the payload size is
// clamped to MaxPayloadSize (65,507), which holds 32,743 of them. The count
// guard itself is pinned by the internal TestEncoderCountGuard.
func TestEncoderMaxMessages(t *testing.T) {
	const fit = (wire.MaxPayloadSize - wire.HeaderLen) / wire.MsgLenLen // 32,743
	var enc wire.Encoder
	enc.Reset(make([]byte, 0, wire.MaxPayloadSize), mustSession(t, "MANY"), 1, 1<<20)
	for i := range fit {
		require.NoError(t, enc.Add(nil), "message %d", i)
	}
	require.Equal(t, fit, enc.Count())
	require.ErrorIs(t, enc.Add(nil), wire.ErrPacketFull)
	require.Equal(t, wire.HeaderLen+wire.MsgLenLen*fit, enc.Len())
	require.LessOrEqual(t, enc.Len(), wire.MaxPayloadSize)

	p, err := wire.ParsePacket(enc.Bytes())
	require.NoError(t, err)
	require.Equal(t, fit, p.MessageCount())
	require.Len(t, collect(t, p), fit)
}

// TestEncoderClamp checks that Reset clamps the payload size to
// [MinPayloadSize, MaxPayloadSize], observed through what Add accepts.
func TestEncoderClamp(t *testing.T) {
	s := mustSession(t, "CLAMP")
	for _, tc := range []struct {
		name    string
		payload int
		limit   int
	}{
		{"negative", -1, wire.MinPayloadSize},
		{"zero", 0, wire.MinPayloadSize},
		{"header only", wire.HeaderLen, wire.MinPayloadSize},
		{"one below min", wire.MinPayloadSize - 1, wire.MinPayloadSize},
		{"min", wire.MinPayloadSize, wire.MinPayloadSize},
		{"default IPv6", wire.DefaultPayloadSizeIPv6, wire.DefaultPayloadSizeIPv6},
		{"max", wire.MaxPayloadSize, wire.MaxPayloadSize},
		{"one above max", wire.MaxPayloadSize + 1, wire.MaxPayloadSize},
		{"jumbo 1 MiB", 1 << 20, wire.MaxPayloadSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var enc wire.Encoder
			largest := tc.limit - wire.HeaderLen - wire.MsgLenLen
			require.Equal(t, largest, wire.MaxMessageLen(tc.payload), "MaxMessageLen agrees with the Encoder")
			enc.Reset(nil, s, 1, tc.payload)
			require.ErrorIs(t, enc.Add(make([]byte, largest+1)), wire.ErrMessageTooLarge)
			require.NoError(t, enc.Add(make([]byte, largest)))
			require.Equal(t, tc.limit, enc.Len())
			require.ErrorIs(t, enc.Add(nil), wire.ErrPacketFull)
		})
	}
	require.Equal(t, 1, wire.MaxMessageLen(wire.MinPayloadSize))
	require.Equal(t, 1450, wire.MaxMessageLen(wire.DefaultPayloadSizeIPv4))
}

// TestEncoderNonEmptyBuffer appends packets after existing bytes: the count
// of the packet being built is rewritten in place at its own offset, and
// what came before is left alone.
func TestEncoderNonEmptyBuffer(t *testing.T) {
	s := mustSession(t, "APPEND")
	prefix := []byte("PREFIX-BYTES")
	buf := append(make([]byte, 0, 256), prefix...)

	var enc wire.Encoder
	enc.Reset(buf, s, 100, 64)
	require.NoError(t, enc.Add([]byte("one")))
	require.NoError(t, enc.Add([]byte("two")))
	require.NoError(t, enc.Add([]byte("three")))
	require.Equal(t, 3, enc.Count())
	first := enc.Bytes()
	require.Equal(t, prefix, first[:len(prefix)], "prefix untouched")
	require.Equal(t, len(first)-len(prefix), enc.Len())

	// A second packet right after the first, in the same buffer.
	enc.Reset(first, s, 103, 64)
	require.Zero(t, enc.Count())
	require.NoError(t, enc.Add([]byte("four")))
	both := enc.Bytes()
	require.Equal(t, &buf[:1][0], &both[0], "no reallocation with enough capacity")
	require.Equal(t, prefix, both[:len(prefix)])

	p1, err := wire.ParsePacket(both[len(prefix):len(first)])
	require.NoError(t, err)
	require.Equal(t, uint16(3), p1.Count, "first packet's count untouched by the second")
	require.Equal(t, []string{"one", "two", "three"}, strs(collect(t, p1)))

	p2, err := wire.ParsePacket(both[len(first):])
	require.NoError(t, err)
	require.Equal(t, wire.Seq(103), p2.Seq)
	require.Equal(t, []string{"four"}, strs(collect(t, p2)))
}

// TestEncoderNoMessages: a packet with no messages added is a heartbeat.
func TestEncoderNoMessages(t *testing.T) {
	s := mustSession(t, "HB")
	var enc wire.Encoder
	enc.Reset(nil, s, 77, wire.DefaultPayloadSizeIPv4)
	require.Equal(t, wire.AppendHeartbeat(nil, s, 77), enc.Bytes())
	require.Equal(t, wire.HeaderLen, enc.Len())
}

// TestEncoderReuse resets the Encoder between packets, as a publisher does.
func TestEncoderReuse(t *testing.T) {
	s := mustSession(t, "REUSE")
	var enc wire.Encoder
	buf := make([]byte, 0, wire.DefaultPayloadSizeIPv4)
	seq := wire.Seq(1)
	for round := range 3 {
		enc.Reset(buf[:0], s, seq, wire.DefaultPayloadSizeIPv4)
		for i := range round + 1 {
			require.NoError(t, enc.Add([]byte{byte(round), byte(i)}))
		}
		p, err := wire.ParsePacket(enc.Bytes())
		require.NoError(t, err)
		require.Equal(t, uint16(round+1), p.Count)
		require.Equal(t, seq, p.Seq)
		seq = p.Next()
	}
}

// TestEncoderGrows: without capacity the Encoder grows the buffer and the
// result is the same.
func TestEncoderGrows(t *testing.T) {
	s := mustSession(t, "GROW")
	msgs := [][]byte{bytes.Repeat([]byte("a"), 500), bytes.Repeat([]byte("b"), 900)}
	grown := encodePacket(t, s, 1, wire.DefaultPayloadSizeIPv4, msgs...) // from a nil buffer
	var enc wire.Encoder
	enc.Reset(make([]byte, 0, wire.DefaultPayloadSizeIPv4), s, 1, wire.DefaultPayloadSizeIPv4)
	for _, m := range msgs {
		require.NoError(t, enc.Add(m))
	}
	require.Equal(t, enc.Bytes(), grown)
}

// TestEncoderZeroValue: Add before Reset refuses the message; no panic.
func TestEncoderZeroValue(t *testing.T) {
	var enc wire.Encoder
	require.NotPanics(t, func() {
		err := enc.Add([]byte("x"))
		require.Error(t, err)
		require.False(t, errors.Is(err, wire.ErrPacketFull))
	})
	require.Zero(t, enc.Count())
	require.Empty(t, enc.Bytes())
}

func strs(msgs [][]byte) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m)
	}
	return out
}
