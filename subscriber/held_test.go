package subscriber

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/wire"
)

// TestInsertHeldKeepsOrder drives insertHeld with random inserts at the
// front, middle and back, interleaved with drains from the front and
// releases from the back, and checks the window against a plain sorted
// slice after every step: whichever side it moves, it neither loses nor
// reorders a packet, and the backing array stays within twice the bound.
func TestInsertHeldKeepsOrder(t *testing.T) {
	for _, reorder := range []int{1, 7, 300, 5000} {
		c := &core{cfg: coreConfig{reorder: reorder}}
		s := &stream{}
		var want []wire.Seq
		rng := rand.New(rand.NewPCG(uint64(reorder), 1))
		next := wire.Seq(1 << 20)
		for step := range 20000 {
			switch op := rng.IntN(10); {
			case op < 6 && len(s.held) < reorder:
				var seq wire.Seq
				switch rng.IntN(3) {
				case 0: // live feed: past everything held
					next += wire.Seq(1 + rng.IntN(3))
					seq = next
				default: // a repair somewhere behind
					seq = next - wire.Seq(rng.IntN(1<<16))
				}
				i, found := slices.BinarySearch(want, seq)
				if found {
					continue
				}
				c.insertHeld(s, i, heldPacket{seq: seq, end: seq + 1})
				want = slices.Insert(want, i, seq)
			case op < 8 && len(s.held) > 0: // drain k from the front
				k := 1 + rng.IntN(len(s.held))
				clear(s.held[:k])
				s.held = s.held[k:]
				if len(s.held) == 0 {
					s.held = s.heldBase[:0]
				}
				want = want[k:]
			case op == 8 && len(s.held) > 0: // release from the back
				k := rng.IntN(len(s.held))
				s.held = s.held[:k]
				want = want[:k]
			}
			if len(s.held) != len(want) {
				t.Fatalf("reorder %d step %d: held %d, want %d", reorder, step, len(s.held), len(want))
			}
			for j := range want {
				if s.held[j].seq != want[j] {
					t.Fatalf("reorder %d step %d: held[%d] = %d, want %d", reorder, step, j, s.held[j].seq, want[j])
				}
			}
			if cap(s.heldBase) > 2*max(reorder, heldInitial) {
				t.Fatalf("reorder %d: backing array %d", reorder, cap(s.heldBase))
			}
		}
	}
}

// BenchmarkHoldRepairBehindBacklog measures a repair landing near the
// front of a full window of 100,000 held packets: the cost insertHeld
// keeps to the entries before it, not the 100,000 after.
func BenchmarkHoldRepairBehindBacklog(b *testing.B) {
	const n = 100_000
	c := &core{cfg: coreConfig{reorder: 2 * n}}
	s := &stream{}
	for i := range n {
		c.insertHeld(s, i, heldPacket{seq: wire.Seq(2*i + 10), end: wire.Seq(2*i + 11)})
	}
	b.ReportAllocs()
	for b.Loop() {
		// Fill a hole near the front, then take it out again as drain
		// would, so the window keeps its shape.
		c.insertHeld(s, 3, heldPacket{seq: 15, end: 16})
		copy(s.held[1:4], s.held[:3])
		s.held[0] = heldPacket{}
		s.held = s.held[1:]
	}
}

// BenchmarkDrainBacklog measures holding and then delivering a backlog:
// the first packet of each batch of held+1 (22 messages of 64 bytes, the
// 1,472-byte packets of a real feed) arrives last, so the others are
// copied into the reorder buffer and delivered when it comes. With
// thousands held the copies are out of the CPU's caches by then, as
// behind a gap on a busy host.
func BenchmarkDrainBacklog(b *testing.B) {
	for _, held := range []int{64, 1024, 8192} {
		b.Run(fmt.Sprintf("held=%d", held), func(b *testing.B) {
			var s sink
			f := newDirectFeed(b, held+1, 22, 64, Config{OnMessage: s.onMessage, Receive: Receive{ReorderPackets: 2 * held}})
			inOrder := make([]int, held+1)
			order := make([]int, held+1)
			for i := range order {
				inOrder[i] = i
				order[i] = (i + 1) % (held + 1)
			}
			f.renumber(inOrder)
			f.run() // start the stream in order (it joins live at the first packet)
			f.renumber(order)
			f.run() // grow the reorder buffer and its slots
			b.SetBytes(int64((held + 1) * len(f.dgs[0])))
			b.ReportAllocs()
			for b.Loop() {
				f.renumber(order)
				f.run()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(s.n), "ns/msg")
			if st := f.c.stats(); st.Dropped != 0 || st.Held != 0 {
				b.Fatalf("dropped %v, held %d", st.Drops, st.Held)
			}
		})
	}
}

// TestPacketStart checks that PacketStart marks the first message each
// packet delivers: in order, after the duplicate front of an overlapping
// packet is skipped, and for a held packet delivered by drain.
func TestPacketStart(t *testing.T) {
	h := newHarness(t, Config{StartSeq: 1})
	starts := map[wire.Seq]bool{}
	h.c.cfg.onMessage = func(m Message) {
		starts[m.Seq] = m.PacketStart
		h.onMessage(m)
	}
	h.feed(srcA, pkt(sessA, 1, 3)) // 1-3 in order
	h.feed(srcA, pkt(sessA, 7, 3)) // 7-9 held behind the gap 4-6
	h.feed(srcA, pkt(sessA, 3, 4)) // 3 again, then 4-6; drains 7-9
	want := map[wire.Seq]bool{1: true, 2: false, 3: false, 4: true, 5: false, 6: false, 7: true, 8: false, 9: false}
	require.Equal(t, want, starts)
	require.EqualValues(t, 1, h.stats().Duplicates)
}
