//go:build linux

package sock_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/stretchr/testify/require"
)

// gsoNet is where a GSO test sends: two destinations of one family, each
// with a plain (non-GRO) receiving socket, so every train arrives cut
// into its datagrams.
type gsoNet struct {
	name   string
	v6     bool
	ifname string // multicast interface; "" for unicast
	dst    [2]netip.AddrPort
	seg    int  // the largest datagram the interface's MTU takes whole
	jumbo  bool // the MTU takes 8972-byte datagrams
}

var gsoNets = []gsoNet{
	{name: "ipv4-multicast-lo", ifname: "lo", seg: 1472, jumbo: true,
		dst: [2]netip.AddrPort{netip.MustParseAddrPort("239.1.3.1:30101"), netip.MustParseAddrPort("239.1.3.2:30102")}},
	{name: "ipv6-unicast-lo", v6: true, seg: 1452, jumbo: true,
		dst: [2]netip.AddrPort{netip.MustParseAddrPort("[::1]:30103"), netip.MustParseAddrPort("[::1]:30104")}},
	{name: "ipv6-multicast-veth", v6: true, ifname: netlab.VethA, seg: 1452,
		dst: [2]netip.AddrPort{netip.MustParseAddrPort("[ff15::3:1]:30105"), netip.MustParseAddrPort("[ff15::3:2]:30106")}},
	{name: "ipv4-multicast-veth", ifname: netlab.VethA, seg: 1472,
		dst: [2]netip.AddrPort{netip.MustParseAddrPort("239.1.3.3:30107"), netip.MustParseAddrPort("239.1.3.4:30108")}},
}

// pkt is one datagram of a GSO test: its length and destination index.
type pkt struct{ size, dst int }

func equal(n, size int) []pkt {
	p := make([]pkt, n)
	for i := range p {
		p[i].size = size
	}
	return p
}

// gsoCases give, for a network, the datagrams to send in one WriteBatch
// and the trains and segments (datagrams in trains) that must result.
var gsoCases = []struct {
	name string
	make func(n gsoNet) (pkts []pkt, trains, segs int)
}{
	{"mixed-lengths", func(n gsoNet) ([]pkt, int, int) {
		// A shorter datagram ends a train; a longer one starts the next.
		s := n.seg
		return []pkt{{s, 0}, {s, 0}, {s, 0}, {900, 0}, {s, 0}, {s, 0}, {100, 0}}, 2, 7
	}},
	{"shorter-then-longer", func(n gsoNet) ([]pkt, int, int) {
		// [100] [900 900 900 50] [50 50] [seg]
		return []pkt{{100, 0}, {900, 0}, {900, 0}, {900, 0}, {50, 0}, {50, 0}, {50, 0}, {n.seg, 0}}, 2, 6
	}},
	{"two-addresses", func(n gsoNet) ([]pkt, int, int) {
		return []pkt{{1000, 0}, {1000, 0}, {1000, 0}, {1000, 1}, {1000, 1}, {1000, 0}, {1000, 1}, {1000, 1}}, 3, 7
	}},
	{"empty-and-single", func(n gsoNet) ([]pkt, int, int) {
		// Empty datagrams never join a train.
		return []pkt{{500, 0}, {0, 0}, {500, 0}, {500, 0}, {0, 0}, {0, 0}, {7, 1}}, 1, 2
	}},
	{"segment-limit", func(n gsoNet) ([]pkt, int, int) {
		// 130 equal datagrams: trains of 64, 64 and 2.
		return equal(130, 500), 3, 130
	}},
	{"byte-limit", func(n gsoNet) ([]pkt, int, int) {
		// As many full datagrams as fit the largest train, and 6 more.
		fit := sock.MaxGSOBytes(n.v6) / n.seg
		return equal(fit+6, n.seg), 2, fit + 6
	}},
	{"exact-byte-limit", func(n gsoNet) ([]pkt, int, int) {
		// A train of exactly the largest size: full datagrams and a
		// shorter last one.
		max := sock.MaxGSOBytes(n.v6)
		fit := max / n.seg
		return append(equal(fit, n.seg), pkt{max - fit*n.seg, 0}), 1, fit + 1
	}},
	{"jumbo", func(n gsoNet) ([]pkt, int, int) {
		if !n.jumbo {
			return nil, 0, 0
		}
		// 7 jumbo datagrams fit the largest train.
		return equal(10, 8972), 2, 10
	}},
}

// payload fills datagram i of a test with bytes that tell it apart.
func payload(i, size int, salt byte) []byte {
	b := make([]byte, size)
	for k := range b {
		b[k] = byte(i*7+k*13) ^ salt
	}
	if size >= 4 {
		binary.BigEndian.PutUint32(b, uint32(i))
	}
	return b
}

// gsoPair opens a GSO sender (gso as given) and one plain receiver per
// destination of n.
func gsoPair(t *testing.T, n gsoNet, gso bool) (tx *sock.Conn, rx [2]*sock.Conn) {
	t.Helper()
	wild := netip.IPv4Unspecified()
	if n.v6 {
		wild = netip.IPv6Unspecified()
	}
	var ifi *net.Interface
	if n.ifname != "" {
		var err error
		ifi, err = net.InterfaceByName(n.ifname)
		require.NoError(t, err)
	}
	for d, dst := range n.dst {
		local := dst
		if dst.Addr().IsMulticast() {
			local = netip.AddrPortFrom(wild, dst.Port())
		}
		c, err := sock.Open(sock.Config{Local: local, ReusePort: true, ReadBuffer: 16 << 20})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		if dst.Addr().IsMulticast() {
			require.NoError(t, c.Join(ifi, dst.Addr(), netip.Addr{}))
		}
		rx[d] = c
	}
	tx, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(wild, 0), Interface: ifi, Loopback: true, WriteBuffer: 8 << 20, GSO: gso})
	require.NoError(t, err)
	t.Cleanup(func() { tx.Close() })
	return tx, rx
}

// fill points out's first len(pkts) messages at fresh payloads and returns
// them.
func fill(out *sock.Batch, n gsoNet, pkts []pkt, salt byte) [][]byte {
	sent := make([][]byte, len(pkts))
	for i, p := range pkts {
		sent[i] = payload(i, p.size, salt)
		out.Msgs[i].Buf = sent[i]
		out.Msgs[i].Addr = n.dst[p.dst]
	}
	return sent
}

// expectDelivery reads what each receiver got and requires that it is
// exactly the datagrams sent to it, once each, in order, byte-identical,
// with no kernel drops: it reads until all arrived, then waits a moment
// for duplicates.
func expectDelivery(t *testing.T, rx [2]*sock.Conn, pkts []pkt, sent [][]byte) {
	t.Helper()
	in := sock.NewBatch(64, 9216)
	for d, c := range rx {
		var want [][]byte
		for i, p := range pkts {
			if p.dst == d {
				want = append(want, sent[i])
			}
		}
		got := 0
		deadline := time.Now().Add(5 * time.Second)
		require.NoError(t, c.SetReadDeadline(deadline))
		for got < len(want) {
			n, err := c.ReadBatch(in)
			require.NoError(t, err, "receiver %d: %d of %d datagrams arrived", d, got, len(want))
			for i := range n {
				m := in.Msgs[i]
				require.Less(t, got, len(want), "receiver %d: more datagrams than sent", d)
				require.False(t, m.Truncated)
				if !bytes.Equal(want[got], m.Buf) {
					t.Fatalf("receiver %d, datagram %d of %d: got %d bytes (%x...), want %d (%x...)",
						d, got, len(want), len(m.Buf), m.Buf[:min(8, len(m.Buf))], len(want[got]), want[got][:min(8, len(want[got]))])
				}
				got++
			}
		}
		require.Zero(t, in.Drops, "receiver %d: kernel drops", d)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
		n, err := c.ReadBatch(in)
		require.True(t, sock.IsTimeout(err), "receiver %d: %d datagrams beyond those sent (%v)", d, n, err)
	}
}

// TestGSOTrains: runs of equal-length datagrams go as trains (counted
// exactly), split where the length grows, the address changes, or the
// segment or byte limit is reached, and every datagram arrives once, in
// order and byte-identical at a plain receiving socket, over IPv4 and
// IPv6, on lo and a veth, unicast and multicast.
func TestGSOTrains(t *testing.T) {
	netlab.Require(t)
	for _, n := range gsoNets {
		t.Run(n.name, func(t *testing.T) {
			tx, rx := gsoPair(t, n, true)
			require.True(t, tx.GSOStats().Active, "this kernel offers UDP_SEGMENT (4.18 and later)")
			out := sock.NewBatch(256, 0)
			for ci, tc := range gsoCases {
				pkts, trains, segs := tc.make(n)
				if pkts == nil {
					continue
				}
				t.Run(tc.name, func(t *testing.T) {
					before := tx.GSOStats()
					sent := fill(out, n, pkts, byte(ci))
					k, err := tx.WriteBatch(out, len(pkts))
					require.NoError(t, err)
					require.Equal(t, len(pkts), k)
					after := tx.GSOStats()
					require.True(t, after.Active, "GSO fell back: %v", after.Reason)
					require.Equal(t, uint64(trains), after.Trains-before.Trains, "trains")
					require.Equal(t, uint64(segs), after.Segments-before.Segments, "datagrams in trains")
					expectDelivery(t, rx, pkts, sent)
				})
			}
		})
	}
}

// TestGSOOff: without Config.GSO, WriteBatch sends no trains.
func TestGSOOff(t *testing.T) {
	netlab.Require(t)
	n := gsoNets[0]
	tx, rx := gsoPair(t, n, false)
	out := sock.NewBatch(64, 0)
	pkts := equal(20, 1000)
	sent := fill(out, n, pkts, 1)
	k, err := tx.WriteBatch(out, len(pkts))
	require.NoError(t, err)
	require.Equal(t, len(pkts), k)
	require.Equal(t, sock.GSOStats{}, tx.GSOStats())
	expectDelivery(t, rx, pkts, sent)
}

// TestGSOFallback: when the kernel refuses a train for want of GSO (EIO
// from a device without checksum offload, injected here; EINVAL from a
// socket with UDP checksums off, the real kernel's answer), the Conn turns
// GSO off for good, counts it, and sends the refused train's datagrams and
// the rest one per slot: every datagram arrives exactly once, and
// WriteBatch reports them all sent.
func TestGSOFallback(t *testing.T) {
	netlab.Require(t)
	// A single datagram first (sent before the train is refused), then
	// trains.
	pkts := []pkt{{100, 1}, {1472, 0}, {1472, 0}, {1472, 0}, {900, 0}, {1472, 1}, {1472, 1}, {1472, 0}}
	// Segments larger than the veth's 1500-byte MTU: GSO cannot cut
	// them, a plain send fragments them.
	big := []pkt{{100, 1}, {3000, 0}, {3000, 0}, {2000, 0}, {3000, 1}, {3000, 1}}
	for _, tc := range []struct {
		name   string
		net    gsoNet
		pkts   []pkt
		refuse func(*sock.Conn) error
		reason syscall.Errno
	}{
		{"injected-EIO", gsoNets[0], pkts, func(c *sock.Conn) error { sock.InjectGSOFault(c, syscall.EIO); return nil }, syscall.EIO},
		{"kernel-no-checksum", gsoNets[0], pkts, sock.SetNoCheck, syscall.EINVAL},
		{"kernel-above-mtu", gsoNets[3], big, func(*sock.Conn) error { return nil }, syscall.EMSGSIZE},
	} {
		n, pkts := tc.net, tc.pkts
		t.Run(tc.name, func(t *testing.T) {
			tx, rx := gsoPair(t, n, true)
			require.NoError(t, tc.refuse(tx))
			out := sock.NewBatch(64, 0)
			sent := fill(out, n, pkts, 2)
			k, err := tx.WriteBatch(out, len(pkts))
			require.NoError(t, err)
			require.Equal(t, len(pkts), k)
			st := tx.GSOStats()
			require.Equal(t, sock.GSOStats{Fallbacks: 1, Reason: tc.reason}, st)
			expectDelivery(t, rx, pkts, sent)

			// Later batches go one per slot without trying again.
			sent = fill(out, n, pkts, 3)
			k, err = tx.WriteBatch(out, len(pkts))
			require.NoError(t, err)
			require.Equal(t, len(pkts), k)
			require.Equal(t, st, tx.GSOStats())
			expectDelivery(t, rx, pkts, sent)
		})
	}
}

// TestGSORefusedTrain: a train the kernel refuses for another reason is
// refused whole: WriteBatch returns the datagrams sent before it and the
// error, and GSO stays on.
func TestGSORefusedTrain(t *testing.T) {
	netlab.Require(t)
	n := gsoNets[0]
	tx, rx := gsoPair(t, n, true)
	sock.InjectGSOFault(tx, syscall.EPERM)
	pkts := []pkt{{100, 1}, {300, 1}, {1000, 0}, {1000, 0}, {1000, 0}}
	out := sock.NewBatch(8, 0)
	sent := fill(out, n, pkts, 4)
	k, err := tx.WriteBatch(out, len(pkts))
	require.ErrorIs(t, err, syscall.EPERM)
	require.Equal(t, 2, k, "the two datagrams before the refused train")
	st := tx.GSOStats()
	require.True(t, st.Active)
	require.Zero(t, st.Fallbacks)
	require.Zero(t, st.Trains)
	expectDelivery(t, rx, pkts[:2], sent[:2])
}

// TestGSOZeroAlloc: WriteBatch with trains allocates nothing.
func TestGSOZeroAlloc(t *testing.T) {
	netlab.Require(t)
	n := gsoNets[0]
	tx, rx := gsoPair(t, n, true)
	pkts := append(equal(40, 1472), pkt{300, 0}, pkt{1472, 1}, pkt{1472, 1})
	out := sock.NewBatch(len(pkts), 0)
	fill(out, n, pkts, 5)
	in := sock.NewBatch(64, 2048)
	for _, c := range rx {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
	}
	before := tx.GSOStats()
	const runs = 100
	allocs := testing.AllocsPerRun(runs, func() {
		if k, err := tx.WriteBatch(out, len(pkts)); err != nil || k != len(pkts) {
			t.Fatalf("WriteBatch = %d, %v", k, err)
		}
		for d, want := range []int{41, 2} {
			for got := 0; got < want; {
				k, err := rx[d].ReadBatch(in)
				if err != nil {
					t.Fatal(err)
				}
				got += k
			}
		}
	})
	require.Zero(t, allocs)
	require.Equal(t, uint64(2*(runs+1)), tx.GSOStats().Trains-before.Trains)
}

// BenchmarkWriteBatchGSO sends batches of 64 datagrams of 1472 bytes (a
// publisher's full batch at a 1500-byte MTU) to one multicast group on lo
// with a plain receiver draining it, with and without GSO. The receiver
// pays per datagram either way (it is not a GRO socket): on lo the
// segmentation happens when the train reaches it, inside the sender's
// sendmmsg, so this is the kernel's whole cost of the send.
func BenchmarkWriteBatchGSO(b *testing.B) {
	netlab.Require(b)
	for _, size := range []int{1024, 1472} {
		for _, gso := range []bool{false, true} {
			b.Run(fmt.Sprintf("size=%d/gso=%v", size, gso), func(b *testing.B) {
				benchWriteBatch(b, size, gso)
			})
		}
	}
}

// drainQuiet is how long a socket's queue must stay empty to be taken
// for drained: far longer than the reader takes to come back for more.
const drainQuiet = 20 * time.Millisecond

func benchWriteBatch(b *testing.B, size int, gso bool) {
	const batch = 64
	group := netip.MustParseAddrPort("239.1.3.9:30120")
	ifi, err := net.InterfaceByName("lo")
	require.NoError(b, err)
	rx, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(netip.IPv4Unspecified(), group.Port()), ReusePort: true, ReadBuffer: 16 << 20})
	require.NoError(b, err)
	require.NoError(b, rx.Join(ifi, group.Addr(), netip.Addr{}))
	tx, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(netip.IPv4Unspecified(), 0), Interface: ifi, Loopback: true, WriteBuffer: 8 << 20, GSO: gso})
	require.NoError(b, err)
	defer tx.Close()
	var wg sync.WaitGroup
	var received int
	var draining atomic.Bool
	wg.Add(1)
	go func() {
		defer wg.Done()
		in := sock.NewBatch(64, 2048)
		for {
			if draining.Load() && rx.SetReadDeadline(time.Now().Add(drainQuiet)) != nil {
				return
			}
			n, err := rx.ReadBatch(in)
			if err != nil {
				return // after the run, a queue quiet for drainQuiet: drained
			}
			received += n
		}
	}()
	out := sock.NewBatch(batch, 0)
	buf := make([]byte, batch*size)
	for i := range out.Msgs {
		out.Msgs[i].Buf = buf[i*size : (i+1)*size]
		out.Msgs[i].Addr = group
	}
	b.SetBytes(int64(batch * size))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tx.WriteBatch(out, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/datagram")
	st := tx.GSOStats()
	if gso && (!st.Active || st.Trains == 0) {
		b.Fatalf("GSO not used: %+v", st)
	}
	// The reader drains the kernel's queue until a read finds it quiet.
	draining.Store(true)
	require.NoError(b, rx.SetReadDeadline(time.Now().Add(drainQuiet)))
	wg.Wait()
	rx.Close()
	// The share of datagrams the receiver read: below 100 the receiver
	// fell behind and the kernel dropped the rest (more cheaply than it
	// queues them).
	b.ReportMetric(100*float64(received)/float64(b.N*batch), "%received")
}
