package publisher_test

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/labtest"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// modes runs the data-path tests with the sending goroutine (SendAuto:
// a lone message's partial packet goes to the goroutine) and inline.
var modes = []struct {
	name string
	send publisher.SendMode
}{
	{"goroutine", publisher.SendAuto},
	{"inline", publisher.SendInline},
}

// packet is a received, parsed datagram with its messages copied.
type packet struct {
	wire.Header
	size int
	msgs [][]byte
	raw  []byte
	src  netip.AddrPort
	// kernel is the kernel's receive time (Unix ns).
	kernel int64
}

func (p packet) isData() bool { return !p.IsHeartbeat() && !p.IsEndOfSession() }

// receiver is a raw socket joined to a group, as a subscriber would be.
type receiver struct {
	t     testing.TB
	c     *sock.Conn
	b     *sock.Batch
	queue []packet
}

func listen(t testing.TB, group netip.AddrPort, ifname string) *receiver {
	t.Helper()
	ifi, err := net.InterfaceByName(ifname)
	require.NoError(t, err)
	wild := netip.IPv4Unspecified()
	if group.Addr().Is6() {
		wild = netip.IPv6Unspecified()
	}
	c, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(wild, group.Port()), ReusePort: true, ReadBuffer: 8 << 20, Timestamps: true})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.Join(ifi, group.Addr(), netip.Addr{}))
	return &receiver{t: t, c: c, b: sock.NewBatch(64, wire.MaxPayloadSize)}
}

// read returns the next packet, or false when none comes within timeout.
func (r *receiver) read(timeout time.Duration) (packet, bool) {
	r.t.Helper()
	if len(r.queue) == 0 {
		require.NoError(r.t, r.c.SetReadDeadline(time.Now().Add(timeout)))
		n, err := r.c.ReadBatch(r.b)
		if sock.IsTimeout(err) {
			return packet{}, false
		}
		require.NoError(r.t, err)
		require.Zero(r.t, r.b.Drops, "receiver dropped datagrams: its buffer overflowed")
		for i := range n {
			m := r.b.Msgs[i]
			require.False(r.t, m.Truncated)
			wp, err := wire.ParsePacket(m.Buf)
			require.NoError(r.t, err)
			pk := packet{Header: wp.Header, size: len(m.Buf), raw: append([]byte(nil), m.Buf...), src: m.Addr, kernel: m.KernelTime}
			for it := wp.Messages(); ; {
				msg, _, ok := it.Next()
				if !ok {
					break
				}
				pk.msgs = append(pk.msgs, append([]byte(nil), msg...))
			}
			r.queue = append(r.queue, pk)
		}
		if len(r.queue) == 0 {
			return packet{}, false
		}
	}
	pk := r.queue[0]
	r.queue = r.queue[1:]
	return pk, true
}

// until reads packets until done returns true for one, and returns them
// all; it fails the test after timeout.
func (r *receiver) until(timeout time.Duration, done func(packet) bool) []packet {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	var got []packet
	for {
		left := time.Until(deadline)
		if left <= 0 {
			r.t.Fatalf("no matching packet within %v (%d others received)", timeout, len(got))
		}
		pk, ok := r.read(left)
		if !ok {
			continue
		}
		got = append(got, pk)
		if done(pk) {
			return got
		}
	}
}

// data reads until the data packet carrying seq last has arrived and
// returns the data packets.
func (r *receiver) data(timeout time.Duration, last wire.Seq) []packet {
	r.t.Helper()
	var out []packet
	for _, pk := range r.until(timeout, func(p packet) bool { return p.isData() && p.Next() > last }) {
		if pk.isData() {
			out = append(out, pk)
		}
	}
	return out
}

// silent requires that no packet arrives within d.
func (r *receiver) silent(d time.Duration) {
	r.t.Helper()
	pk, ok := r.read(d)
	require.False(r.t, ok, "unexpected packet %+v", pk.Header)
}

// makeMsg returns a message of size bytes whose content is derived from
// seq and tag, so a receiver can check it.
func makeMsg(seq wire.Seq, tag byte, size int) []byte {
	m := make([]byte, size)
	for i := range m {
		m[i] = byte(int(seq)*31+i) ^ tag
	}
	if size >= 9 {
		binary.BigEndian.PutUint64(m, uint64(seq))
		m[8] = tag
	}
	return m
}

// checkContiguous requires that the packets' sequences start at first and
// have no holes or repeats, and that no packet is larger than limit.
// It returns the messages by sequence.
func checkContiguous(t testing.TB, pkts []packet, first wire.Seq, limit int) [][]byte {
	t.Helper()
	next := first
	var msgs [][]byte
	for _, pk := range pkts {
		require.Equal(t, next, pk.Seq, "hole or repeat")
		require.LessOrEqual(t, pk.size, limit)
		require.Equal(t, pk.MessageCount(), len(pk.msgs))
		msgs = append(msgs, pk.msgs...)
		next = pk.Next()
	}
	return msgs
}

// recordingSink copies every packet it is offered.
type recordingSink struct {
	mu   sync.Mutex
	pkts [][]byte
}

func (s *recordingSink) SentPacket(pkt []byte) {
	s.mu.Lock()
	s.pkts = append(s.pkts, append([]byte(nil), pkt...))
	s.mu.Unlock()
}

func (s *recordingSink) packets() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.pkts...)
}

var errInjected = errors.New("injected send failure")

// faultyConn wraps a PacketConn: it can refuse the packet at a given index
// of the next WriteBatch, delay every WriteBatch (use it in a synctest
// bubble, where the delay is virtual time), or hold it at a gate.
type faultyConn struct {
	sock.PacketConn
	failAt atomic.Int32 // refuse b.Msgs[failAt-1] of the next WriteBatch; 0 = off
	failN  atomic.Int32 // how many WriteBatch calls to fail that way
	delay  time.Duration
	gate   chan struct{} // if non-nil, WriteBatch waits for it to be closed
	calls  atomic.Int64
}

func (f *faultyConn) WriteBatch(b *sock.Batch, n int) (int, error) {
	f.calls.Add(1)
	if f.gate != nil {
		<-f.gate
	}
	if f.delay > 0 {
		time.Sleep(f.delay)
	}
	if at := int(f.failAt.Load()); at > 0 && f.failN.Load() > 0 {
		f.failN.Add(-1)
		k := min(at-1, n)
		sent, err := 0, error(nil)
		if k > 0 {
			sent, err = f.PacketConn.WriteBatch(b, k)
			if err != nil {
				return sent, err
			}
		}
		return sent, errInjected
	}
	return f.PacketConn.WriteBatch(b, n)
}

// publishAll publishes msg(i) for i in [0, n) one at a time, then flushes
// and closes p, so every packet has reached its sinks and the kernel.
func publishAll(t *testing.T, p *publisher.Publication, n int, msg func(i int) []byte) {
	t.Helper()
	for i := range n {
		_, err := p.Publish(msg(i))
		require.NoError(t, err)
	}
	require.NoError(t, p.Flush(t.Context()))
	require.NoError(t, p.Close())
}
