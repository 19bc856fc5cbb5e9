package impair

import (
	"net/netip"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
)

var benchConfigs = []struct {
	name string
	cfg  Config
}{
	{"pass", Config{}},
	{"loss", Config{Loss: 0.01}},
	{"loss+dup+reorder", Config{Loss: 0.01, Duplicate: 0.01, Reorder: 0.01, ReorderWait: time.Minute, Drop: DropSeqs(1 << 40)}},
}

const benchBatch = 32

func BenchmarkReceiver(b *testing.B) {
	ps := packets(benchBatch)
	for _, bc := range benchConfigs {
		b.Run(bc.name, func(b *testing.B) {
			f := newFake(b)
			c, err := NewReceiver(f, bc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if err := c.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
				b.Fatal(err)
			}
			in := sock.NewBatch(benchBatch, 2048)
			b.ReportAllocs()
			b.SetBytes(int64(benchBatch * len(ps[0])))
			for b.Loop() {
				f.push(ps...)
				for f.pendingReads() > 0 || c.r.e.pending() > 0 {
					if _, err := c.ReadBatch(in); err != nil && !sock.IsTimeout(err) {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/datagram")
		})
	}
}

func BenchmarkSender(b *testing.B) {
	ps := packets(benchBatch)
	for _, bc := range benchConfigs {
		b.Run(bc.name, func(b *testing.B) {
			f := newFake(b)
			f.discard = true
			c, err := NewSender(f, bc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			out := sock.NewBatch(benchBatch, 0)
			for i, p := range ps {
				out.Msgs[i].Buf, out.Msgs[i].Addr = p, fakeAddr
			}
			b.ReportAllocs()
			b.SetBytes(int64(benchBatch * len(ps[0])))
			for b.Loop() {
				if _, err := c.WriteBatch(out, benchBatch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/datagram")
		})
	}
}

// BenchmarkLabReceive compares a socket read with and without the
// Receiver wrapper (loss-free impairment: it always has something to
// return, so no read ends in a timeout).
func BenchmarkLabReceive(b *testing.B) {
	netlab.Require(b)
	ps := packets(benchBatch)
	for i, wrapped := range []bool{false, true} {
		name := "raw"
		if wrapped {
			name = "wrapped-dup"
		}
		b.Run(name, func(b *testing.B) {
			group := netip.AddrPortFrom(netip.MustParseAddr("239.77.2.1"), uint16(31201+i))
			var rx sock.PacketConn = labRxB(b, group)
			if wrapped {
				c, err := NewReceiver(rx, Config{Duplicate: 0.01, Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				rx = c
			}
			tx := labTxB(b)
			out := sock.NewBatch(benchBatch, 0)
			for i, p := range ps {
				out.Msgs[i].Buf, out.Msgs[i].Addr = p, group
			}
			in := sock.NewBatch(benchBatch, 2048)
			b.ReportAllocs()
			b.SetBytes(int64(benchBatch * len(ps[0])))
			for b.Loop() {
				if _, err := tx.WriteBatch(out, benchBatch); err != nil {
					b.Fatal(err)
				}
				for got := 0; got < benchBatch; {
					n, err := rx.ReadBatch(in)
					if err != nil {
						b.Fatal(err)
					}
					got += n
				}
				// Duplicates make some reads return more than was sent;
				// what is left over is read in the next round.
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/datagram")
		})
	}
}
