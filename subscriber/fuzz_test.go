package subscriber

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/mdbus/mdbus/internal/sock"
)

// fuzzSources are the senders a fuzz input picks from.
var fuzzSources = [...]netip.AddrPort{
	netip.MustParseAddrPort("127.0.0.1:1"),
	netip.MustParseAddrPort("127.0.0.2:2"),
	netip.MustParseAddrPort("127.0.0.3:3"),
	netip.MustParseAddrPort("[fd77::1]:4"),
}

// fuzzFrame appends one datagram to a fuzz input: a control byte (bits
// 0-1 source, bit 2 wrong group, bit 3 truncated flag, bit 4 repair), a
// big-endian uint16 length, then the datagram.
func fuzzFrame(in []byte, ctl byte, d []byte) []byte {
	in = append(in, ctl)
	in = binary.BigEndian.AppendUint16(in, uint16(len(d)))
	return append(in, d...)
}

// FuzzCore feeds arbitrary datagrams to the stream logic. Whatever they
// hold, it must not panic, must deliver each stream in order without
// repeats, must never report a delivered sequence as missing, and must
// keep streams and held packets within their bounds.
func FuzzCore(f *testing.F) {
	a, b := sessA, sessB
	var seed []byte
	for _, d := range [][]byte{pkt(a, 1, 2), pkt(a, 5, 1), pkt(a, 3, 2), hb(a, 9), eos(a, 9), pkt(a, 6, 3)} {
		seed = fuzzFrame(seed, 0, d)
	}
	f.Add(seed)
	seed = nil
	for i, d := range [][]byte{pkt(a, 1, 1), pkt(b, 1, 1), pkt(a, 2, 1), pkt(b, 3, 1), pkt(a, 1<<40, 1), raw(a, 2, 0xFFFF, 0, 1, 'x')} {
		seed = fuzzFrame(seed, byte(i%4), d)
	}
	f.Add(seed)
	f.Add(fuzzFrame(fuzzFrame(nil, 0, pkt(a, 10, 1)), 0x10, pkt(a, 8, 3)))  // repair fills
	f.Add(fuzzFrame(fuzzFrame(nil, 0, pkt(a, 1, 1)), 0x04, pkt(a, 2, 1)))   // wrong group
	f.Add(fuzzFrame(fuzzFrame(nil, 1, raw(a, 1, 3, 0, 9)), 0x08, hb(a, 1))) // malformed, truncated
	f.Add([]byte{})

	const (
		maxStreams = 3
		reorder    = 4
	)
	f.Fuzz(func(t *testing.T, in []byte) {
		h := newHarness(t, Config{MaxStreams: maxStreams, ReorderPackets: reorder, MaxGap: 1000})
		h.checkPayload = false
		for len(in) >= 3 {
			ctl := in[0]
			n := int(binary.BigEndian.Uint16(in[1:]))
			in = in[3:]
			n = min(n, len(in))
			d := in[:n:n]
			in = in[n:]
			m := sock.Message{Buf: d, Addr: fuzzSources[ctl&3], Dst: testGroup.Addr(), Truncated: ctl&8 != 0}
			if ctl&4 != 0 {
				m.Dst = netip.MustParseAddr("239.7.7.8")
			}
			h.r.repair = ctl&0x10 != 0
			h.feedMsg(m)

			h.c.mu.Lock()
			held := 0
			for _, s := range h.c.streams {
				if len(s.held) > reorder {
					t.Fatalf("stream %v holds %d packets, bound %d", s.id, len(s.held), reorder)
				}
				for i := 1; i < len(s.held); i++ {
					if s.held[i-1].seq > s.held[i].seq {
						t.Fatalf("stream %v: held packets out of order", s.id)
					}
				}
				if s.next > s.horizon {
					t.Fatalf("stream %v: next %d past horizon %d", s.id, s.next, s.horizon)
				}
				for _, hp := range s.held {
					if hp.seq <= s.next || len(hp.buf) > 1<<16 || hp.end <= hp.seq {
						t.Fatalf("stream %v: held %d..%d with next %d", s.id, hp.seq, hp.end, s.next)
					}
				}
				held += len(s.held)
			}
			if len(h.c.streams) > maxStreams {
				t.Fatalf("%d streams, bound %d", len(h.c.streams), maxStreams)
			}
			if held != h.c.st.Held {
				t.Fatalf("held %d, counted %d", held, h.c.st.Held)
			}
			if held+len(h.c.free) > maxStreams*reorder {
				t.Fatalf("%d slot buffers exist, bound %d", held+len(h.c.free), maxStreams*reorder)
			}
			st := h.c.st
			h.c.mu.Unlock()
			var dropped uint64
			for _, d := range st.Drops {
				dropped += d
			}
			if dropped != st.Dropped || st.Dropped > st.Datagrams {
				t.Fatalf("drops %v add to %d, counted %d of %d datagrams", st.Drops, dropped, st.Dropped, st.Datagrams)
			}
		}
	})
}
