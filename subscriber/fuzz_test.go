package subscriber

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/wire"
)

// fuzzSources are the senders a fuzz input picks from.
var fuzzSources = [...]netip.AddrPort{
	netip.MustParseAddrPort("127.0.0.1:1"),
	netip.MustParseAddrPort("127.0.0.2:2"),
	netip.MustParseAddrPort("127.0.0.3:3"),
	netip.MustParseAddrPort("[fd77::1]:4"),
}

// fuzzFrame appends one datagram to a fuzz input: a control byte (bits
// 0-1 source, bit 2 wrong group, bit 3 truncated flag, bit 4 repair, bit 5
// then run the NAK timer after advancing the clock by 20 ms times 1 plus
// bits 6-7), a big-endian uint16 length, then the datagram.
func fuzzFrame(in []byte, ctl byte, d []byte) []byte {
	in = append(in, ctl)
	in = binary.BigEndian.AppendUint16(in, uint16(len(d)))
	return append(in, d...)
}

// FuzzCore feeds arbitrary datagrams to the stream logic, and runs its NAK
// timer now and then. Whatever they hold, it must not panic, must deliver
// each stream in order without repeats (a Loss standing for the sequences
// it names), must never report a delivered sequence as missing or lost,
// must keep streams, held packets and tracked gaps within their bounds, and
// must never request more than it tracks.
func FuzzCore(f *testing.F) {
	a, b := sessA, sessB
	var seed []byte
	for _, d := range [][]byte{pkt(a, 1, 2), pkt(a, 5, 1), pkt(a, 3, 2), hb(a, 9), eos(a, 9), pkt(a, 6, 3)} {
		seed = fuzzFrame(seed, 0, d)
	}
	f.Add(seed, false)
	seed = nil
	for i, d := range [][]byte{pkt(a, 1, 1), pkt(b, 1, 1), pkt(a, 2, 1), pkt(b, 3, 1), pkt(a, 1<<40, 1), raw(a, 2, 0xFFFF, 0, 1, 'x')} {
		seed = fuzzFrame(seed, byte(i%4), d)
	}
	f.Add(seed, true)
	f.Add(fuzzFrame(fuzzFrame(nil, 0, pkt(a, 10, 1)), 0x10, pkt(a, 8, 3)), false)  // repair fills
	f.Add(fuzzFrame(fuzzFrame(nil, 0, pkt(a, 1, 1)), 0x04, pkt(a, 2, 1)), false)   // wrong group
	f.Add(fuzzFrame(fuzzFrame(nil, 1, raw(a, 1, 3, 0, 9)), 0x08, hb(a, 1)), false) // malformed, truncated
	// A gap, the timer past the deadline (loss), more data, a late fill.
	seed = fuzzFrame(fuzzFrame(nil, 0, pkt(a, 1, 1)), 0x20|0xC0, pkt(a, 4, 2))
	seed = fuzzFrame(fuzzFrame(seed, 0, pkt(a, 6, 1)), 0x30, pkt(a, 2, 2))
	f.Add(seed, false)
	f.Add(seed, true)
	// A heartbeat far ahead: beyond MaxPending, lost at once.
	f.Add(fuzzFrame(fuzzFrame(nil, 0, pkt(a, 1, 1)), 0x20, hb(a, 900)), false)
	// A restart on the same source (sequence 1 again, twice), and a jump
	// beyond MaxGap confirmed by a second packet.
	seed = nil
	for _, d := range [][]byte{pkt(a, 1, 3), pkt(a, 4, 3), eos(a, 7), pkt(a, 1, 2), pkt(a, 3, 2), pkt(a, 2000, 1), pkt(a, 2001, 2)} {
		seed = fuzzFrame(seed, 0, d)
	}
	f.Add(seed, false)
	f.Add([]byte{}, false)
	// Confirms on the repair socket: of a gap being repaired, "later",
	// of an unknown session, and one with a bad kind.
	seed = fuzzFrame(nil, 0, pkt(a, 1, 1))
	seed = fuzzFrame(seed, 0, pkt(a, 5, 1))
	seed = fuzzFrame(seed, 0x10, wire.AppendConfirm(nil, wire.Confirm{Session: a, Seq: 2, Count: 3, Kind: wire.ConfirmSending, Group: 9}))
	seed = fuzzFrame(seed, 0x30, wire.AppendConfirm(nil, wire.Confirm{Session: a, Seq: 2, Count: 2, Kind: wire.ConfirmLater, After: 1e6}))
	seed = fuzzFrame(seed, 0x10, wire.AppendConfirm(nil, wire.Confirm{Session: b, Seq: 1, Count: 1, Kind: wire.ConfirmSending}))
	bad := wire.AppendConfirm(nil, wire.Confirm{Session: a, Seq: 2, Count: 1, Kind: wire.ConfirmSending})
	bad[wire.HeaderLen+3] = 7
	seed = fuzzFrame(seed, 0x30, bad)
	f.Add(seed, false)

	const (
		maxStreams = 3
		reorder    = 4
		maxPending = 64
		maxRequest = 16
	)
	f.Fuzz(func(t *testing.T, in []byte, stop bool) {
		policy := LossContinue
		if stop {
			policy = LossStop
		}
		h := newHarness(t, Config{Limits: Limits{MaxStreams: maxStreams, MaxGap: 1000}, Receive: Receive{ReorderPackets: reorder},
			Recovery: Recovery{
				Retransmitter: repairer,
				LossPolicy:    policy,
				NAK: nak.Config{Generator: nak.FixedDelay(time.Millisecond), Retry: 5 * time.Millisecond,
					Deadline: 50 * time.Millisecond, MaxPending: maxPending, MaxRequest: maxRequest},
			},
		})
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
			if ctl&0x20 != 0 {
				h.now = h.now.Add(time.Duration(1+ctl>>6) * 20 * time.Millisecond)
				for _, r := range h.poll() {
					if r.Count == 0 || r.Count > maxRequest {
						t.Fatalf("request %+v: count beyond MaxRequest %d", r, maxRequest)
					}
				}
			}

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
				if len(s.lost) > 0 && s.lost[0].From <= s.next {
					t.Fatalf("stream %v: lost %v reached by next %d but not reported", s.id, s.lost[0], s.next)
				}
				for i, r := range s.lost {
					if r.From >= r.To || r.To > s.horizon || i > 0 && s.lost[i-1].To > r.From {
						t.Fatalf("stream %v: lost ranges %v, horizon %d", s.id, s.lost, s.horizon)
					}
				}
				if s.nak != nil {
					if s.nak.Pending() > maxPending {
						t.Fatalf("stream %v tracks %d missing, bound %d", s.id, s.nak.Pending(), maxPending)
					}
					for _, r := range s.nak.AppendMissing(nil) {
						if r.From < s.next || r.To > s.horizon {
							t.Fatalf("stream %v: tracks %v outside [next %d, horizon %d)", s.id, r, s.next, s.horizon)
						}
					}
				}
				if (s.ended || s.stopped) && (len(s.held) > 0 || len(s.lost) > 0 || s.nak != nil && s.nak.Pending() > 0) {
					t.Fatalf("stream %v ended or stopped with work left", s.id)
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
