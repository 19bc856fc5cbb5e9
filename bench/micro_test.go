package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// nullSender takes messages and does nothing: it isolates the cost of the
// benchmark's own sending loop.
type nullSender struct{ n uint64 }

func (s *nullSender) send(msgs [][]byte) error         { s.n += uint64(len(msgs)); return nil }
func (s *nullSender) finish(ctx context.Context) error { return nil }
func (s *nullSender) close() error                     { return nil }
func (s *nullSender) packets() uint64                  { return s.n }

func TestHotPathAllocs(t *testing.T) {
	c := newCollector(Now(), time.Hour)
	defer c.close()
	sk := newSink()
	sk.lat = c.recorder("a", "a", Now())
	msg := make([]byte, 64)
	var seq uint64
	allocs := testing.AllocsPerRun(10_000, func() {
		seq++
		PutStamp(msg, Now(), seq)
		sk.message(msg, 0)
	})
	require.Zero(t, allocs, "recording a delivered message must not allocate")
	sz, _ := ParseSizes("64", 1450)
	ring := newRing(sz, 64, 1)
	snd := &nullSender{}
	allocs = testing.AllocsPerRun(100, func() {
		sendLoop(context.Background(), snd, ring, loopParams{count: 256, duration: time.Second, batch: 64})
	})
	require.LessOrEqual(t, allocs, 1.0, "one batch slice per run, nothing per message")
}

func BenchmarkNow(b *testing.B) {
	b.ReportAllocs()
	var x int64
	for b.Loop() {
		x += Now()
	}
	_ = x
}

func BenchmarkSinkMessage(b *testing.B) {
	for _, tc := range []struct {
		name string
		mask uint64
		lat  bool
	}{{"count-only", 63, false}, {"sampled-latency", 63, true}, {"every-latency", 0, true}} {
		b.Run(tc.name, func(b *testing.B) {
			c := newCollector(Now(), time.Hour)
			defer c.close()
			sk := newSink()
			sk.sampleMask = tc.mask
			if tc.lat {
				sk.lat = c.recorder("a", "a", Now())
			}
			msg := make([]byte, 64)
			b.SetBytes(64)
			b.ReportAllocs()
			var seq uint64
			now := Now()
			for b.Loop() {
				seq++
				PutStamp(msg, now, seq)
				sk.message(msg, 0)
			}
		})
	}
}

func BenchmarkRecorderRecord(b *testing.B) {
	c := newCollector(Now(), time.Hour)
	defer c.close()
	r := c.recorder("a", "a", Now())
	now := Now()
	b.ReportAllocs()
	var v int64
	for b.Loop() {
		v = (v + 7919) % 1_000_000
		r.Record(now, v)
	}
}

func BenchmarkSendLoop(b *testing.B) {
	sz, _ := ParseSizes("64", 1450)
	ring := newRing(sz, 256, 1)
	const per = 1 << 16
	b.SetBytes(64 * per)
	b.ReportAllocs()
	snd := &nullSender{}
	for b.Loop() {
		sendLoop(context.Background(), snd, ring, loopParams{count: per, duration: time.Minute, batch: 256})
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(snd.n), "ns/msg")
}
