//go:build linux

package sock

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"
	"unsafe"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// groCmsg returns a control message of level and typ carrying data.
func groCmsg(level, typ int32, data []byte) []byte {
	b := make([]byte, unix.CmsgSpace(len(data)))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(len(data)))
	copy(b[unix.CmsgLen(0):], data)
	return b
}

func groInt(v int32) []byte { return binary.NativeEndian.AppendUint32(nil, uint32(v)) }

var fuzzGRO = newGROReader()

// FuzzGROSplit feeds a train of n bytes with a hostile control message (a
// UDP_GRO segment size of 0, negative, larger than the train, a cut or
// lying cmsg) to the splitter and takes it out through batches of any size
// with buffers of any size: it must not panic, must end, and must hand out
// every byte once, in order, in segments of the size the kernel said.
func FuzzGROSplit(f *testing.F) {
	pkt := groCmsg(unix.IPPROTO_IP, unix.IP_PKTINFO, make([]byte, 12))
	for _, seed := range []struct {
		oob          []byte
		n            uint16
		batch, bufSz uint16
	}{
		{groCmsg(unix.SOL_UDP, unix.UDP_GRO, groInt(1472)), 40 * 1472, 64, 2048},
		{groCmsg(unix.SOL_UDP, unix.UDP_GRO, groInt(100)), 3999, 7, 2048},
		{append(pkt, groCmsg(unix.SOL_UDP, unix.UDP_GRO, groInt(64))...), 64*63 + 17, 1, 64},
		{groCmsg(unix.SOL_UDP, unix.UDP_GRO, groInt(0)), 500, 4, 100},
		{groCmsg(unix.SOL_UDP, unix.UDP_GRO, groInt(-5)), 500, 4, 600},
		{groCmsg(unix.SOL_UDP, unix.UDP_GRO, groInt(1<<20)), 500, 4, 600},
		{groCmsg(unix.SOL_UDP, unix.UDP_GRO, []byte{200, 0}), 1000, 3, 150},
		{groCmsg(unix.SOL_UDP, unix.UDP_GRO, groInt(1))[:12], 10, 2, 10},
		{nil, 0, 1, 10},
		{pkt, 1500, 2, 2048},
	} {
		f.Add(seed.oob, seed.n, seed.batch, seed.bufSz)
	}
	f.Fuzz(func(t *testing.T, oob []byte, n, batch, bufSz uint16) {
		if len(oob) > groOOBSize {
			oob = oob[:groOOBSize]
		}
		batch = batch%70 + 1
		bufSz %= 4096
		g := fuzzGRO
		data := g.buf[:n]
		for i := range data {
			data[i] = byte(i*13 + i>>8)
		}
		g.trains[0] = train{n: int(n), seg: groSegment(oob)}
		g.n, g.next, g.off = 1, 0, 0
		seg := g.trains[0].seg
		if seg <= 0 || seg > int(n) {
			seg = int(n)
		}
		b := NewBatch(int(batch), int(bufSz))
		var got []byte
		segs, calls := 0, 0
		for g.next < g.n {
			calls++
			if calls > 70000 {
				t.Fatal("the splitter does not end")
			}
			k := g.fill(b)
			if k == 0 || k > len(b.Msgs) {
				t.Fatalf("fill = %d with %d messages", k, len(b.Msgs))
			}
			for _, m := range b.Msgs[:k] {
				off := segs * seg
				want := min(seg, int(n)-off)
				if m.Truncated != (want > int(bufSz)) || len(m.Buf) != min(want, int(bufSz)) {
					t.Fatalf("segment %d: %d bytes, truncated %v; want %d of %d", segs, len(m.Buf), m.Truncated, want, bufSz)
				}
				if !bytes.Equal(m.Buf, data[off:off+len(m.Buf)]) {
					t.Fatalf("segment %d differs", segs)
				}
				got = append(got, m.Buf...)
				segs++
			}
		}
		wantSegs := 1
		if n > 0 {
			wantSegs = (int(n) + seg - 1) / seg
		}
		if segs != wantSegs {
			t.Fatalf("%d segments, want %d (train %d, segment %d)", segs, wantSegs, n, seg)
		}
		if int(bufSz) >= seg && !bytes.Equal(got, data) {
			t.Fatal("the segments do not make up the train")
		}
	})
}

// BenchmarkGROFill is the user-space cost of handing a train of 40
// datagrams of 1472 bytes out as 40 Messages (parsing nothing; each a
// slice of the slot): per datagram, ns/op / 40.
func BenchmarkGROFill(b *testing.B) {
	g := newGROReader()
	in := NewBatch(64, 2048)
	b.SetBytes(40 * 1472)
	b.ReportAllocs()
	for b.Loop() {
		g.trains[0] = train{n: 40 * 1472, seg: 1472}
		g.n, g.next, g.off = 1, 0, 0
		if g.fill(in) != 40 {
			b.Fatal("short")
		}
	}
}

// TestGROFillNoCopy: a datagram that fits the caller's buffer is handed out
// as the slot's bytes, not copied into the caller's buffer, and capped at
// its end so that an append cannot overwrite the next datagram; one that
// does not fit is copied into the caller's buffer, cut and marked.
func TestGROFillNoCopy(t *testing.T) {
	g := newGROReader()
	for i := range 3 * 100 {
		g.buf[i] = byte(i)
	}
	g.trains[0] = train{n: 3 * 100, seg: 100}
	g.n, g.next, g.off = 1, 0, 0
	b := NewBatch(2, 100)
	require.Equal(t, 2, g.fill(b))
	for i, m := range b.Msgs[:2] {
		require.False(t, m.Truncated)
		require.Same(t, &g.buf[i*100], &m.Buf[0], "datagram %d is a slice of the slot", i)
		require.Equal(t, 100, cap(m.Buf), "capped at the datagram's end")
	}
	small := NewBatch(1, 60)
	require.Equal(t, 1, g.fill(small))
	m := small.Msgs[0]
	require.True(t, m.Truncated)
	require.Same(t, &small.Buffer(0)[0], &m.Buf[0], "cut into the caller's buffer")
	require.Equal(t, g.buf[200:260], m.Buf)
}

// TestGROFallback: where the kernel refuses UDP_GRO, a Conn asked for GRO
// reports it off and reads plain: a GSO sender's train arrives as separate
// datagrams, every one of them.
func TestGROFallback(t *testing.T) {
	netlab.Require(t)
	old := enableGRO
	enableGRO = func(int) bool { return false }
	defer func() { enableGRO = old }()
	rx, err := Open(Config{Local: netip.MustParseAddrPort("127.0.0.1:0"), GRO: true})
	require.NoError(t, err)
	defer rx.Close()
	require.False(t, rx.GRO())
	require.Equal(t, GROStats{}, rx.GROStats())
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	oob := groCmsg(unix.SOL_UDP, unix.UDP_SEGMENT, binary.NativeEndian.AppendUint16(nil, 100))
	p := make([]byte, 20*100)
	for i := range p {
		p[i] = byte(i / 100)
	}
	_, err = unix.SendmsgN(fd, p, oob[:unix.CmsgSpace(2)], &unix.SockaddrInet4{Port: int(rx.LocalAddr().Port()), Addr: [4]byte{127, 0, 0, 1}}, 0)
	require.NoError(t, err)
	in := NewBatch(64, 2048)
	require.NoError(t, rx.SetReadDeadline(time.Now().Add(5*time.Second)))
	for got := 0; got < 20; {
		n, err := rx.ReadBatch(in)
		require.NoError(t, err)
		for _, m := range in.Msgs[:n] {
			require.Equal(t, p[got*100:(got+1)*100], m.Buf)
			got++
		}
	}
}
