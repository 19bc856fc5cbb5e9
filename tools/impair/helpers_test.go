package impair

import (
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/labtest"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/packetconn/impair"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { labtest.Main(m) }

var testSession = wire.Session{'R', 'E', 'L', 'A', 'Y', ' ', ' ', ' ', ' ', ' '}

// dataPacket encodes a data packet of count 8-byte messages starting at
// seq, each message holding its sequence.
func dataPacket(seq wire.Seq, count int) []byte {
	var enc wire.Encoder
	enc.Reset(make([]byte, 0, wire.PacketLen(count, 8*count)), testSession, seq, wire.DefaultPayloadSizeIPv4)
	var msg [8]byte
	for i := range count {
		binary.BigEndian.PutUint64(msg[:], uint64(seq)+uint64(i))
		if err := enc.Add(msg[:]); err != nil {
			panic(err)
		}
	}
	return enc.Bytes()
}

// packets returns n single-message data packets with sequences 1..n.
func packets(n int) [][]byte {
	ps := make([][]byte, n)
	for i := range ps {
		ps[i] = dataPacket(wire.Seq(i+1), 1)
	}
	return ps
}

func seqOf(t testing.TB, d []byte) wire.Seq {
	t.Helper()
	h, err := wire.ParseHeader(d)
	require.NoError(t, err)
	return h.Seq
}

func seqs(from, to wire.Seq) []wire.Seq {
	var s []wire.Seq
	for q := from; q <= to; q++ {
		s = append(s, q)
	}
	return s
}

// missing returns the sequences 1..n absent from got.
func missing(got []wire.Seq, n int) []wire.Seq {
	seen := make([]bool, n+1)
	for _, s := range got {
		seen[s] = true
	}
	var m []wire.Seq
	for s := 1; s <= n; s++ {
		if !seen[s] {
			m = append(m, wire.Seq(s))
		}
	}
	return m
}

// near requires got/n within tol of p.
func near(t *testing.T, p float64, got uint64, n int, tol float64, what string) {
	t.Helper()
	r := float64(got) / float64(n)
	require.InDelta(t, p, r, tol, "%s rate %.4f, configured %.4f", what, r, p)
}

// labRx opens a receiver of group on lo.
func labRx(t *testing.T, group netip.AddrPort) *sock.Conn {
	t.Helper()
	lo, err := net.InterfaceByName("lo")
	require.NoError(t, err)
	rx, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(netip.IPv4Unspecified(), group.Port()),
		ReusePort: true, ReadBuffer: 4 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { rx.Close() })
	require.NoError(t, rx.Join(lo, group.Addr(), netip.Addr{}))
	return rx
}

// labTx opens a multicast sender on lo, TTL 0, loopback on.
func labTx(t *testing.T) *sock.Conn {
	t.Helper()
	lo, err := net.InterfaceByName("lo")
	require.NoError(t, err)
	tx, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(netip.IPv4Unspecified(), 0), Interface: lo, Loopback: true})
	require.NoError(t, err)
	t.Cleanup(func() { tx.Close() })
	return tx
}

// send writes ps to group through pc, in one WriteBatch.
func send(t *testing.T, pc sock.PacketConn, group netip.AddrPort, ps [][]byte) {
	t.Helper()
	b := sock.NewBatch(len(ps), 0)
	for i, p := range ps {
		b.Msgs[i].Buf, b.Msgs[i].Addr = p, group
	}
	n, err := pc.WriteBatch(b, len(ps))
	require.NoError(t, err)
	require.Equal(t, len(ps), n)
}

// drain reads from pc until a read times out after quiet, appending the
// sequences to got.
func drain(t *testing.T, pc sock.PacketConn, b *sock.Batch, got []wire.Seq, quiet time.Duration) []wire.Seq {
	t.Helper()
	return drainCheck(t, pc, b, got, quiet, nil)
}

// drainCheck is drain calling check, when set, on every datagram.
func drainCheck(t *testing.T, pc sock.PacketConn, b *sock.Batch, got []wire.Seq, quiet time.Duration, check func(*sock.Message)) []wire.Seq {
	t.Helper()
	for range 1 << 20 {
		require.NoError(t, pc.SetReadDeadline(time.Now().Add(quiet)))
		n, err := pc.ReadBatch(b)
		if sock.IsTimeout(err) {
			return got
		}
		require.NoError(t, err)
		require.Zero(t, b.Drops, "the kernel dropped datagrams: the test cannot compare sets")
		for i := range b.Msgs[:n] {
			if check != nil {
				check(&b.Msgs[i])
			}
			got = append(got, seqOf(t, b.Msgs[i].Buf))
		}
	}
	t.Fatal("drain did not end")
	return nil
}

// recordConn is a PacketConn that only records what is written to it.
type recordConn struct {
	mu   sync.Mutex
	sent [][]byte
}

func (r *recordConn) ReadBatch(*sock.Batch) (int, error) { return 0, net.ErrClosed }
func (r *recordConn) WriteBatch(b *sock.Batch, n int) (int, error) {
	for _, m := range b.Msgs[:n] {
		if err := r.WriteTo(m.Buf, m.Addr); err != nil {
			return 0, err
		}
	}
	return n, nil
}

func (r *recordConn) WriteTo(p []byte, _ netip.AddrPort) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, append([]byte(nil), p...))
	return nil
}
func (r *recordConn) SetReadDeadline(time.Time) error { return nil }
func (r *recordConn) LocalAddr() netip.AddrPort       { return netip.MustParseAddrPort("127.0.0.1:1") }
func (r *recordConn) Close() error                    { return nil }

// runSender sends ps through an impair.Sender over a recordConn and
// returns the sequences sent.
func runSender(t *testing.T, cfg impair.Config, ps [][]byte) []wire.Seq {
	t.Helper()
	rec := &recordConn{}
	c, err := impair.NewSender(rec, cfg)
	require.NoError(t, err)
	send(t, c, netip.MustParseAddrPort("239.0.0.1:1"), ps)
	require.NoError(t, c.Close())
	var got []wire.Seq
	for _, d := range rec.sent {
		got = append(got, seqOf(t, d))
	}
	return got
}
