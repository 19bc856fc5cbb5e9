package wire_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/wire"
)

// TestAllocs pins zero allocations on the hot paths: encoding into a
// pre-sized buffer, parsing and iterating, and re-requests.
func TestAllocs(t *testing.T) {
	const runs = 200
	s := mustSession(t, "ALLOC")
	msg := bytes.Repeat([]byte{0x5A}, 64)
	buf := make([]byte, 0, wire.DefaultPayloadSizeIPv4)
	var enc wire.Encoder

	t.Run("Encoder Reset Add Bytes", func(t *testing.T) {
		var n int
		allocs := testing.AllocsPerRun(runs, func() {
			enc.Reset(buf[:0], s, 1, wire.DefaultPayloadSizeIPv4)
			for enc.Add(msg) == nil { // ends with ErrPacketFull after 22 messages
			}
			n += len(enc.Bytes())
		})
		require.Zero(t, allocs)
		// 22 messages of 64 bytes fill 1472 bytes exactly; AllocsPerRun
		// makes one warm-up call before the measured ones.
		require.Equal(t, wire.DefaultPayloadSizeIPv4, wire.PacketLen(22, 22*64))
		require.Equal(t, (runs+1)*wire.DefaultPayloadSizeIPv4, n)
	})

	t.Run("AppendHeartbeat AppendEndOfSession", func(t *testing.T) {
		allocs := testing.AllocsPerRun(runs, func() {
			b := wire.AppendHeartbeat(buf[:0], s, 5)
			_ = wire.AppendEndOfSession(b, s, 5)
		})
		require.Zero(t, allocs)
	})

	datagrams := [][]byte{
		encodePacket(t, s, 1, wire.DefaultPayloadSizeIPv4, msg, msg, nil, msg),
		wire.AppendHeartbeat(nil, s, 9),
	}
	for _, d := range readPcapUDP(t, capturePcap) {
		datagrams = append(datagrams, d.payload)
	}
	t.Run("ParsePacket and iteration", func(t *testing.T) {
		var total int
		allocs := testing.AllocsPerRun(runs, func() {
			for _, d := range datagrams {
				p, err := wire.ParsePacket(d)
				if err != nil {
					panic(err) // own test data; never happens
				}
				it := p.Messages()
				for {
					m, _, ok := it.Next()
					if !ok {
						break
					}
					total += len(m)
				}
			}
		})
		require.Zero(t, allocs)
		require.NotZero(t, total)
	})

	t.Run("ParsePacket errors", func(t *testing.T) {
		bad := [][]byte{nil, raw("S", 1, 2, 0, 1, 'A'), raw("S", 0, 1, 0, 0), raw("\x00", 1, 1, 0, 0)}
		allocs := testing.AllocsPerRun(runs, func() {
			for _, b := range bad {
				if _, err := wire.ParsePacket(b); err == nil {
					panic("accepted")
				}
			}
		})
		require.Zero(t, allocs)
	})

	t.Run("ParseRequest AppendRequest", func(t *testing.T) {
		req := wire.AppendRequest(nil, wire.Request{Session: s, Seq: 100, Count: 10})
		out := make([]byte, 0, wire.RequestLen)
		allocs := testing.AllocsPerRun(runs, func() {
			r, err := wire.ParseRequest(req)
			if err != nil {
				panic(err)
			}
			out = wire.AppendRequest(out[:0], r)
			if _, err := wire.ParseRequest(out[:5]); err == nil {
				panic("accepted")
			}
		})
		require.Zero(t, allocs)
		require.Equal(t, req, out)
	})
}
