package impair

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/packetconn/impair"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

type relayResult struct {
	st  RelayStats
	err error
}

// startRelay runs Relay until the returned cancel is called and waits for
// it to be ready.
func startRelay(t *testing.T, cfg RelayConfig) (cancel func() relayResult) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	ready := make(chan struct{})
	cfg.Ready = func() { close(ready) }
	res := make(chan relayResult, 1)
	go func() {
		st, err := Relay(ctx, cfg)
		res <- relayResult{st, err}
	}()
	select {
	case <-ready:
	case r := <-res:
		stop()
		t.Fatalf("relay ended before it was ready: %v", r.err)
	case <-time.After(5 * time.Second):
		stop()
		t.Fatal("relay not ready")
	}
	var once *relayResult
	cancel = func() relayResult {
		if once == nil {
			stop()
			select {
			case r := <-res:
				once = &r
			case <-time.After(5 * time.Second):
				t.Fatal("relay did not stop on cancel")
			}
		}
		return *once
	}
	t.Cleanup(func() { cancel() })
	return cancel
}

func TestRelay(t *testing.T) {
	netlab.Require(t)
	const n, chunk = 2000, 200
	a := netip.MustParseAddrPort("239.77.1.1:31101")
	b := netip.MustParseAddrPort("239.77.1.2:31102")
	rxA := labRx(t, a) // a subscriber of A must be unaffected
	rxB := labRx(t, b)
	var progress []RelayStats
	cancel := startRelay(t, RelayConfig{In: a, Out: b, Source: netip.MustParseAddr("127.0.0.2"),
		Impair: impair.Config{Loss: 0.2, Seed: 21}, ProgressEvery: 20 * time.Millisecond,
		Progress: func(s RelayStats) { progress = append(progress, s) }})
	tx := labTx(t)
	ps := packets(n)
	var gotA, gotB []wire.Seq
	batch := sock.NewBatch(64, 2048)
	for i := 0; i < n; i += chunk {
		send(t, tx, a, ps[i:i+chunk])
		gotA = drain(t, rxA, batch, gotA, 30*time.Millisecond)
		gotB = drainCheck(t, rxB, batch, gotB, 50*time.Millisecond, func(m *sock.Message) {
			require.Equal(t, netip.MustParseAddr("127.0.0.2"), m.Addr.Addr(), "sent from the relay's Source")
			require.Equal(t, b.Addr(), m.Dst)
		})
	}
	require.Equal(t, seqs(1, n), gotA)
	start := time.Now()
	r := cancel()
	require.NoError(t, r.err)
	require.Less(t, time.Since(start), time.Second, "stops promptly on cancel")
	require.Equal(t, uint64(n), r.st.Received)
	require.Zero(t, r.st.Foreign)
	require.Equal(t, uint64(n), r.st.Impair.Seen)
	require.Equal(t, r.st.Impair.Out, uint64(len(gotB)))
	require.Len(t, missing(gotB, n), int(r.st.Impair.Dropped))
	near(t, 0.2, r.st.Impair.Dropped, n, 0.04, "relay loss")
	require.NotEmpty(t, progress)

	// The relay's loss is the Sender's with the same seed.
	replay := runSender(t, impair.Config{Loss: 0.2, Seed: 21}, ps)
	require.Equal(t, replay, gotB)
}

func TestRelayIgnoresOtherGroupsOnItsPort(t *testing.T) {
	netlab.Require(t)
	a := netip.MustParseAddrPort("239.77.1.3:31103")
	other := netip.MustParseAddrPort("239.77.1.4:31103") // same port
	b := netip.MustParseAddrPort("239.77.1.5:31104")
	rxB := labRx(t, b)
	rxOther := labRx(t, other) // someone on this host joined the other group
	_ = rxOther
	cancel := startRelay(t, RelayConfig{In: a, Out: b})
	tx := labTx(t)
	send(t, tx, other, packets(5))
	send(t, tx, a, [][]byte{dataPacket(100, 1)})
	got := drain(t, rxB, sock.NewBatch(8, 2048), nil, 100*time.Millisecond)
	require.Equal(t, []wire.Seq{100}, got)
	r := cancel()
	require.NoError(t, r.err)
	require.Equal(t, uint64(1), r.st.Impair.Seen)
}

func TestRelayStopsOnCancelWithHeldDatagrams(t *testing.T) {
	netlab.Require(t)
	a := netip.MustParseAddrPort("239.77.1.6:31106")
	b := netip.MustParseAddrPort("239.77.1.7:31107")
	rxB := labRx(t, b)
	var seen atomic.Uint64 // datagrams forwarded into the relay's sending side
	cancel := startRelay(t, RelayConfig{In: a, Out: b, Impair: impair.Config{Delay: 30 * time.Second},
		ProgressEvery: 5 * time.Millisecond, Progress: func(st RelayStats) { seen.Store(st.Impair.Seen) }})
	send(t, labTx(t), a, packets(3))
	require.Eventually(t, func() bool { return seen.Load() == 3 }, 10*time.Second, time.Millisecond, "the relay holds the three")
	require.NoError(t, rxB.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
	_, err := rxB.ReadBatch(sock.NewBatch(8, 2048))
	require.True(t, sock.IsTimeout(err), "held for 30s")
	start := time.Now()
	r := cancel()
	require.NoError(t, r.err)
	require.Less(t, time.Since(start), time.Second)
	require.Equal(t, uint64(3), r.st.Impair.Forced, "flushed at the end")
	got := drain(t, rxB, sock.NewBatch(8, 2048), nil, 100*time.Millisecond)
	require.Equal(t, seqs(1, 3), got)
}

func TestRelayConfigErrors(t *testing.T) {
	a := netip.MustParseAddrPort("239.77.1.8:31108")
	b := netip.MustParseAddrPort("239.77.1.9:31109")
	for _, tc := range []struct {
		name string
		cfg  RelayConfig
		want string
	}{
		{"no In", RelayConfig{Out: b}, "In invalid"},
		{"unicast Out", RelayConfig{In: a, Out: netip.MustParseAddrPort("127.0.0.1:5")}, "Out 127.0.0.1:5"},
		{"no port", RelayConfig{In: netip.AddrPortFrom(a.Addr(), 0), Out: b}, "In 239.77.1.8:0"},
		{"same group", RelayConfig{In: a, Out: a}, "same group"},
		{"bad TTL", RelayConfig{In: a, Out: b, TTL: 256}, "TTL 256"},
		{"bad batch", RelayConfig{In: a, Out: b, Batch: -1}, "Batch -1"},
		{"bad impairment", RelayConfig{In: a, Out: b, Impair: impair.Config{Loss: 2}}, "Loss 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Relay(context.Background(), tc.cfg)
			require.ErrorIs(t, err, impair.ErrInvalidConfig)
			require.Contains(t, err.Error(), tc.want)
		})
	}
	t.Run("unknown interface", func(t *testing.T) {
		_, err := Relay(context.Background(), RelayConfig{In: a, Out: b, Interface: "nosuch0"})
		require.ErrorContains(t, err, `interface "nosuch0"`)
	})
}

func TestRelayIPv6(t *testing.T) {
	netlab.Require(t)
	a := netip.MustParseAddrPort("[ff15::77:1]:31110")
	b := netip.MustParseAddrPort("[ff15::77:2]:31111")
	veth, err := net.InterfaceByName(netlab.VethA)
	require.NoError(t, err)
	rxB, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(netip.IPv6Unspecified(), b.Port()), ReusePort: true})
	require.NoError(t, err)
	defer rxB.Close()
	require.NoError(t, rxB.Join(veth, b.Addr(), netip.Addr{}))
	cancel := startRelay(t, RelayConfig{In: a, Out: b, Interface: netlab.VethA, Impair: impair.Config{Drop: impair.DropSeqs(2)}})
	tx, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(netip.IPv6Unspecified(), 0), Interface: veth, Loopback: true})
	require.NoError(t, err)
	defer tx.Close()
	send(t, tx, a, packets(3))
	got := drain(t, rxB, sock.NewBatch(8, 2048), nil, 200*time.Millisecond)
	require.Equal(t, []wire.Seq{1, 3}, got)
	r := cancel()
	require.NoError(t, r.err)
	require.Equal(t, uint64(1), r.st.Impair.RuleDropped)
}
