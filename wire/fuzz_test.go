package wire_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/mdbus/mdbus/wire"
)

// FuzzParsePacket feeds arbitrary datagrams to ParsePacket. It must never
// panic; a rejected datagram gets one of the package's sentinels; an
// accepted one yields exactly its count of consecutively numbered messages,
// Len equals the datagram size, and the Encoder (or AppendHeartbeat /
// AppendEndOfSession) rebuilds the datagram byte for byte.
//
// Run: go test ./wire -run='^$' -fuzz='^FuzzParsePacket$' -fuzztime=60s
func FuzzParsePacket(f *testing.F) {
	s := mustSession(f, "FUZZ")
	seeds := [][]byte{
		nil,
		encodePacket(f, s, 1, wire.DefaultPayloadSizeIPv4, []byte("A")),
		encodePacket(f, s, 1, wire.DefaultPayloadSizeIPv4, []byte("HELLO"), nil, []byte("WORLD!")),
		encodePacket(f, s, 1<<40, wire.DefaultPayloadSizeIPv4, bytes.Repeat([]byte{0xFF}, 1000), []byte{0}),
		encodePacket(f, s, ^wire.Seq(0)-1, wire.MinPayloadSize, []byte("Z")),
		wire.AppendHeartbeat(nil, s, 42),
		wire.AppendEndOfSession(nil, s, 42),
		raw("FUZZ", 7, 3, 0, 1, 'A', 0, 2, 'B', 'C'), // count too high
		raw("FUZZ", 7, 1, 0, 1, 'A', 0, 2, 'B', 'C'), // trailing bytes
		raw("FUZZ", 7, wire.MaxCount, 0, 0, 0, 0),    // huge count, few bytes
	}
	for _, g := range loadGoldens(f) {
		seeds = append(seeds, g.data)
	}
	for _, d := range readPcapUDP(f, capturePcap) {
		seeds = append(seeds, d.payload)
	}
	for _, b := range seeds {
		f.Add(b)
	}

	f.Fuzz(func(t *testing.T, b []byte) {
		// A data header CheckData refuses, ParsePacket refuses with the
		// same error.
		if h, err := wire.ParseHeader(b); err == nil && !h.IsHeartbeat() && !h.IsEndOfSession() {
			if herr := h.CheckData(); herr != nil {
				if _, perr := wire.ParsePacket(b); perr != herr {
					t.Fatalf("CheckData: %v, ParsePacket: %v", herr, perr)
				}
			}
		}

		// MessagesOf walks any bytes as message blocks: whole messages
		// only, each a capped sub-slice of b, never past its end.
		off, n := 0, 0
		for it := wire.MessagesOf(b, 7); ; n++ {
			m, seq, ok := it.Next()
			if !ok {
				break
			}
			off += wire.MsgLenLen
			if seq != wire.Seq(7+n) || cap(m) != len(m) || off+len(m) > len(b) || len(m) > 0 && &m[0] != &b[off] {
				t.Fatalf("MessagesOf: message %d (seq %d) is not the capped sub-slice of b at %d", n, seq, off)
			}
			off += len(m)
		}

		p, err := wire.ParsePacket(b)
		if err != nil {
			if !isSentinel(err) {
				t.Fatalf("error %v is not a sentinel", err)
			}
			if p.Len() != wire.HeaderLen || p.Body() != nil || p.Count != 0 {
				t.Fatalf("failed parse returned a non-zero Packet")
			}
			return
		}
		if p.Len() != len(b) {
			t.Fatalf("Len() = %d, datagram is %d bytes", p.Len(), len(b))
		}
		if !p.IsHeartbeat() && !p.IsEndOfSession() {
			if err := p.Header.CheckData(); err != nil {
				t.Fatalf("CheckData of a parsed data packet: %v", err)
			}
		}
		h, err := wire.ParseHeader(b)
		if err != nil || h != p.Header {
			t.Fatalf("ParseHeader = %+v, %v; ParsePacket header %+v", h, err, p.Header)
		}

		// Iterate: exactly MessageCount messages, numbered from Seq, each a
		// capped sub-slice of b right after its length prefix.
		n, off = 0, wire.HeaderLen
		it := p.Messages()
		for {
			m, seq, ok := it.Next()
			if !ok {
				break
			}
			if want := p.Seq + wire.Seq(n); seq != want {
				t.Fatalf("message %d: seq %d, want %d", n, seq, want)
			}
			off += wire.MsgLenLen
			if cap(m) != len(m) || off+len(m) > len(b) || len(m) > 0 && &m[0] != &b[off] {
				t.Fatalf("message %d is not a capped sub-slice of the datagram at %d", n, off)
			}
			off += len(m)
			n++
			if n > wire.MaxCount {
				t.Fatalf("more than MaxCount messages")
			}
		}
		if n != p.MessageCount() || off != len(b) {
			t.Fatalf("iterated %d messages over %d bytes, count %d in %d bytes", n, off, p.Count, len(b))
		}
		// The body walked again without its packet: the same messages.
		again, other := p.Messages(), wire.MessagesOf(p.Body(), p.Seq)
		for i := 0; ; i++ {
			m1, s1, ok1 := again.Next()
			m2, s2, ok2 := other.Next()
			if ok1 != ok2 || s1 != s2 || !bytes.Equal(m1, m2) {
				t.Fatalf("message %d: MessagesOf gave %q (seq %d, %v), Messages %q (seq %d, %v)", i, m2, s2, ok2, m1, s1, ok1)
			}
			if !ok1 {
				break
			}
		}
		if p.IsHeartbeat() || p.IsEndOfSession() {
			if n != 0 || len(b) != wire.HeaderLen {
				t.Fatalf("count %#x with %d messages in %d bytes", p.Count, n, len(b))
			}
		}

		// Re-encode with the datagram size as the payload limit.
		var got []byte
		switch {
		case p.IsHeartbeat():
			got = wire.AppendHeartbeat(nil, p.Session, p.Seq)
		case p.IsEndOfSession():
			got = wire.AppendEndOfSession(nil, p.Session, p.Seq)
		case len(b) > wire.MaxPayloadSize:
			return // valid, but no UDP payload (and so no Encoder) is that large
		default:
			var enc wire.Encoder
			enc.Reset(make([]byte, 0, len(b)), p.Session, p.Seq, len(b))
			it := p.Messages()
			for {
				m, _, ok := it.Next()
				if !ok {
					break
				}
				if err := enc.Add(m); err != nil {
					t.Fatalf("re-encoding message %d of %d: %v", enc.Count(), p.Count, err)
				}
			}
			if enc.Count() != int(p.Count) || enc.Len() != len(b) {
				t.Fatalf("encoder holds %d messages in %d bytes, want %d in %d",
					enc.Count(), enc.Len(), p.Count, len(b))
			}
			// The packet is exactly as large as its limit (or smaller than
			// the minimum limit): one more message of one byte never fits.
			if err := enc.Add([]byte{0}); !errors.Is(err, wire.ErrPacketFull) {
				t.Fatalf("Add past the limit: %v, want ErrPacketFull", err)
			}
			got = enc.Bytes()
		}
		if !bytes.Equal(got, b) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", got, b)
		}
	})
}

// FuzzParseRequest feeds arbitrary datagrams to ParseRequest: no panic,
// only sentinels, and an accepted request re-encodes to the same bytes.
//
// Run: go test ./wire -run='^$' -fuzz='^FuzzParseRequest$' -fuzztime=60s
func FuzzParseRequest(f *testing.F) {
	s := mustSession(f, "FUZZ")
	for _, r := range []wire.Request{
		{Session: s, Seq: 1, Count: 1},
		{Session: s, Seq: 19009117, Count: 38},
		{Session: s, Seq: ^wire.Seq(0) - wire.MaxCount, Count: wire.MaxCount},
		{Session: s, Seq: 0, Count: 1},      // zero seq
		{Session: s, Seq: 1, Count: 0xFFFF}, // end-of-session count
		{Session: s, Seq: ^wire.Seq(0), Count: 1},
	} {
		f.Add(wire.AppendRequest(nil, r))
	}
	for _, g := range loadGoldens(f) {
		f.Add(g.data)
	}
	f.Add([]byte(nil))

	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := wire.ParseRequest(b)
		if err != nil {
			if !isSentinel(err) {
				t.Fatalf("error %v is not a sentinel", err)
			}
			if r != (wire.Request{}) {
				t.Fatalf("failed parse returned %+v", r)
			}
			return
		}
		if !r.Session.Valid() || r.Seq == wire.InvalidSeq || r.Count == 0 || r.Count > wire.MaxCount ||
			r.Seq+wire.Seq(r.Count) < r.Seq {
			t.Fatalf("accepted invalid request %+v", r)
		}
		if r.Length() != len(b) {
			t.Fatalf("Length() = %d, datagram is %d bytes", r.Length(), len(b))
		}
		if got := wire.AppendRequest(nil, r); !bytes.Equal(got, b) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", got, b)
		}
	})
}
