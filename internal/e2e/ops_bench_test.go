//go:build linux

package e2e

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/tools/counters"
	"github.com/stretchr/testify/require"
)

// counterModes compare the hot path with and without counters: no
// counters file; the default file sampled every 100 ms; and sampled every
// millisecond, a hundred times more often than mdbus does, to make any
// effect of sampling on the hot path visible; then no counters again, as a
// control: on a shared machine later runs of the same benchmark are slower
// (sockets, memory, neighbours), and "on" must be judged between two "off".
var counterModes = []struct {
	name     string
	interval time.Duration // 0: no counters
}{{"counters=off", 0}, {"counters=100ms", 100 * time.Millisecond}, {"counters=1ms", time.Millisecond}, {"counters=off-again", 0}}

func attachCounters(b *testing.B, interval time.Duration, attach func(f *counters.File)) {
	if interval == 0 {
		return
	}
	f, err := counters.Create(counters.Config{Dir: b.TempDir(), Role: "bench", Interval: interval})
	require.NoError(b, err)
	b.Cleanup(func() { f.Close() })
	attach(f)
}

// BenchmarkOpsPublish is publisher.BenchmarkPublish (64-byte messages to
// a group nobody joined) with and without a counters file sampling the
// publication.
func BenchmarkOpsPublish(b *testing.B) {
	netlab.Require(b)
	for i, m := range counterModes {
		b.Run(m.name, func(b *testing.B) {
			p, err := publisher.New(publisher.Config{Group: netip.AddrPortFrom(netip.MustParseAddr("239.10.9.1"), uint16(32200+i))})
			require.NoError(b, err)
			defer p.Close()
			attachCounters(b, m.interval, func(f *counters.File) { counters.AttachPublisher(f, "pub", p) })
			msg := make([]byte, 64)
			b.ReportAllocs()
			b.SetBytes(64)
			for b.Loop() {
				if _, err := p.Publish(msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpsReceive publishes b.N 64-byte messages to a subscriber in
// this process and waits for the last: ns/op is per delivered message,
// with and without a counters file sampling the subscriber and its
// streams. The publisher is paced at 2M messages/s (unpaced, the kernel
// drops on a loaded machine), so 500 ns/op means the subscriber kept up;
// more means sampling (or a neighbour) made it fall behind.
func BenchmarkOpsReceive(b *testing.B) {
	netlab.Require(b)
	for i, m := range counterModes {
		b.Run(m.name, func(b *testing.B) {
			group := netip.AddrPortFrom(netip.MustParseAddr("239.10.9.2"), uint16(32300+i))
			var got atomic.Int64
			s, err := subscriber.New(subscriber.Config{Group: group, StartSeq: 1, Receive: subscriber.Receive{ReadBuffer: 32 << 20},
				OnMessage: func(subscriber.Message) { got.Add(1) }})
			require.NoError(b, err)
			defer s.Close()
			p, err := publisher.New(publisher.Config{Group: group, RateMessages: 2_000_000})
			require.NoError(b, err)
			defer p.Close()
			attachCounters(b, m.interval, func(f *counters.File) { counters.AttachSubscriber(f, "sub", s) })
			msg := make([]byte, 64)
			b.ReportAllocs()
			b.SetBytes(64)
			n := 0
			for b.Loop() {
				if _, err := p.Publish(msg); err != nil {
					b.Fatal(err)
				}
				n++
			}
			if !poll(30*time.Second, func() bool { return got.Load() >= int64(n) }) {
				b.Fatalf("delivered %d of %d: %+v", got.Load(), n, s.Stats())
			}
			if st := s.Stats(); st.LostMessages != 0 || st.KernelDrops != 0 {
				b.Fatal(fmt.Sprintf("lost %d, kernel drops %d", st.LostMessages, st.KernelDrops))
			}
		})
	}
}
