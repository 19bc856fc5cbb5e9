package impair

import (
	"bytes"
	"testing"
	"time"
	"unsafe"

	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// within reports whether b's first byte lies inside buf.
func within(b, buf []byte) bool {
	if len(b) == 0 || len(buf) == 0 {
		return false
	}
	p, lo := uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&buf[0]))
	return p >= lo && p < lo+uintptr(len(buf))
}

// A datagram that passes straight through is handed out from the inner
// batch, not copied (deliver): the zero-copy path this pins.
func TestPassThroughNotCopied(t *testing.T) {
	f := newFake(t)
	c, err := NewReceiver(f, Config{Loss: 0.5, Seed: 1})
	require.NoError(t, err)
	defer c.Close()
	ps := packets(64)
	f.push(ps...)
	b := sock.NewBatch(64, 2048)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Second)))
	n, err := c.ReadBatch(b)
	require.NoError(t, err)
	require.Positive(t, n)
	for i, m := range b.Msgs[:n] {
		require.False(t, within(m.Buf, b.Buffer(i)), "datagram %d was copied into the caller's buffer", i)
		require.Equal(t, ps[seqOf(t, m.Buf)-1], m.Buf)
	}
}

// Pass-through datagrams (pointing into the inner batch) and delayed or
// duplicated ones (copied from slots into the caller's buffers, which an
// earlier read had pointed elsewhere) arrive byte-identical, across many
// reads with small caller batches, so that no copy ever lands on bytes
// still to be handed out.
func TestPassThroughAndSlotsByteIdentical(t *testing.T) {
	const n = 5000
	f := newFake(t)
	c, err := NewReceiver(f, Config{Loss: 0.05, Reorder: 0.2, ReorderDepth: 8, Duplicate: 0.1, Seed: 7})
	require.NoError(t, err)
	defer c.Close()
	ps := make([][]byte, n)
	for i := range ps {
		// Bodies differ in length and content per packet.
		ps[i] = dataPacket(wire.Seq(i+1), 1+i%5)
	}
	b := sock.NewBatch(7, 2048)
	seen, copied, aliased := 0, 0, 0
	check := func(k int) {
		for i, m := range b.Msgs[:k] {
			s := seqOf(t, m.Buf)
			require.True(t, bytes.Equal(ps[s-1], m.Buf), "datagram %d changed", s)
			if within(m.Buf, b.Buffer(i)) {
				copied++
			} else {
				aliased++
			}
			seen++
		}
	}
	pump(t, f, c, ps, b, check)
	st := c.Stats()
	require.Equal(t, st.Seen-st.Dropped+st.Duplicated, uint64(seen))
	require.Positive(t, copied, "delayed and duplicated datagrams are copied")
	require.Positive(t, aliased, "pass-through datagrams are not")
}

// A caller whose buffers are smaller than the inner batch's (an earlier
// caller batch was larger) still gets its datagrams cut to its buffer and
// marked Truncated, as from a socket.
func TestPassThroughTruncatesToCallerBuffer(t *testing.T) {
	f := newFake(t)
	c, err := NewReceiver(f, Config{Loss: 0.000001, Seed: 1})
	require.NoError(t, err)
	defer c.Close()
	big := sock.NewBatch(2, 2048)
	p1, p2 := dataPacket(1, 10), dataPacket(2, 10)
	f.push(p1)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Second)))
	k, err := c.ReadBatch(big)
	require.NoError(t, err)
	require.Equal(t, 1, k)
	require.Equal(t, p1, big.Msgs[0].Buf)
	f.push(p2)
	small := sock.NewBatch(2, 30)
	k, err = c.ReadBatch(small)
	require.NoError(t, err)
	require.Equal(t, 1, k)
	require.True(t, small.Msgs[0].Truncated)
	require.Equal(t, p2[:30], small.Msgs[0].Buf)
}
