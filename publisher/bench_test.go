package publisher_test

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/wire"
)

// BenchmarkPublish measures the publishing path at full speed: Publish
// from one goroutine, packets sent to a group nobody on the host joined.
// ns/op is per message; MB/s counts message bytes.
func BenchmarkPublish(b *testing.B) {
	netlab.Require(b)
	port := uint16(32000)
	for _, mode := range modes {
		for _, size := range []int{64, 1000} {
			port++
			b.Run(fmt.Sprintf("%s/%dB", mode.name, size), func(b *testing.B) {
				p := open(b, publisher.Config{
					Group: netip.AddrPortFrom(netip.MustParseAddr("239.10.1.1"), port),
					Send:  mode.send,
				})
				msg := make([]byte, size)
				b.ReportAllocs()
				b.SetBytes(int64(size))
				for b.Loop() {
					if _, err := p.Publish(msg); err != nil {
						b.Fatal(err)
					}
				}
				st := p.Stats()
				b.ReportMetric(float64(st.Published)/float64(max(st.Packets, 1)), "msgs/pkt")
			})
		}
	}
}

// BenchmarkPublishBatch publishes 100 messages of 64 bytes per call.
func BenchmarkPublishBatch(b *testing.B) {
	netlab.Require(b)
	p := open(b, publisher.Config{Group: netip.MustParseAddrPort("239.10.1.2:32100")})
	batch := make([][]byte, 100)
	for i := range batch {
		batch[i] = make([]byte, 64)
	}
	b.ReportAllocs()
	b.SetBytes(100 * 64)
	for b.Loop() {
		if _, err := p.PublishBatch(batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLatency measures one message from Publish until a receiver on
// the same host has it (ReadBatch returns), one at a time with a pause of
// gap between messages (busy-waited, so the benchmark itself adds no
// wake-up), reported as "ns/msg". The publisher's added latency is the
// difference from "raw", a bare sendmmsg of the same packet. "goroutine"
// pays a wake-up of the sending goroutine per message; "inline" sends on
// the publishing goroutine.
func BenchmarkLatency(b *testing.B) {
	netlab.Require(b)
	port := uint16(32200)
	for _, gap := range []time.Duration{0, 50 * time.Microsecond} {
		for _, name := range []string{"raw", "goroutine", "inline"} {
			port++
			b.Run(fmt.Sprintf("gap-%v/%s", gap, name), func(b *testing.B) {
				latency(b, netip.AddrPortFrom(netip.MustParseAddr("239.10.1.3"), port), name, gap)
			})
		}
	}
}

func latency(b *testing.B, group netip.AddrPort, name string, gap time.Duration) {
	rx := listen(b, group, "lo")
	in := sock.NewBatch(8, 2048)
	var send func() error
	var p *publisher.Publication
	switch name {
	case "raw":
		ifi, _ := net.InterfaceByName("lo")
		tx, err := sock.Open(sock.Config{Local: netip.MustParseAddrPort("0.0.0.0:0"), Interface: ifi, Loopback: true})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { tx.Close() })
		out := sock.NewBatch(1, 0)
		out.Msgs[0].Addr = group
		var enc wire.Encoder
		seq := wire.Seq(1)
		buf := make([]byte, 0, wire.DefaultPayloadSizeIPv4)
		msg := make([]byte, 64)
		send = func() error {
			enc.Reset(buf[:0], wire.Session{'R'}, seq, wire.DefaultPayloadSizeIPv4)
			_ = enc.Add(msg)
			seq++
			out.Msgs[0].Buf = enc.Bytes()
			_, err := tx.WriteBatch(out, 1)
			return err
		}
	default:
		p = open(b, publisher.Config{Group: group, Send: sendMode(name == "inline"), HeartbeatInterval: -1})
		msg := make([]byte, 64)
		send = func() error { _, err := p.Publish(msg); return err }
	}
	if err := rx.c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	var n int
	b.ReportAllocs()
	for b.Loop() {
		for start := time.Now(); time.Since(start) < gap; {
		}
		start := time.Now()
		if err := send(); err != nil {
			b.Fatal(err)
		}
		if _, err := rx.c.ReadBatch(in); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		n++
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(n), "ns/msg")
	if p != nil {
		st := p.Stats()
		b.ReportMetric(float64(st.InlineSends)/float64(max(st.Packets, 1)), "inline/pkt")
	}
}
