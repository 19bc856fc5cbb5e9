package bench

import (
	"bytes"
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/stretchr/testify/require"
)

// TestRawGSODelivers sends 100k messages of two sizes through the raw-gso
// floor as fast as it goes and checks every one arrived, in packets of
// mdbus's size that left in GSO trains.
func TestRawGSODelivers(t *testing.T) {
	netlab.Require(t)
	cfg := smokeConfig(t, 43000)
	cfg.Duration, cfg.Count = 10*time.Second, 100_000
	b, err := New(cfg)
	require.NoError(t, err)
	defer b.Close()
	for _, spec := range []string{"64", "1024"} {
		t.Run(spec, func(t *testing.T) {
			sz, err := ParseSizes(spec, 1450)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			run, err := b.Throughput(ctx, ThroughputCase{System: RawGSO, Sizes: sz})
			require.NoError(t, err)
			require.Equal(t, uint64(100_000), run.Sent.Messages)
			require.Len(t, run.Subs, 1)
			s := run.Subs[0]
			require.True(t, s.Complete, "%+v", s)
			require.Equal(t, run.Sent.Messages, s.Messages)
			require.Equal(t, run.Sent.Bytes, s.Bytes, "bytes are the messages', not the packets'")
			// The same packing as mdbus: (1472-20)/(2+64) = 22 messages
			// of 64 B per packet, one of 1024 B.
			perPacket := map[string]uint64{"64": 22, "1024": 1}[spec]
			require.GreaterOrEqual(t, run.Sent.Packets, run.Sent.Messages/perPacket)
			require.LessOrEqual(t, run.Sent.Packets, run.Sent.Messages/perPacket*11/10+1)
			require.Positive(t, run.GSOPackets, "packets leave in GSO trains")
		})
	}
}

// discardConn is a PacketConn that accepts every datagram.
type discardConn struct {
	sock.PacketConn
	packets, bytes int
}

func (d *discardConn) WriteBatch(b *sock.Batch, n int) (int, error) {
	for _, m := range b.Msgs[:n] {
		d.packets++
		d.bytes += len(m.Buf)
	}
	return n, nil
}

// TestRawGSOAllocs pins zero allocations per message in the raw-gso hot
// loops: packing and sending, and counting a read's packets.
func TestRawGSOAllocs(t *testing.T) {
	group := netip.MustParseAddrPort("239.255.77.1:43100")
	dc := &discardConn{}
	s := newRawGSOPacker(dc, group, 1472, 0)
	ring := newRing(Sizes{}, 256, 1)
	msgs := make([][]byte, 256)
	var seq uint64
	fill := func() {
		for i := range msgs {
			seq++
			msgs[i] = ring.next()
			PutStamp(msgs[i], Now(), seq)
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		fill()
		if err := s.send(msgs); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs, "allocations per send of 256 messages")
	require.Positive(t, dc.packets)

	// The receiver counts packets the sender built.
	sk := newSink()
	r := &rawGSOReceiver{sink: sk, group: group.Addr()}
	var pkts []sock.Message
	cc := &captureConn{out: &pkts}
	s2 := newRawGSOPacker(cc, group, 1472, 0)
	seq = 0
	ring = newRing(Sizes{}, 256, 1)
	fill()
	require.NoError(t, s2.send(msgs))
	require.Len(t, pkts, 12) // 256 messages, 22 a packet
	allocs = testing.AllocsPerRun(100, func() { r.handle(pkts) })
	require.Zero(t, allocs, "allocations per read")
	require.Equal(t, uint64(101*256), sk.msgs)
	require.Equal(t, uint64(101*256*64), sk.bytes)
	require.Equal(t, uint64(256), sk.next-1)
	require.Equal(t, uint64(100*256), sk.disorder, "replays of the same packets are out of order")
}

// captureConn keeps a copy of every datagram written.
type captureConn struct {
	sock.PacketConn
	out *[]sock.Message
}

func (c *captureConn) WriteBatch(b *sock.Batch, n int) (int, error) {
	for _, m := range b.Msgs[:n] {
		*c.out = append(*c.out, sock.Message{Buf: append([]byte(nil), m.Buf...), Addr: m.Addr})
	}
	return n, nil
}

// TestRawGSOSinkRun checks the per-packet sequence check and sampling.
func TestRawGSOSinkRun(t *testing.T) {
	sk := newSink()
	sk.sampleMask = 63
	sk.run(1, 22, 22*64, 0, 0, 0)
	sk.run(23, 22, 22*64, 0, 0, 0)
	sk.run(45, 22, 22*64, 0, 0, 0) // holds 64, the one sampled sequence
	sk.run(89, 22, 22*64, 0, 0, 0) // 67..88 lost
	sk.run(23, 22, 22*64, 0, 0, 0) // a duplicate
	require.Equal(t, uint64(110), sk.msgs)
	require.Equal(t, uint64(110*64), sk.bytes)
	require.Equal(t, uint64(22), sk.missing)
	require.Equal(t, uint64(22), sk.disorder)
	require.Equal(t, uint64(111), sk.next)
	require.Equal(t, uint64(1), sk.measured)
}

// TestRawGSOWarmup: a packet that straddles the end of a latency run's
// warm-up counts as measured only its messages scheduled after it, and
// samples the latency of the first of them.
func TestRawGSOWarmup(t *testing.T) {
	group := netip.MustParseAddrPort("239.255.77.1:43100")
	var pkts []sock.Message
	s := newRawGSOPacker(&captureConn{out: &pkts}, group, 1472, 0)
	ring := newRing(Sizes{}, 22, 1)
	msgs := make([][]byte, 22)
	for i := range msgs {
		msgs[i] = ring.next()
		PutStamp(msgs[i], int64(100+i), uint64(i+1))
	}
	require.NoError(t, s.send(msgs))
	require.Len(t, pkts, 1)
	sk := newSink()
	sk.setWarmup(110)
	r := &rawGSOReceiver{sink: sk, group: group.Addr()}
	r.handle(pkts)
	require.Equal(t, uint64(22), sk.msgs)
	require.Equal(t, uint64(12), sk.measured, "messages scheduled at 110..121")
	skip, sched := inWarmup(pkts[0].Buf[rawGSOHeaderLen:], 22, 110)
	require.Equal(t, 10, skip)
	require.Equal(t, int64(110), sched)
	skip, _ = inWarmup(pkts[0].Buf[rawGSOHeaderLen:], 22, 1000)
	require.Equal(t, 22, skip, "all in the warm-up")
}

// TestRawGSOCapacityCells: raw-gso gets a cell beside mdbus for every
// payload size (never a lossy one), and the table and the ratios show
// mdbus ÷ raw-gso in bytes/s.
func TestRawGSOCapacityCells(t *testing.T) {
	s64, _ := ParseSizes("64", 9000)
	s4k, _ := ParseSizes("4000", 9000)
	cases := CapacityCases(CapacityMatrix{
		Systems: []System{Mdbus, RawGSO}, PayloadSizes: []int{1472, 8972},
		Sizes: []Sizes{s64, s4k}, Subscribers: []int{1}, Losses: []float64{0.01},
	})
	type cell struct {
		sys  System
		size string
		pay  int
		loss float64
	}
	var got []cell
	for _, c := range cases {
		got = append(got, cell{c.System, c.Sizes.String(), c.PayloadSize, c.Loss})
	}
	require.Equal(t, []cell{
		{Mdbus, "64", 1472, 0}, {Mdbus, "64", 1472, 0.01}, {Mdbus, "64", 8972, 0}, {Mdbus, "64", 8972, 0.01},
		{RawGSO, "64", 1472, 0}, {RawGSO, "64", 8972, 0},
		{Mdbus, "4000", 8972, 0}, {Mdbus, "4000", 8972, 0.01},
		{RawGSO, "4000", 8972, 0},
	}, got)

	r := &Report{
		Command: "capacity",
		Capacity: []CapacityResult{
			{Name: "mdbus 64B in 1472B packets 1->1 goroutine", System: Mdbus, PayloadSize: 1472, Size: "64", Subscribers: 1,
				Capacity: 5e6, BytesPerSec: 320e6, Limit: LimitConverged, Resolution: 0.05, Probe: 3},
			{Name: "mdbus 64B in 8972B packets 1->1 goroutine", System: Mdbus, PayloadSize: 8972, Size: "64", Subscribers: 1,
				Capacity: 6e6, BytesPerSec: 384e6, Limit: LimitConverged},
			{Name: "raw-gso 64B in 1472B packets 1->1 goroutine", System: RawGSO, PayloadSize: 1472, Size: "64", Subscribers: 1,
				Capacity: 8e6, BytesPerSec: 512e6, Limit: LimitSender},
			{Name: "raw 64B 1->1 goroutine", System: Raw, Size: "64", Subscribers: 1, Capacity: 250e3, BytesPerSec: 16e6, Limit: LimitSender},
		},
	}
	r.Ratios = ratios(nil, nil, r.Capacity)
	var gso []Ratio
	for _, q := range r.Ratios {
		if strings.HasSuffix(q.What, "bytes/s vs raw-gso") {
			gso = append(gso, q)
		}
	}
	require.Len(t, gso, 1, "only the 1472 B cell has a raw-gso twin: %+v", r.Ratios)
	require.InDelta(t, 0.625, gso[0].Ratio, 1e-9)
	require.Len(t, r.Ratios, 3, "two vs raw, one vs raw-gso")
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, r))
	out := buf.String()
	require.Contains(t, out, "vs raw-gso")
	require.Contains(t, out, "0.62x")
	require.Contains(t, out, "20.00x", "the vs-raw column stays")
}
