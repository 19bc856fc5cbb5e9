package subscriber

import (
	"errors"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

func TestAskerTarget(t *testing.T) {
	a, b, c := netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.0.0.2:1"), netip.MustParseAddrPort("10.0.0.3:1")
	ms := func(n int) monotime.Time { return monotime.Time(time.Duration(n) * time.Millisecond) }
	k := asker{addrs: []netip.AddrPort{a, b, c}, after: 50 * time.Millisecond, quiet: time.Second}
	step := func(at int, asking bool, want netip.AddrPort, wantSwitch bool) {
		t.Helper()
		got, sw := k.target(ms(at), asking)
		require.Equal(t, want, got, "at %d ms", at)
		require.Equal(t, wantSwitch, sw, "switch at %d ms", at)
	}
	step(0, true, a, false)
	step(20, true, a, false)
	step(40, false, a, false) // nothing to ask: nothing changes
	step(50, true, b, true)   // a silent for 50 ms of asking
	require.True(t, k.trusts(b, ms(60)), "an answer from the one asked")
	require.True(t, k.trusts(a, ms(61)), "a late answer from the one left is still trusted")
	require.False(t, k.trusts(netip.MustParseAddrPort("10.0.0.1:2"), ms(61)), "another port is not")
	step(70, true, b, false)  // b answered: a new run from 70
	step(119, true, b, false) // 49 ms
	step(120, true, c, true)
	step(170, true, a, true) // round robin
	require.EqualValues(t, 3, k.switches)
	// A pause longer than quiet starts a new run, whatever went before.
	step(1200, true, a, false)
	step(1249, true, a, false)
	step(1250, true, b, true)
	// The repair group's datagrams count as answers (hear).
	k.hear(ms(1260))
	step(1300, true, b, false)
	step(1349, true, b, false)

	one := asker{addrs: []netip.AddrPort{a}, after: time.Millisecond, quiet: time.Second}
	for i := range 10 {
		got, sw := one.target(ms(10*i), true)
		require.Equal(t, a, got)
		require.False(t, sw, "nobody to fail over to")
	}
}

// refusingConn records what WriteBatch sends and refuses any datagram to
// refused, as the kernel refuses one with no route: the ones before it
// are sent, the call returns their count and an error.
type refusingConn struct {
	sock.PacketConn
	refused netip.AddrPort
	sent    []netip.AddrPort
}

func (c *refusingConn) WriteBatch(b *sock.Batch, n int) (int, error) {
	for i := range n {
		if b.Msgs[i].Addr == c.refused {
			return i, errors.New("no route to host")
		}
		c.sent = append(c.sent, b.Msgs[i].Addr)
	}
	return n, nil
}

// TestSendSkipsARefusedRequest: one retransmitter the kernel cannot
// reach costs its own re-request, not the ones after it in the batch.
func TestSendSkipsARefusedRequest(t *testing.T) {
	a, b, c := netip.MustParseAddrPort("10.0.0.1:9"), netip.MustParseAddrPort("10.0.0.2:9"), netip.MustParseAddrPort("10.0.0.3:9")
	conn := &refusingConn{refused: b}
	s := &Subscriber{repair: conn, out: sock.NewBatch(requestBatchSize, 0), reqBuf: make([]byte, requestBatchSize*wire.RequestLen)}
	s.cfg.Logger = slog.New(slog.DiscardHandler)
	var reqs []wire.Request
	var dests []netip.AddrPort
	for i := range 2*requestBatchSize + 3 { // three batches, b everywhere
		reqs = append(reqs, wire.Request{Seq: wire.Seq(i + 1), Count: 1})
		dests = append(dests, []netip.AddrPort{a, b, c}[i%3])
	}
	s.send(reqs, dests)
	var want []netip.AddrPort
	for _, d := range dests {
		if d != b {
			want = append(want, d)
		}
	}
	require.Equal(t, want, conn.sent)
	require.EqualValues(t, len(dests)-len(want), s.nakErrors.Load())
}

// TestRetransmitPortTrustFirst: with RetransmitPort, a confirm or a
// repair from another source's retransmitter (the right port at the
// wrong address) is dropped before anything of it is used or counted:
// the confirm neither counts nor sizes the group; the repair fills
// nothing. The same datagrams from the stream's own source are used.
func TestRetransmitPortTrustFirst(t *testing.T) {
	const port = 5000
	// A repair group, so that confirms size the group back-off.
	h := newHarness(t, Config{Recovery: Recovery{RetransmitPort: port, RepairGroup: netip.MustParseAddrPort("239.7.7.8:31000")}})
	h.feed(srcA, pkt(sessA, 1, 1))
	h.feed(srcA, pkt(sessA, 3, 1)) // gap [2, 3)
	confirm := wire.AppendConfirm(nil, wire.Confirm{Session: sessA, Seq: 2, Count: 1, Kind: wire.ConfirmSending, Group: 40})
	before := h.stats()

	stranger := netip.AddrPortFrom(srcB.Addr(), port)
	h.feedRepairFrom(stranger, confirm)
	h.feedRepairFrom(stranger, pkt(sessA, 2, 1))
	st := h.stats()
	require.EqualValues(t, 2, st.Drops[DropUntrustedRepair])
	require.Equal(t, before.Confirms, st.Confirms, "an untrusted confirm is not counted")
	require.Equal(t, before.GroupSize, st.GroupSize, "nor sizes the group")
	require.Equal(t, before.Packets, st.Packets, "an untrusted repair is not counted as a packet")
	require.Equal(t, []wire.Seq{1}, h.seqs(srcA, sessA))

	own := netip.AddrPortFrom(srcA.Addr(), port)
	h.feedRepairFrom(own, confirm)
	h.feedRepairFrom(own, pkt(sessA, 2, 1))
	st = h.stats()
	require.EqualValues(t, 2, st.Drops[DropUntrustedRepair])
	require.Equal(t, before.Confirms+1, st.Confirms)
	require.Equal(t, 40, st.GroupSize)
	require.Equal(t, []wire.Seq{1, 2, 3}, h.seqs(srcA, sessA))
}
