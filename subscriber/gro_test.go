//go:build linux

package subscriber

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// gsoPub sends MoldUDP64 packets to an IPv4 group on lo as a GSO publisher
// does: a run of equal-size packets in one sendmsg with UDP_SEGMENT.
type gsoPub struct {
	fd   int
	dst  unix.Sockaddr
	oob  []byte
	sess wire.Session
	next wire.Seq
}

func newGSOPub(t testing.TB, group netip.AddrPort, sess wire.Session) *gsoPub {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	lo, err := net.InterfaceByName("lo")
	require.NoError(t, err)
	require.NoError(t, unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_TTL, 0))
	require.NoError(t, unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_LOOP, 1))
	require.NoError(t, unix.SetsockoptIPMreqn(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_IF, &unix.IPMreqn{Ifindex: int32(lo.Index)}))
	require.NoError(t, unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	return &gsoPub{fd: fd, dst: &unix.SockaddrInet4{Port: int(group.Port()), Addr: group.Addr().As4()},
		oob: make([]byte, unix.CmsgSpace(2)), sess: sess, next: 1}
}

func (p *gsoPub) id(t testing.TB) StreamID {
	sa, err := unix.Getsockname(p.fd)
	require.NoError(t, err)
	a := sa.(*unix.SockaddrInet4)
	return StreamID{Source: netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port)), Session: p.sess, Incarnation: 1}
}

// sendTrain sends dgs in one sendmsg cut at the size of dgs[0] (all but the
// last must have that size), or as one plain datagram when there is one.
func (p *gsoPub) sendTrain(t testing.TB, dgs [][]byte) {
	t.Helper()
	var buf []byte
	for i, d := range dgs {
		require.True(t, i == len(dgs)-1 || len(d) == len(dgs[0]), "packet %d of a train has another size", i)
		buf = append(buf, d...)
	}
	var oob []byte
	if len(dgs) > 1 {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&p.oob[0]))
		h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
		h.SetLen(unix.CmsgLen(2))
		binary.NativeEndian.PutUint16(p.oob[unix.CmsgLen(0):], uint16(len(dgs[0])))
		oob = p.oob
	}
	_, err := unix.SendmsgN(p.fd, buf, oob, p.dst, 0)
	require.NoError(t, err)
}

// maxRead records the most datagrams one ReadBatch returned.
type maxRead struct {
	sock.PacketConn
	most atomic.Int64
}

func (m *maxRead) ReadBatch(b *sock.Batch) (int, error) {
	n, err := m.PacketConn.ReadBatch(b)
	if int64(n) > m.most.Load() {
		m.most.Store(int64(n))
	}
	return n, err
}

// TestGSOTrainsDelivered: a GSO publisher's trains (30 packets of 140
// messages each, the last train's last packet shorter, with plain
// heartbeats between) reach a subscriber with GRO on (trains arrive whole:
// a read returns more datagrams than a GRO socket's 8 slots hold unsplit)
// and with DisableGRO (the kernel segments them): every message is
// delivered once, in order, byte-identical, and the per-datagram counters
// count packets, not trains.
func TestGSOTrainsDelivered(t *testing.T) {
	netlab.Require(t)
	for i, disable := range []bool{false, true} {
		t.Run(fmt.Sprintf("DisableGRO=%v", disable), func(t *testing.T) {
			group := netip.AddrPortFrom(netip.MustParseAddr("239.7.2.30"), uint16(31030+i))
			mr := new(maxRead)
			s, c := newSub(t, Config{Group: group, Receive: Receive{DisableGRO: disable, ReadBuffer: 8 << 20},
				Wrap: func(pc sock.PacketConn) sock.PacketConn { mr.PacketConn = pc; return mr }})
			pub := newGSOPub(t, group, sessA)
			const n, per, train = 50000, 140, 30 // 140 messages: a whole number of payload's 7-size cycles
			var dgs [][]byte
			for seq := wire.Seq(1); seq <= n; seq += per {
				dgs = append(dgs, pkt(sessA, seq, min(per, n+1-int(seq))))
			}
			pub.next = n + 1
			require.NotEqual(t, len(dgs[0]), len(dgs[len(dgs)-1]), "the last packet is shorter")
			wait := waitDatagrams(t, s)
			sent := 0
			for k := 0; k < len(dgs); k += train {
				tr := dgs[k:min(k+train, len(dgs))]
				pub.sendTrain(t, tr)
				pub.sendTrain(t, [][]byte{hb(sessA, min(wire.Seq(1+per*(k+len(tr))), n+1))})
				sent += len(tr) + 1
				wait(sent)
			}
			pub.sendTrain(t, [][]byte{eos(sessA, n+1)})
			id := pub.id(t)
			require.Eventually(t, func() bool { return s.Stats().StreamsEnded == 1 }, waitFor, time.Millisecond)
			require.Equal(t, n, c.count(id))
			c.check(t)
			c.mu.Lock()
			require.Empty(t, c.gaps)
			c.mu.Unlock()
			st := s.Stats()
			require.EqualValues(t, n, st.Messages)
			require.EqualValues(t, sent+1, st.Datagrams, "one datagram per packet, heartbeat and end")
			require.EqualValues(t, sent+1, st.Packets, "heartbeats and the end count as packets")
			require.Zero(t, st.Dropped)
			require.Zero(t, st.KernelDrops)
			if !disable {
				require.Greater(t, mr.most.Load(), int64(8), "no read returned more than 8 datagrams: no train arrived whole")
			}
		})
	}
}
