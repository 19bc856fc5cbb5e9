package publisher_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// TestGSOEndToEnd: a subscriber gets every message once, in order and
// byte-identical, from a publication with GSO (the default) and with
// DisableGSO, over IPv4 on lo and IPv6 on a veth, with messages that fill
// equal-size packets (long trains) and with messages of varying size
// (packets of varying length: short trains and single datagrams). The
// publication's Stats show trains only when GSO is on, carrying most
// packets when they are of one size.
func TestGSOEndToEnd(t *testing.T) {
	netlab.Require(t)
	type net struct {
		name, ifname string
		group        netip.AddrPort
	}
	nets := []net{
		{"ipv4-lo", "lo", netip.MustParseAddrPort("239.10.0.40:31400")},
		{"ipv6-veth", netlab.VethA, netip.MustParseAddrPort("[ff15::10:40]:31401")},
	}
	sizes := []struct {
		name   string
		size   func(seq wire.Seq) int
		trains bool // packets come in runs of one length
	}{
		{"64B", func(wire.Seq) int { return 64 }, true},
		{"1024B", func(wire.Seq) int { return 1024 }, true},
		{"varied", func(seq wire.Seq) int { return 1 + int(seq*7919)%300 }, false},
	}
	port := uint16(31410)
	for _, n := range nets {
		for _, sz := range sizes {
			for _, disable := range []bool{false, true} {
				port++
				group := netip.AddrPortFrom(n.group.Addr(), port)
				t.Run(fmt.Sprintf("%s/%s/disable-gso=%v", n.name, sz.name, disable), func(t *testing.T) {
					endToEnd(t, group, n.ifname, sz.size, disable, sz.trains)
				})
			}
		}
	}
}

func endToEnd(t *testing.T, group netip.AddrPort, ifname string, size func(wire.Seq) int, disable, trains bool) {
	const (
		total = 12000
		burst = 480 // messages per PublishBatch; the test waits for them before the next
	)
	tag := byte(group.Port())
	var (
		mu       sync.Mutex
		failure  string
		received atomic.Uint64
		next     = wire.Seq(1)
	)
	sub, err := subscriber.New(subscriber.Config{
		Group:     group,
		Interface: ifname,
		Receive: subscriber.Receive{
			ReadBuffer: 8 << 20,
		},
		OnMessage: func(m subscriber.Message) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case failure != "":
			case m.Seq != next:
				failure = fmt.Sprintf("got seq %d, want %d", m.Seq, next)
			case !bytes.Equal(m.Data, makeMsg(m.Seq, tag, size(m.Seq))):
				failure = fmt.Sprintf("seq %d: %d bytes differ from the %d published", m.Seq, len(m.Data), size(m.Seq))
			}
			next = m.Seq + 1
			received.Add(1)
		},
	})
	require.NoError(t, err)
	defer sub.Close()
	p := open(t, publisher.Config{Group: group, Interface: ifname, Session: "GSO", DisableGSO: disable, Linger: time.Millisecond})
	msgs := make([][]byte, 0, burst)
	for seq := wire.Seq(1); seq <= total; {
		msgs = msgs[:0]
		for ; len(msgs) < burst && seq <= total; seq++ {
			msgs = append(msgs, makeMsg(seq, tag, size(seq)))
		}
		_, err := p.PublishBatch(msgs)
		require.NoError(t, err)
		require.NoError(t, p.Flush(t.Context()))
		// Wait for the subscriber, so a plain receiving socket (it pays
		// per datagram) never overflows behind a GSO sender.
		require.Eventually(t, func() bool { return received.Load() >= uint64(seq-1) }, 10*time.Second, 200*time.Microsecond,
			"the subscriber did not get all %d messages", seq-1)
	}
	mu.Lock()
	require.Empty(t, failure)
	mu.Unlock()
	require.Equal(t, uint64(total), received.Load())
	st := p.Stats()
	sst := sub.Stats()
	require.Zero(t, sst.KernelDrops)
	require.Zero(t, sst.Gaps)
	require.Equal(t, uint64(total), st.Messages)
	require.Zero(t, st.SendErrors)
	require.Zero(t, st.GSOFallbacks)
	require.Equal(t, !disable, st.GSO)
	t.Logf("%d packets in %d write batches; GSO %v: %d trains carrying %d packets", st.Packets, st.WriteBatches, st.GSO, st.GSOTrains, st.GSOPackets)
	if disable {
		require.Zero(t, st.GSOTrains)
		return
	}
	if !trains {
		return // runs of one length are short: a packet and a shorter next one make a train of 2
	}
	require.NotZero(t, st.GSOTrains)
	require.Greater(t, st.GSOPackets, st.Packets/2, "most packets went in trains")
}

// TestGSOZeroAllocs: publishing full packets that leave as GSO trains
// allocates nothing.
func TestGSOZeroAllocs(t *testing.T) {
	netlab.Require(t)
	p := open(t, publisher.Config{Group: netip.MustParseAddrPort("239.10.0.41:31430"), Linger: time.Millisecond})
	msg := make([]byte, 64)
	batch := make([][]byte, 22*8) // 8 full 1472-byte packets
	for i := range batch {
		batch[i] = msg
	}
	run := func() {
		if _, err := p.PublishBatch(batch); err != nil {
			t.Fatal(err)
		}
	}
	for range 200 { // warm: every ring buffer used once
		run()
	}
	require.NoError(t, p.Flush(t.Context()))
	before := p.Stats().GSOTrains
	allocs := testing.AllocsPerRun(200, run)
	require.Zero(t, allocs)
	require.Greater(t, p.Stats().GSOTrains, before)
}
