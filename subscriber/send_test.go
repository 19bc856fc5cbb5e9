package subscriber

import (
	"log/slog"
	"net/netip"
	"syscall"
	"testing"

	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// refusingNAKs stands for the repair socket: it refuses datagrams to
// one address, as sendmmsg does (stopping there), and keeps the
// destinations of the others.
type refusingNAKs struct {
	sock.PacketConn // only WriteBatch is called
	refuse          netip.AddrPort
	after           error // returned with all sent (a wrapper's own datagram failed)
	to              []netip.AddrPort
}

func (f *refusingNAKs) WriteBatch(b *sock.Batch, n int) (int, error) {
	for i, m := range b.Msgs[:n] {
		if m.Addr == f.refuse {
			return i, syscall.EHOSTUNREACH
		}
		f.to = append(f.to, m.Addr)
	}
	return n, f.after
}

// A re-request the kernel refuses is counted in NAKErrors and skipped;
// the others, before and after it, still leave. Once the subscriber is
// closing, a refusal is not counted.
func TestSendSkipsRefusedRequest(t *testing.T) {
	a, b, c := netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("127.0.0.1:2"), netip.MustParseAddrPort("127.0.0.1:3")
	conn := &refusingNAKs{refuse: b}
	s := &Subscriber{cfg: Config{Logger: slog.New(slog.DiscardHandler)}, repair: conn,
		out: sock.NewBatch(requestBatchSize, 0), reqBuf: make([]byte, requestBatchSize*wire.RequestLen)}
	reqs := []wire.Request{{Seq: 1, Count: 1}, {Seq: 2, Count: 1}, {Seq: 3, Count: 1}, {Seq: 4, Count: 1}}
	s.send(reqs, []netip.AddrPort{a, b, c, b})
	require.Equal(t, []netip.AddrPort{a, c}, conn.to)
	require.EqualValues(t, 2, s.nakErrors.Load())

	// More re-requests than one batch holds: every batch is sent.
	conn.to = nil
	many := make([]wire.Request, 2*requestBatchSize+1)
	dests := make([]netip.AddrPort, len(many))
	for i := range many {
		many[i] = wire.Request{Seq: wire.Seq(i + 1), Count: 1}
		dests[i] = a
	}
	dests[requestBatchSize-1] = b // the last of the first batch
	s.send(many, dests)
	require.Len(t, conn.to, len(many)-1)
	require.EqualValues(t, 3, s.nakErrors.Load())

	// An error after every re-request left names none of them: counted
	// once, and nothing is skipped.
	conn.to, conn.refuse, conn.after = nil, netip.AddrPort{}, syscall.ENOBUFS
	s.send(reqs[:2], []netip.AddrPort{a, c})
	require.Equal(t, []netip.AddrPort{a, c}, conn.to)
	require.EqualValues(t, 4, s.nakErrors.Load())
	conn.refuse, conn.after = b, nil

	s.closed.Store(true)
	conn.to = nil
	s.send(reqs, []netip.AddrPort{b, a, a, a})
	require.Empty(t, conn.to, "closing: the send ends at the first refusal")
	require.EqualValues(t, 4, s.nakErrors.Load(), "uncounted")
}
