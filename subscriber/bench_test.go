package subscriber

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// sink is an OnMessage that reads each message's length and first byte,
// without allocating, so benchmarks measure the bus rather than the
// application.
type sink struct{ n, sum uint64 }

func (s *sink) onMessage(m Message) {
	s.n++
	if len(m.Data) > 0 {
		s.sum += uint64(len(m.Data)) + uint64(m.Data[0])
	}
}

// directFeed is a core and a reader whose batch points at prebuilt
// datagrams: it runs the receive path minus the syscall.
type directFeed struct {
	c    *core
	r    *reader
	dgs  [][]byte
	msgs int // messages per datagram
	next wire.Seq
	now  monotime.Time
}

func newDirectFeed(tb testing.TB, batch, msgs, size int, cfg Config) *directFeed {
	tb.Helper()
	cfg.Group = testGroup
	cfg, err := cfg.withDefaults()
	require.NoError(tb, err)
	f := &directFeed{c: newCore(cfg.core()), msgs: msgs, next: 1}
	f.r = &reader{c: f.c, batch: sock.NewBatch(batch, 0), group: testGroup.Addr()}
	msg := make([]byte, size)
	for i := range batch {
		var e wire.Encoder
		e.Reset(nil, sessA, 1, wire.MaxPayloadSize)
		for range msgs {
			require.NoError(tb, e.Add(msg))
		}
		f.dgs = append(f.dgs, e.Bytes())
		f.r.batch.Msgs[i] = sock.Message{Buf: e.Bytes(), Addr: srcA, Dst: testGroup.Addr()}
	}
	return f
}

// renumber gives datagram i the sequence the stream expects at offset
// order[i] packets from now.
func (f *directFeed) renumber(order []int) {
	for i, o := range order {
		binary.BigEndian.PutUint64(f.dgs[i][wire.SeqOffset:], uint64(f.next)+uint64(o*f.msgs))
	}
	f.next += wire.Seq(len(order) * f.msgs)
}

// run handles the batch as the receive loop does.
func (f *directFeed) run() {
	f.now++
	f.c.mu.Lock()
	f.r.handleLocked(f.r.batch, len(f.dgs), f.now)
	f.c.mu.Unlock()
}

func TestDeliverAllocs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		order []int // arrival order of the batch's packets
	}{
		{"in-order", []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"reordered", []int{1, 0, 3, 2, 7, 6, 5, 4}},
		{"reversed", []int{7, 6, 5, 4, 3, 2, 1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s sink
			var gaps int
			f := newDirectFeed(t, len(tc.order), 10, 30, Config{
				OnMessage: s.onMessage,
				OnGap:     func(Gap) { gaps++ },
			})
			f.renumber([]int{0, 1, 2, 3, 4, 5, 6, 7})
			f.run() // start the stream in order (it joins live at the first packet)
			f.renumber(tc.order)
			f.run() // fill the free list
			allocs := testing.AllocsPerRun(1000, func() {
				f.renumber(tc.order)
				f.run()
			})
			require.Zero(t, allocs)
			st := f.c.stats()
			require.EqualValues(t, (2+1001)*8*10, st.Messages)
			require.Equal(t, st.Messages, s.n)
			require.Zero(t, st.Held)
			require.Zero(t, st.Dropped)
			if tc.name != "in-order" {
				require.NotZero(t, gaps)
			}
		})
	}
}

func TestDuplicateAndDropAllocs(t *testing.T) {
	var s sink
	f := newDirectFeed(t, 4, 5, 20, Config{OnMessage: s.onMessage})
	f.renumber([]int{0, 1, 2, 3})
	f.run()
	f.renumber([]int{0, 1, 2, 3}) // stale copies of sequence 1 on would be a suspected restart
	f.run()
	f.r.batch.Msgs[1].Dst = netip.MustParseAddr("239.9.9.9")         // wrong group
	f.r.batch.Msgs[2].Buf = f.r.batch.Msgs[2].Buf[:wire.HeaderLen-1] // short
	allocs := testing.AllocsPerRun(1000, func() { f.run() })         // all stale now; AllocsPerRun runs f once more to warm up
	require.Zero(t, allocs)
	st := f.c.stats()
	require.EqualValues(t, 1001*2, st.Drops[DropDuplicate])
	require.EqualValues(t, 1001, st.Drops[DropWrongGroup])
	require.EqualValues(t, 1001, st.Drops[DropShortHeader])
}

// BenchmarkDeliver measures the receive path without the socket: a batch of
// 64 datagrams, decoded, sequenced and delivered one message at a time.
func BenchmarkDeliver(b *testing.B) {
	for _, tc := range []struct {
		msgs, size int
		reorder    bool
	}{{1, 40, false}, {10, 40, false}, {32, 40, false}, {10, 40, true}} {
		name := fmt.Sprintf("msgs=%d/size=%d", tc.msgs, tc.size)
		if tc.reorder {
			name += "/reordered"
		}
		b.Run(name, func(b *testing.B) {
			var s sink
			const batch = 64
			f := newDirectFeed(b, batch, tc.msgs, tc.size, Config{OnMessage: s.onMessage})
			order := make([]int, batch)
			for i := range order {
				order[i] = i
				if tc.reorder {
					order[i] = i ^ 1 // swap pairs
				}
			}
			inOrder := make([]int, batch)
			for i := range inOrder {
				inOrder[i] = i
			}
			f.renumber(inOrder)
			f.run() // start the stream in order (it joins live at the first packet)
			f.renumber(order)
			f.run() // grow the reorder slots
			b.SetBytes(int64(batch * len(f.dgs[0])))
			b.ReportAllocs()
			for b.Loop() {
				f.renumber(order)
				f.run()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(s.n), "ns/msg")
			if f.c.st.Dropped != 0 {
				b.Fatalf("dropped %v", f.c.st.Drops)
			}
		})
	}
}

// labSender opens a sender socket on lo bound to src (any when invalid).
func labSender(tb testing.TB, src netip.Addr) *sock.Conn {
	tb.Helper()
	lo, err := net.InterfaceByName("lo")
	require.NoError(tb, err)
	if !src.IsValid() {
		src = netip.IPv4Unspecified()
	}
	c, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(src, 0), Interface: lo, Loopback: true, WriteBuffer: 4 << 20})
	require.NoError(tb, err)
	tb.Cleanup(func() { c.Close() })
	return c
}

// socketFeed is an opened subscriber (no goroutine) and a sender with a
// batch of packets for it.
type socketFeed struct {
	s    *Subscriber
	tx   *sock.Conn
	out  *sock.Batch
	msgs int
	next wire.Seq
}

func newSocketFeed(tb testing.TB, group netip.AddrPort, batch, msgs, size int, onMessage func(Message)) *socketFeed {
	tb.Helper()
	s, err := open(Config{Group: group, OnMessage: onMessage, Receive: Receive{BatchSize: batch, ReadBuffer: 4 << 20}, Logger: discard})
	require.NoError(tb, err)
	tb.Cleanup(func() { s.conn.Close() })
	f := &socketFeed{s: s, tx: labSender(tb, netip.Addr{}), out: sock.NewBatch(batch, 0), msgs: msgs, next: 1}
	msg := make([]byte, size)
	for i := range batch {
		var e wire.Encoder
		e.Reset(nil, sessA, 1, wire.MaxPayloadSize)
		for range msgs {
			require.NoError(tb, e.Add(msg))
		}
		f.out.Msgs[i] = sock.Message{Buf: e.Bytes(), Addr: group}
	}
	return f
}

// roundTrip sends the batch and reads until all of it has been handled.
func (f *socketFeed) roundTrip(tb testing.TB) {
	n := len(f.out.Msgs)
	for i := range f.out.Msgs {
		binary.BigEndian.PutUint64(f.out.Msgs[i].Buf[wire.SeqOffset:], uint64(f.next))
		f.next += wire.Seq(f.msgs)
	}
	if _, err := f.tx.WriteBatch(f.out, n); err != nil {
		tb.Fatal(err)
	}
	want := f.s.c.st.Datagrams + uint64(n)
	for f.s.c.st.Datagrams < want { // only this goroutine touches the core
		if err := f.s.r.readOnce(); err != nil {
			tb.Fatal(err)
		}
	}
}

func TestReceiveAllocs(t *testing.T) {
	netlab.Require(t)
	var s sink
	f := newSocketFeed(t, netip.MustParseAddrPort("239.7.1.1:31001"), 16, 10, 30, s.onMessage)
	require.NoError(t, f.s.conn.SetReadDeadline(time.Now().Add(20*time.Second)))
	f.roundTrip(t)
	allocs := testing.AllocsPerRun(200, func() { f.roundTrip(t) })
	require.Zero(t, allocs)
	st := f.s.c.stats()
	require.EqualValues(t, (1+201)*16*10, st.Messages)
	require.Zero(t, st.Dropped)
}

// BenchmarkReceive measures the whole receive path on lo: sendmmsg of 64
// packets, recvmmsg, decode, sequence, deliver.
func BenchmarkReceive(b *testing.B) {
	netlab.Require(b)
	for _, msgs := range []int{1, 10, 32} {
		b.Run(fmt.Sprintf("msgs=%d/size=40", msgs), func(b *testing.B) {
			var s sink
			f := newSocketFeed(b, netip.MustParseAddrPort("239.7.1.2:31002"), 64, msgs, 40, s.onMessage)
			require.NoError(b, f.s.conn.SetReadDeadline(time.Now().Add(time.Minute)))
			b.SetBytes(int64(64 * len(f.out.Msgs[0].Buf)))
			b.ReportAllocs()
			for b.Loop() {
				f.roundTrip(b)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(s.n), "ns/msg")
			st := f.s.c.stats()
			if st.Dropped != 0 || st.KernelDrops != 0 {
				b.Fatalf("dropped %v, kernel drops %d", st.Drops, st.KernelDrops)
			}
		})
	}
}
