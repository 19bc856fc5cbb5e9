//go:build linux

package sock_test

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"
	"unsafe"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// gsoSender sends trains of datagrams with one sendmsg each (UDP_SEGMENT),
// as a GSO publisher does, over lo.
type gsoSender struct {
	fd  int
	dst unix.Sockaddr
	oob []byte
}

func newGSOSender(t testing.TB, dst netip.AddrPort) *gsoSender {
	t.Helper()
	af := unix.AF_INET
	if dst.Addr().Is6() {
		af = unix.AF_INET6
	}
	fd, err := unix.Socket(af, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	s := &gsoSender{fd: fd, oob: make([]byte, unix.CmsgSpace(2))}
	if af == unix.AF_INET {
		require.NoError(t, unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_TTL, 0))
		require.NoError(t, unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_LOOP, 1))
		lo, err := net.InterfaceByName("lo")
		require.NoError(t, err)
		require.NoError(t, unix.SetsockoptIPMreqn(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_IF, &unix.IPMreqn{Ifindex: int32(lo.Index)}))
		s.dst = &unix.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().As4()}
	} else {
		s.dst = &unix.SockaddrInet6{Port: int(dst.Port()), Addr: dst.Addr().As16()}
		if dst.Addr().IsMulticast() { // IPv6 multicast works over veth, not lo
			veth, err := net.InterfaceByName(netlab.VethA)
			require.NoError(t, err)
			require.NoError(t, unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_IF, veth.Index))
			require.NoError(t, unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_LOOP, 1))
			require.NoError(t, unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_HOPS, 0))
		}
	}
	require.NoError(t, unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20))
	return s
}

// send sends p as datagrams of seg bytes (the last may be shorter) in one
// sendmsg; seg 0 sends p as one plain datagram.
func (s *gsoSender) send(t testing.TB, p []byte, seg int) {
	var oob []byte
	if seg > 0 {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&s.oob[0]))
		h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
		h.SetLen(unix.CmsgLen(2))
		binary.NativeEndian.PutUint16(s.oob[unix.CmsgLen(0):], uint16(seg))
		oob = s.oob
	}
	if _, err := unix.SendmsgN(s.fd, p, oob, s.dst, 0); err != nil {
		t.Fatalf("sendmsg %d bytes, segment %d: %v", len(p), seg, err)
	}
}

// groRx opens a receiver for dst (an IPv4 group on lo, an IPv6 group on
// the veth, or ::1) with or without GRO.
func groRx(t testing.TB, dst netip.AddrPort, gro bool) *sock.Conn {
	t.Helper()
	return groRxWith(t, dst, func(c *sock.Config) { c.GRO = gro })
}

// groRxWith is groRx with the socket's Config changed by set (GRO is off
// unless set turns it on).
func groRxWith(t testing.TB, dst netip.AddrPort, set func(*sock.Config)) *sock.Conn {
	t.Helper()
	local := netip.AddrPortFrom(netip.IPv4Unspecified(), dst.Port())
	ifname := "lo"
	switch {
	case dst.Addr().Is6() && dst.Addr().IsMulticast():
		local, ifname = netip.AddrPortFrom(netip.IPv6Unspecified(), dst.Port()), netlab.VethA
	case dst.Addr().Is6():
		local = dst
	}
	cfg := sock.Config{Local: local, ReusePort: true, ReadBuffer: 8 << 20, Timestamps: true}
	set(&cfg)
	rx, err := sock.Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { rx.Close() })
	if dst.Addr().IsMulticast() {
		ifi, err := net.InterfaceByName(ifname)
		require.NoError(t, err)
		require.NoError(t, rx.Join(ifi, dst.Addr(), netip.Addr{}))
	}
	require.Equal(t, cfg.GRO, rx.GRO(), "UDP_GRO accepted")
	return rx
}

// datagram i of a test: its index in the first 4 bytes, then a pattern.
func datagram(i, size int) []byte {
	p := make([]byte, size)
	for j := range p {
		p[j] = byte(i*7 + j)
	}
	if size >= 4 {
		binary.BigEndian.PutUint32(p, uint32(i))
	}
	return p
}

type sendStep struct {
	sizes []int // the datagrams, in order
	seg   int   // 0: each sent plain; else one GSO send of all of them
}

// TestGROSplitsTrains: GSO trains (full ones, ones with a shorter last
// segment, single-segment ones) and plain datagrams, mixed, reach a GRO
// socket and come out of ReadBatch as one Message per datagram, each
// once, in order, byte-identical, with the train's source, destination
// and kernel time; a caller batch smaller than a train gets the rest on
// the next calls. A train arrived whole (a read returned more datagrams
// than the socket's 8 receive slots could hold unsplit).
func TestGROSplitsTrains(t *testing.T) {
	netlab.Require(t)
	steps := []sendStep{
		{sizes: rep(40, 100), seg: 100},
		{sizes: []int{50, 1472, 1}},
		{sizes: append(rep(9, 1400), 1000), seg: 1400}, // 1400: fits the IPv6 MTU of the veth
		{sizes: []int{300}, seg: 300},
		{sizes: append(rep(63, 64), 17), seg: 64},
		{sizes: []int{0, 8}},
		{sizes: rep(20, 1200), seg: 1200},
	}
	for _, tc := range []struct {
		name  string
		dst   netip.AddrPort
		batch int
	}{
		{"ipv4-multicast-batch64", netip.MustParseAddrPort("239.1.3.1:31001"), 64},
		{"ipv4-multicast-batch7", netip.MustParseAddrPort("239.1.3.1:31002"), 7},
		{"ipv6-loopback-batch64", netip.MustParseAddrPort("[::1]:31003"), 64},
		{"ipv6-loopback-batch1", netip.MustParseAddrPort("[::1]:31004"), 1},
		{"ipv6-multicast-veth-batch64", netip.MustParseAddrPort("[ff15::3:1]:31009"), 64},
		{"ipv6-multicast-veth-batch5", netip.MustParseAddrPort("[ff15::3:1]:31019"), 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rx := groRx(t, tc.dst, true)
			tx := newGSOSender(t, tc.dst)
			var want [][]byte
			for _, st := range steps {
				var p []byte
				for _, sz := range st.sizes {
					d := datagram(len(want), sz)
					want = append(want, d)
					if st.seg == 0 {
						tx.send(t, d, 0)
					}
					p = append(p, d...)
				}
				if st.seg > 0 {
					tx.send(t, p, st.seg)
				}
			}
			in := sock.NewBatch(tc.batch, 2048)
			require.NoError(t, rx.SetReadDeadline(time.Now().Add(5*time.Second)))
			got, most := 0, 0
			for got < len(want) {
				n, err := rx.ReadBatch(in)
				require.NoError(t, err, "after %d of %d datagrams", got, len(want))
				require.Positive(t, n)
				most = max(most, n)
				for _, m := range in.Msgs[:n] {
					require.Less(t, got, len(want), "more datagrams than sent")
					require.Equal(t, want[got], m.Buf, "datagram %d", got)
					require.False(t, m.Truncated, "datagram %d", got)
					require.Equal(t, tc.dst.Addr(), m.Dst, "datagram %d", got)
					require.NotZero(t, m.IfIndex)
					require.NotZero(t, m.Addr.Port())
					require.NotZero(t, m.KernelTime)
					got++
				}
			}
			if tc.batch > 8 {
				require.Greater(t, most, 8, "no read returned more than 8 datagrams: no train arrived whole")
			}
			st := rx.GROStats()
			require.True(t, st.On)
			require.EqualValues(t, len(want), st.Datagrams)
			trains := 0
			for _, s := range steps {
				if s.seg > 0 {
					trains++
				} else {
					trains += len(s.sizes)
				}
			}
			require.EqualValues(t, trains, st.Reads, "every GSO send arrived as one train")
			// Nothing more: no duplicate was held back.
			require.NoError(t, rx.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
			_, err := rx.ReadBatch(in)
			require.True(t, sock.IsTimeout(err), "want a timeout, got %v", err)
		})
	}
}

func rep(n, size int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = size
	}
	return s
}

// TestGROTruncation: segments longer than the caller's buffers come out
// cut to the buffer and marked Truncated, one Message each; shorter ones
// in the same train and plain datagrams are whole.
func TestGROTruncation(t *testing.T) {
	netlab.Require(t)
	dst := netip.MustParseAddrPort("239.1.3.2:31005")
	for _, gro := range []bool{true, false} {
		t.Run(fmt.Sprintf("gro=%v", gro), func(t *testing.T) {
			rx := groRx(t, dst, gro)
			tx := newGSOSender(t, dst)
			var want [][]byte
			var p []byte
			for i := range 10 {
				d := datagram(i, 200)
				if i == 9 {
					d = datagram(i, 60)
				}
				want = append(want, d)
				p = append(p, d...)
			}
			tx.send(t, p, 200)
			want = append(want, datagram(10, 64), datagram(11, 65))
			tx.send(t, want[10], 0)
			tx.send(t, want[11], 0)
			in := sock.NewBatch(4, 64)
			require.NoError(t, rx.SetReadDeadline(time.Now().Add(5*time.Second)))
			for got := 0; got < len(want); {
				n, err := rx.ReadBatch(in)
				require.NoError(t, err)
				for _, m := range in.Msgs[:n] {
					w := want[got]
					require.Equal(t, len(w) > 64, m.Truncated, "datagram %d", got)
					require.Equal(t, w[:min(len(w), 64)], m.Buf, "datagram %d", got)
					got++
				}
			}
		})
	}
}

// TestGROZeroAlloc: ReadBatch on a GRO socket allocates nothing, whether it
// reads or hands out held segments.
func TestGROZeroAlloc(t *testing.T) {
	netlab.Require(t)
	dst := netip.MustParseAddrPort("239.1.3.3:31006")
	rx := groRx(t, dst, true)
	tx := newGSOSender(t, dst)
	train := make([]byte, 40*1472)
	in := sock.NewBatch(16, 2048)
	require.NoError(t, rx.SetReadDeadline(time.Now().Add(10*time.Second)))
	allocs := testing.AllocsPerRun(100, func() {
		tx.send(t, train, 1472)
		readN(t, rx, in, 40)
	})
	require.Zero(t, allocs)
}

// TestGROBusyPoll: a busy-polling GRO socket gets a train sent while it
// spins.
func TestGROBusyPoll(t *testing.T) {
	netlab.Require(t)
	dst := netip.MustParseAddrPort("239.1.3.4:31007")
	rx := groRxWith(t, dst, func(c *sock.Config) { c.GRO, c.BusyPoll = true, sock.MaxBusyPoll })
	tx := newGSOSender(t, dst)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Real time on purpose: the train must arrive while the reader
		// busy-polls the kernel's queue, not before it reads.
		time.Sleep(time.Millisecond)
		tx.send(t, make([]byte, 20*100), 100)
	}()
	in := sock.NewBatch(64, 2048)
	require.NoError(t, rx.SetReadDeadline(time.Now().Add(5*time.Second)))
	got := 0
	for got < 20 {
		n, err := rx.ReadBatch(in)
		require.NoError(t, err)
		got += n
	}
	<-done
	require.Equal(t, 20, got)
}

// BenchmarkReadBatchGRO: a GSO sender's trains of 40 datagrams of 1472
// bytes read by a GRO socket against a plain one (which the kernel hands
// every datagram separately); one op is one train sent and read. The
// figure to compare is ns per datagram (ns/op / 40).
func BenchmarkReadBatchGRO(b *testing.B) {
	netlab.Require(b)
	for i, gro := range []bool{true, false} {
		b.Run(fmt.Sprintf("gro=%v", gro), func(b *testing.B) {
			dst := netip.AddrPortFrom(netip.MustParseAddr("239.1.3.5"), uint16(31010+i))
			rx := groRx(b, dst, gro)
			tx := newGSOSender(b, dst)
			train := make([]byte, 40*1472)
			in := sock.NewBatch(64, 2048)
			if err := rx.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(train)))
			b.ReportAllocs()
			for b.Loop() {
				tx.send(b, train, 1472)
				readN(b, rx, in, 40)
			}
		})
	}
}

// TestGRODrops: SO_RXQ_OVFL still reaches Batch.Drops on a GRO socket, and
// counts a dropped train once: with trains of 40 datagrams sent into a
// small receive buffer and read afterwards, Drops (which the kernel reports
// with the next datagram it queues) is exactly the number of trains that
// did not arrive.
func TestGRODrops(t *testing.T) {
	netlab.Require(t)
	dst := netip.MustParseAddrPort("239.1.3.6:31008")
	rx := groRxWith(t, dst, func(c *sock.Config) { c.GRO, c.ReadBuffer = true, 64<<10 })
	tx := newGSOSender(t, dst)
	const trains, per = 50, 40
	for i := range trains {
		p := make([]byte, 0, per*1000)
		for j := range per {
			p = append(p, datagram(i*per+j, 1000)...)
		}
		tx.send(t, p, 1000)
	}
	in := sock.NewBatch(64, 2048)
	got, last := 0, false
	for {
		if !last && got > 0 {
			// The buffer has room again: a last train carries the count.
			tx.send(t, make([]byte, per*1000), 1000)
			last = true
		}
		require.NoError(t, rx.SetReadDeadline(time.Now().Add(100*time.Millisecond)))
		n, err := rx.ReadBatch(in)
		if sock.IsTimeout(err) {
			break
		}
		require.NoError(t, err)
		got += n
	}
	got -= per // the last train
	t.Logf("received %d of %d datagrams, Drops %d", got, trains*per, in.Drops)
	require.Zero(t, got%per, "trains arrive whole or not at all")
	require.Less(t, got, trains*per, "the small buffer dropped some trains")
	require.EqualValues(t, trains-got/per, in.Drops, "one drop counted per train")
}

// BenchmarkReadBatchPlainSender: a plain sender's 64 datagrams of 1472 bytes
// per sendmmsg (no trains) read by a GRO socket, which reads at most 8 per
// recvmmsg (one per slot), against a plain one, which reads up to the
// caller's 64: the cost of GRO where there is nothing to coalesce. One op
// is 64 datagrams sent and read.
func BenchmarkReadBatchPlainSender(b *testing.B) {
	netlab.Require(b)
	for i, gro := range []bool{true, false} {
		b.Run(fmt.Sprintf("gro=%v", gro), func(b *testing.B) {
			dst := netip.AddrPortFrom(netip.MustParseAddr("239.1.3.7"), uint16(31020+i))
			rx := groRx(b, dst, gro)
			lo, err := net.InterfaceByName("lo")
			if err != nil {
				b.Fatal(err)
			}
			tx, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(netip.IPv4Unspecified(), 0), Interface: lo, Loopback: true, WriteBuffer: 4 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer tx.Close()
			out := sock.NewBatch(64, 0)
			for j := range out.Msgs {
				out.Msgs[j] = sock.Message{Buf: make([]byte, 1472), Addr: dst}
			}
			in := sock.NewBatch(64, 2048)
			if err := rx.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(64 * 1472)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tx.WriteBatch(out, 64); err != nil {
					b.Fatal(err)
				}
				for got := 0; got < 64; {
					n, err := rx.ReadBatch(in)
					if err != nil {
						b.Fatal(err)
					}
					got += n
				}
			}
		})
	}
}

// readN reads from rx until n datagrams are in, failing tb on an error.
func readN(tb testing.TB, rx *sock.Conn, in *sock.Batch, n int) {
	for got := 0; got < n; {
		k, err := rx.ReadBatch(in)
		if err != nil {
			tb.Fatal(err)
		}
		got += k
	}
}
