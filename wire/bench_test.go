package wire_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/mdbus/mdbus/wire"
)

// benchSizes are the message sizes of the Encode and Parse sub-benchmarks.
// One op is one full packet of DefaultPayloadSizeIPv4; SetBytes counts the
// message bytes it carries, and ns/msg divides the time by its messages.
var benchSizes = []int{16, 64, 256, 1000}

// perPacket is how many messages of size bytes fill a default IPv4 packet.
func perPacket(size int) int {
	return (wire.DefaultPayloadSizeIPv4 - wire.HeaderLen) / (wire.MsgLenLen + size)
}

func reportPerMsg(b *testing.B, msgsPerOp int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(msgsPerOp), "ns/msg")
}

func BenchmarkEncode(b *testing.B) {
	s := mustSession(b, "BENCH")
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			msg := bytes.Repeat([]byte{0xA5}, size)
			n := perPacket(size)
			buf := make([]byte, 0, wire.DefaultPayloadSizeIPv4)
			var enc wire.Encoder
			seq := wire.Seq(1)
			b.SetBytes(int64(n * size))
			b.ReportAllocs()
			for b.Loop() {
				enc.Reset(buf[:0], s, seq, wire.DefaultPayloadSizeIPv4)
				for range n {
					if err := enc.Add(msg); err != nil {
						b.Fatal(err)
					}
				}
				seq += wire.Seq(n)
			}
			reportPerMsg(b, n)
		})
	}
	// The first 1000 messages of NASDAQ's ITCH 5.0 sample (mostly 20-40
	// bytes), packed greedily into default IPv4 packets. One op is all 1000.
	b.Run("itch50", func(b *testing.B) {
		msgs := readBlocks(b, captureBin)
		total := 0
		for _, m := range msgs {
			total += len(m)
		}
		buf := make([]byte, 0, wire.DefaultPayloadSizeIPv4)
		var enc wire.Encoder
		b.SetBytes(int64(total))
		b.ReportAllocs()
		for b.Loop() {
			enc.Reset(buf[:0], s, 1, wire.DefaultPayloadSizeIPv4)
			for i, m := range msgs {
				err := enc.Add(m)
				if errors.Is(err, wire.ErrPacketFull) {
					enc.Reset(buf[:0], s, wire.Seq(1+i), wire.DefaultPayloadSizeIPv4)
					err = enc.Add(m)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		reportPerMsg(b, len(msgs))
	})
}

func BenchmarkParse(b *testing.B) {
	s := mustSession(b, "BENCH")
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			n := perPacket(size)
			msgs := make([][]byte, n)
			for i := range msgs {
				msgs[i] = bytes.Repeat([]byte{byte(i)}, size)
			}
			pkt := encodePacket(b, s, 1, wire.DefaultPayloadSizeIPv4, msgs...)
			b.SetBytes(int64(n * size))
			b.ReportAllocs()
			var total int
			for b.Loop() {
				total += parseAll(b, pkt)
			}
			if total != b.N*n*size {
				b.Fatalf("parsed %d message bytes, want %d", total, b.N*n*size)
			}
			reportPerMsg(b, n)
		})
	}
	// The 38-message packet of the real NASDAQ capture.
	b.Run("itch50-pcap", func(b *testing.B) {
		pkt := readPcapUDP(b, capturePcap)[1].payload
		p, err := wire.ParsePacket(pkt)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(pkt) - wire.HeaderLen - wire.MsgLenLen*int(p.Count)))
		b.ReportAllocs()
		for b.Loop() {
			parseAll(b, pkt)
		}
		reportPerMsg(b, int(p.Count))
	})
}

// parseAll parses pkt and walks its messages, returning their total size.
func parseAll(b *testing.B, pkt []byte) int {
	p, err := wire.ParsePacket(pkt)
	if err != nil {
		b.Fatal(err)
	}
	total := 0
	it := p.Messages()
	for {
		m, _, ok := it.Next()
		if !ok {
			return total
		}
		total += len(m)
	}
}

func BenchmarkParseRequest(b *testing.B) {
	req := wire.AppendRequest(nil, wire.Request{Session: mustSession(b, "BENCH"), Seq: 19009117, Count: 38})
	b.SetBytes(wire.RequestLen)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.ParseRequest(req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendRequest(b *testing.B) {
	r := wire.Request{Session: mustSession(b, "BENCH"), Seq: 19009117, Count: 38}
	buf := make([]byte, 0, wire.RequestLen)
	b.SetBytes(wire.RequestLen)
	b.ReportAllocs()
	for b.Loop() {
		buf = wire.AppendRequest(buf[:0], r)
	}
}
