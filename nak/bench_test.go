package nak

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/wire"
)

// streamSim is a subscriber's view of an endless stream at 1 M msg/s with
// random single-message loss; every re-request is answered after a fixed
// latency (the fills arrive later, in request order). It allocates nothing
// per step once warm.
type streamSim struct {
	d          *LossDetector
	rng        uint64 // xorshift state
	lossThr    uint64 // a message is lost when the next random value is below
	now        monotime.Time
	seq        wire.Seq // next sequence sent
	horizon    wire.Seq // next sequence expected
	repairLat  time.Duration
	ring       [1 << 14]repair
	head, tail uint32
	reqs, lost []Range
}

type repair struct {
	at monotime.Time
	r  Range
}

func newStreamSim(cfg Config, loss float64, repairLat time.Duration) *streamSim {
	return &streamSim{
		d:         NewLossDetector(cfg),
		rng:       0x9e3779b97f4a7c15,
		lossThr:   uint64(loss * math.MaxUint64),
		now:       t0,
		seq:       1,
		horizon:   1,
		repairLat: repairLat,
		reqs:      make([]Range, 0, 256),
		lost:      make([]Range, 0, 256),
	}
}

func (s *streamSim) rand() uint64 {
	s.rng ^= s.rng << 13
	s.rng ^= s.rng >> 7
	s.rng ^= s.rng << 17
	return s.rng
}

// step sends one message, delivers the repairs due and polls.
func (s *streamSim) step() {
	s.now = s.now.Add(time.Microsecond)
	seq := s.seq
	s.seq++
	if s.rand() >= s.lossThr {
		if seq > s.horizon {
			s.d.OnGap(s.now, Range{s.horizon, seq})
		}
		s.horizon = seq + 1
		s.d.OnReceived(s.now, Range{seq, seq + 1})
	}
	for s.head != s.tail && s.ring[s.head%uint32(len(s.ring))].at <= s.now {
		s.d.OnReceived(s.now, s.ring[s.head%uint32(len(s.ring))].r)
		s.head++
	}
	s.reqs, s.lost = s.d.Poll(s.now, s.reqs[:0], s.lost[:0])
	for _, r := range s.reqs {
		if s.tail-s.head < uint32(len(s.ring)) { // else the repair is lost
			s.ring[s.tail%uint32(len(s.ring))] = repair{s.now.Add(s.repairLat), r}
			s.tail++
		}
	}
}

func TestStreamSimAllocs(t *testing.T) {
	s := newStreamSim(Config{Seed: 1}, 0.05, 200*time.Microsecond)
	for range 50_000 {
		s.step()
	}
	requireInvariants(t, s.d)
	st := s.d.Stats()
	require.NotZero(t, st.NAKs)
	require.NotZero(t, st.Filled)
	require.Zero(t, st.LostMessages)
	allocs := testing.AllocsPerRun(10_000, s.step)
	require.Zero(t, allocs)
}

// BenchmarkStream is the typical pattern: 5% random single-message loss,
// fills arriving 200 µs after each request. One op is one message; the
// "1M" case runs a whole stream of a million messages per op.
func BenchmarkStream(b *testing.B) {
	for _, loss := range []float64{0.001, 0.05, 0.2} {
		b.Run("loss="+formatPct(loss)+"/per-msg", func(b *testing.B) {
			s := newStreamSim(Config{Seed: 1}, loss, 200*time.Microsecond)
			for range 10_000 {
				s.step()
			}
			b.ReportAllocs()
			for b.Loop() {
				s.step()
			}
			st := s.d.Stats()
			b.ReportMetric(float64(st.NAKs)/float64(s.seq), "NAKs/msg")
		})
	}
	b.Run("loss=5%/1M", func(b *testing.B) {
		s := newStreamSim(Config{Seed: 1}, 0.05, 200*time.Microsecond)
		b.ReportAllocs()
		for b.Loop() {
			s.d.Reset()
			for range 1_000_000 {
				s.step()
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ns/msg")
	})
}

func formatPct(p float64) string {
	switch p {
	case 0.001:
		return "0.1%"
	case 0.05:
		return "5%"
	default:
		return "20%"
	}
}

// BenchmarkGapFill: a gap found and filled before its NAK (reordering).
func BenchmarkGapFill(b *testing.B) {
	d := NewLossDetector(Config{Seed: 1})
	now := t0
	seq := wire.Seq(1)
	b.ReportAllocs()
	for b.Loop() {
		now++
		d.OnGap(now, Range{seq, seq + 1})
		d.OnReceived(now, Range{seq, seq + 1})
		seq += 2
	}
}

// BenchmarkPoll measures Poll with n ranges tracked: nothing due (the fast
// path), and everything due at once (a full scan that asks for all).
func BenchmarkPoll(b *testing.B) {
	for _, n := range []int{16, 1024} {
		setup := func() *LossDetector {
			d := NewLossDetector(Config{Generator: FixedDelay(0), Retry: time.Nanosecond,
				MaxRetry: time.Nanosecond, Deadline: time.Hour})
			for i := range n {
				d.OnGap(t0, Range{wire.Seq(2*i + 1), wire.Seq(2*i + 2)})
			}
			return d
		}
		b.Run("idle/ranges="+itoa(n), func(b *testing.B) {
			d := setup()
			reqs, lost := d.Poll(t0, nil, nil) // schedule the next NAK at t0+1ns
			b.ReportAllocs()
			for b.Loop() {
				reqs, lost = d.Poll(t0, reqs[:0], lost[:0])
			}
		})
		b.Run("all-due/ranges="+itoa(n), func(b *testing.B) {
			d := setup()
			reqs, lost := make([]Range, 0, n), make([]Range, 0, n)
			now := t0
			b.ReportAllocs()
			for b.Loop() {
				reqs, lost = d.Poll(now, reqs[:0], lost[:0])
				now += monotime.Time(time.Nanosecond)
			}
			require.Len(b, reqs, n)
		})
	}
}

func itoa(n int) string {
	if n == 16 {
		return "16"
	}
	return "1024"
}
