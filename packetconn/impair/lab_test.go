package impair

import (
	"github.com/mdbus/mdbus/internal/impairtest"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

func TestLabReceiverIndependentLoss(t *testing.T) {
	netlab.Require(t)
	const n, chunk = 20000, 250
	group := netip.MustParseAddrPort("239.77.0.1:31001")
	cfg := Config{Loss: 0.05, Seed: 11}
	wrap := Receiver(cfg)
	rxs := []sock.PacketConn{wrap(labRx(t, group)), wrap(labRx(t, group))}
	tx := labTx(t)
	ps := packets(n)
	got := make([][]wire.Seq, len(rxs))
	b := sock.NewBatch(64, 2048)
	for i := 0; i < n; i += chunk {
		send(t, tx, group, ps[i:i+chunk])
		for r, rx := range rxs {
			// Read until the wrapper has seen the whole chunk.
			for tries := 0; statsSeen(rx) < uint64(i+chunk); tries++ {
				require.Less(t, tries, 1000, "receiver %d stuck at %d", r, statsSeen(rx))
				require.NoError(t, rx.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
				k, err := rx.ReadBatch(b)
				if sock.IsTimeout(err) {
					continue
				}
				require.NoError(t, err)
				require.Zero(t, b.Drops)
				for _, m := range b.Msgs[:k] {
					got[r] = append(got[r], seqOf(t, m.Buf))
				}
			}
		}
	}
	m0, m1 := missing(got[0], n), missing(got[1], n)
	for r, rx := range rxs {
		st, ok := StatsOf(rx)
		require.True(t, ok)
		require.Equal(t, uint64(n), st.Seen)
		near(t, 0.05, st.Dropped, n, 0.01, "loss")
		require.Len(t, missing(got[r], n), int(st.Dropped))
	}
	require.NotEqual(t, m0, m1, "receivers lose independently")
	// The decisions are those the same seed and streams make anywhere.
	replay := Receiver(cfg)
	r0, _ := runReceiver(t, replay, n)
	r1, _ := runReceiver(t, replay, n)
	require.Equal(t, missing(r0, n), m0)
	require.Equal(t, missing(r1, n), m1)
}

func statsSeen(pc sock.PacketConn) uint64 {
	st, _ := StatsOf(pc)
	return st.Seen
}

func TestLabSenderCorrelatedLoss(t *testing.T) {
	netlab.Require(t)
	const n, chunk = 5000, 250
	group := netip.MustParseAddrPort("239.77.0.2:31002")
	rx0, rx1 := labRx(t, group), labRx(t, group)
	cfg := Config{Loss: 0.1, Seed: 12}
	tx, err := NewSender(labTx(t), cfg)
	require.NoError(t, err)
	defer tx.Close()
	ps := packets(n)
	var got0, got1 []wire.Seq
	b := sock.NewBatch(64, 2048)
	for i := 0; i < n; i += chunk {
		send(t, tx, group, ps[i:i+chunk])
		got0 = drain(t, rx0, b, got0, 20*time.Millisecond)
		got1 = drain(t, rx1, b, got1, 20*time.Millisecond)
	}
	st := tx.Stats()
	require.Equal(t, uint64(n), st.Seen)
	require.Equal(t, st.Seen-st.Dropped, st.Out)
	near(t, 0.1, st.Dropped, n, 0.02, "loss")
	require.Equal(t, got0, got1, "every receiver sees the same datagrams")
	require.Len(t, missing(got0, n), int(st.Dropped))

	// Same seed, same dropped set, over a fake conn.
	f := newFake(t)
	f.discard = false
	c, err := NewSender(f, cfg)
	require.NoError(t, err)
	defer c.Close()
	for i := 0; i < n; i += chunk {
		send(t, c, group, ps[i:i+chunk])
	}
	var want []wire.Seq
	for _, d := range f.sentSnapshot() {
		want = append(want, seqOf(t, d.data))
	}
	require.Equal(t, want, got0)
}

func TestLabDropRules(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.77.0.3:31003")
	rx0, rx1 := labRx(t, group), labRx(t, group)
	tx, err := NewSender(labTx(t), Config{Drop: AnyOf(DropRange(10, 12), DropSeqs(20, 31))})
	require.NoError(t, err)
	defer tx.Close()
	var ps [][]byte
	for s := wire.Seq(1); s <= 29; s++ {
		ps = append(ps, dataPacket(s, 1))
	}
	ps = append(ps, dataPacket(30, 3)) // 30, 31, 32 in one packet
	for s := wire.Seq(33); s <= 40; s++ {
		ps = append(ps, dataPacket(s, 1))
	}
	send(t, tx, group, ps)
	b := sock.NewBatch(64, 2048)
	got0 := drain(t, rx0, b, nil, 50*time.Millisecond)
	got1 := drain(t, rx1, b, nil, 50*time.Millisecond)
	// Packet heads received: 10-12 and 20 dropped, and the packet
	// carrying 30-32 because of 31.
	want := slices.Concat(seqs(1, 9), seqs(13, 19), seqs(21, 29), seqs(33, 40))
	require.Equal(t, want, got0)
	require.Equal(t, want, got1)
	require.Equal(t, uint64(5), tx.Stats().RuleDropped)
}

func TestLabTailReleasedWithoutTraffic(t *testing.T) {
	netlab.Require(t)
	t.Run("receiver", func(t *testing.T) {
		group := netip.MustParseAddrPort("239.77.0.4:31004")
		rx, err := NewReceiver(labRx(t, group), Config{Reorder: 1, ReorderDepth: 100, ReorderWait: 30 * time.Millisecond})
		require.NoError(t, err)
		defer rx.Close()
		tx := labTx(t)
		start := time.Now()
		send(t, tx, group, packets(3))
		got := readAll(t, rx, 3, 2*time.Second)
		require.Equal(t, seqs(1, 3), got)
		require.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
		require.Less(t, time.Since(start), time.Second)
	})
	t.Run("sender", func(t *testing.T) {
		group := netip.MustParseAddrPort("239.77.0.5:31005")
		rx := labRx(t, group)
		tx, err := NewSender(labTx(t), Config{Delay: 30 * time.Millisecond, Reorder: 1, ReorderDepth: 100, ReorderWait: 10 * time.Millisecond})
		require.NoError(t, err)
		defer tx.Close()
		start := time.Now()
		send(t, tx, group, packets(3))
		got := readAll(t, rx, 3, 2*time.Second)
		require.Equal(t, seqs(1, 3), got)
		require.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond)
		require.Less(t, time.Since(start), time.Second)
	})
}

func TestLabReorderAndDuplicatesAllDelivered(t *testing.T) {
	netlab.Require(t)
	const n, chunk = 5000, 250
	group := netip.MustParseAddrPort("239.77.0.6:31006")
	rx, err := NewReceiver(labRx(t, group), Config{Reorder: 0.2, Duplicate: 0.1, Delay: time.Millisecond, Jitter: time.Millisecond, Seed: 13})
	require.NoError(t, err)
	defer rx.Close()
	tx := labTx(t)
	ps := packets(n)
	var got []wire.Seq
	b := sock.NewBatch(64, 2048)
	for i := 0; i < n; i += chunk {
		send(t, tx, group, ps[i:i+chunk])
		got = drain(t, rx, b, got, 30*time.Millisecond)
	}
	st := rx.Stats()
	require.Equal(t, uint64(n), st.Seen)
	require.Empty(t, missing(got, n))
	require.Equal(t, st.Seen+st.Duplicated, st.Out)
	require.Len(t, got, int(st.Out))
	require.False(t, slices.IsSorted(got))
	require.Zero(t, st.Held)
}

func TestLabAllocs(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.77.0.7:31007")
	// Only impairments that never leave a read without something to
	// return: a socket's timeout error allocates.
	rx, err := NewReceiver(labRx(t, group), Config{Duplicate: 0.2, Drop: DropSeqs(1 << 40), Seed: 14})
	require.NoError(t, err)
	defer rx.Close()
	tx, err := NewSender(labTx(t), Config{Duplicate: 0.1, Seed: 15})
	require.NoError(t, err)
	defer tx.Close()
	out := sock.NewBatch(32, 0)
	for i, p := range packets(32) {
		out.Msgs[i].Buf, out.Msgs[i].Addr = p, group
	}
	in := sock.NewBatch(32, 2048)
	var seen uint64
	round := func() {
		d0 := tx.Stats().Duplicated
		if _, err := tx.WriteBatch(out, 32); err != nil {
			t.Fatal(err)
		}
		seen += 32 + tx.Stats().Duplicated - d0
		for rx.Stats().Seen < seen {
			if _, err := rx.ReadBatch(in); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 20 {
		round()
	}
	require.Zero(t, testing.AllocsPerRun(100, round))
}

// The helpers shared with tools/impair's tests (internal/impairtest).
var (
	labRx, labRxB = impairtest.LabRx, impairtest.LabRx
	labTx, labTxB = impairtest.LabTx, impairtest.LabTx
	send          = impairtest.Send
	seqOf         = impairtest.SeqOf
	missing       = impairtest.Missing
	near          = impairtest.Near
)

func drain(t testing.TB, pc sock.PacketConn, b *sock.Batch, got []wire.Seq, quiet time.Duration) []wire.Seq {
	t.Helper()
	return impairtest.Drain(t, pc, b, got, quiet, nil)
}

func dataPacket(seq wire.Seq, count int) []byte {
	return impairtest.DataPacket(testSession, seq, count)
}
func packets(n int) [][]byte { return impairtest.Packets(testSession, n) }
