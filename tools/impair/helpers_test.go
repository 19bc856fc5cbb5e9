package impair

import (
	"github.com/mdbus/mdbus/internal/impairtest"
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

func seqs(from, to wire.Seq) []wire.Seq {
	var s []wire.Seq
	for q := from; q <= to; q++ {
		s = append(s, q)
	}
	return s
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

// The helpers shared with packetconn/impair's tests (internal/impairtest).
var (
	labRx   = impairtest.LabRx
	labTx   = impairtest.LabTx
	send    = impairtest.Send
	seqOf   = impairtest.SeqOf
	missing = impairtest.Missing
	near    = impairtest.Near
)

func drain(t testing.TB, pc sock.PacketConn, b *sock.Batch, got []wire.Seq, quiet time.Duration) []wire.Seq {
	t.Helper()
	return impairtest.Drain(t, pc, b, got, quiet, nil)
}

func drainCheck(t testing.TB, pc sock.PacketConn, b *sock.Batch, got []wire.Seq, quiet time.Duration, check func(*sock.Message)) []wire.Seq {
	t.Helper()
	return impairtest.Drain(t, pc, b, got, quiet, check)
}

func dataPacket(seq wire.Seq, count int) []byte {
	return impairtest.DataPacket(testSession, seq, count)
}
func packets(n int) [][]byte { return impairtest.Packets(testSession, n) }
