package publisher_test

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// TestFullPacketsSentByCaller: a PublishBatch that fills whole packets
// while nothing is being sent sends them before it returns, on the
// caller's goroutine, also when there are more than BatchPackets of them;
// with Linger only the partly filled last packet waits; SendBackground
// leaves everything to the sending goroutine. On virtual time
// (bubble_test.go), so "does not linger" is exact.
func TestFullPacketsSentByCaller(t *testing.T) {
	netlab.Require(t)
	const size, batchPackets = 50, 4
	perPacket := (wire.DefaultPayloadSizeIPv4 - wire.HeaderLen) / (size + wire.MsgLenLen)
	const full = 10 // full packets, then a partial one of 3 messages
	n := full*perPacket + 3
	for i, tc := range []struct {
		name string
		cfg  publisher.Config
		// sent: packets sent when PublishBatch returns; inline: the
		// WriteBatch rounds made by the caller.
		sent, inline uint64
	}{
		{"default", publisher.Config{}, full + 1, 3},                       // 4+4+3: the partial one joins the last round
		{"linger", publisher.Config{Linger: publisher.MaxLinger}, full, 3}, // 4+4+2: the partial one lingers
		{"background", publisher.Config{Send: publisher.SendBackground}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				group := netip.AddrPortFrom(netip.MustParseAddr("239.10.0.50"), uint16(31500+i))
				cfg := tc.cfg
				cfg.Group, cfg.BatchPackets, cfg.HeartbeatInterval = group, batchPackets, -1
				p, cc := openCaptured(t, cfg)
				batch := make([][]byte, n)
				for k := range batch {
					batch[k] = makeMsg(wire.Seq(k+1), 0, size)
				}
				start := time.Now()
				_, err := p.PublishBatch(batch)
				require.NoError(t, err)
				st := p.Stats()
				if tc.sent > 0 {
					require.Equal(t, tc.sent, st.Packets, "sent before PublishBatch returned")
				}
				require.Equal(t, tc.inline, st.InlineSends)

				synctest.Wait()
				got := cc.data()
				if tc.cfg.Linger > 0 {
					require.Len(t, got, full)
					require.Less(t, time.Since(start), publisher.MaxLinger/2, "full packets do not linger")
					advance(50 * time.Millisecond)
					require.Len(t, cc.data(), full, "the partial one does")
					require.NoError(t, p.Flush(context.Background()))
					got = cc.data()
				}
				require.Equal(t, batch, checkContiguous(t, got, 1, wire.DefaultPayloadSizeIPv4))
				require.Len(t, got, full+1)
				require.NoError(t, p.Flush(context.Background()))
				st = p.Stats()
				require.EqualValues(t, full+1, st.Packets)
				require.EqualValues(t, n, st.Messages)
				if tc.cfg.Send == publisher.SendBackground {
					require.Zero(t, st.InlineSends, "SendBackground: the sending goroutine sends everything")
				}
			})
		})
	}
}

// TestFullPacketSentByPublish: with Linger, the Publish whose message
// fills a packet sends it; the packet does not wait for the next message
// or for Linger.
func TestFullPacketSentByPublish(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.10.0.51:31510")
	rx := listen(t, group, "lo")
	p := open(t, publisher.Config{Group: group, Linger: publisher.MaxLinger, HeartbeatInterval: -1})
	const size = 64 // 22 of them fill a 1472-byte packet exactly
	perPacket := (wire.DefaultPayloadSizeIPv4 - wire.HeaderLen) / (size + wire.MsgLenLen)
	require.Equal(t, wire.DefaultPayloadSizeIPv4-wire.HeaderLen, perPacket*(size+wire.MsgLenLen), "the test wants messages that fill a packet exactly")
	for k := range perPacket {
		_, err := p.Publish(makeMsg(wire.Seq(k+1), 0, size))
		require.NoError(t, err)
	}
	st := p.Stats()
	require.EqualValues(t, 1, st.Packets, "the last Publish sent the full packet")
	require.EqualValues(t, 1, st.InlineSends)
	got := rx.data(5*time.Second, wire.Seq(perPacket))
	require.Len(t, got, 1)
	require.Equal(t, perPacket, got[0].MessageCount())
}

// TestNearlyFullPacketSentByPublish: with Linger, a packet left with less
// room than the message just added leaves with that Publish: a 1,024-byte
// message fills a 1,472-byte packet at once, and 27 messages of 50 bytes
// leave 48 bytes, too few for a 28th. The packet does not wait for the
// next message or for Linger to find out.
func TestNearlyFullPacketSentByPublish(t *testing.T) {
	netlab.Require(t)
	for i, tc := range []struct{ size, perPacket int }{{1024, 1}, {50, 27}} {
		group := netip.AddrPortFrom(netip.MustParseAddr("239.10.0.52"), uint16(31520+i))
		rx := listen(t, group, "lo")
		p := open(t, publisher.Config{Group: group, Linger: publisher.MaxLinger, HeartbeatInterval: -1})
		for k := range tc.perPacket {
			_, err := p.Publish(makeMsg(wire.Seq(k+1), 0, tc.size))
			require.NoError(t, err)
		}
		st := p.Stats()
		require.EqualValues(t, 1, st.Packets, "size %d: the Publish that left too little room sent the packet", tc.size)
		require.EqualValues(t, 1, st.InlineSends, "size %d", tc.size)
		got := rx.data(5*time.Second, wire.Seq(tc.perPacket))
		require.Len(t, got, 1)
		require.Equal(t, tc.perPacket, got[0].MessageCount())
	}
}

// TestClosedLoopSendsInline: with SendInline, a publisher that sends the next
// message only when the answer to the previous one came back (a closed
// loop, as a ping-pong) sends every one of them inline, never through the
// sending goroutine.
func TestClosedLoopSendsInline(t *testing.T) {
	netlab.Require(t)
	ping := netip.MustParseAddrPort("239.10.0.52:31520")
	pong := netip.MustParseAddrPort("239.10.0.53:31521")
	in := listen(t, ping, "lo")
	back := listen(t, pong, "lo")
	ifi, err := net.InterfaceByName("lo")
	require.NoError(t, err)
	out, err := sock.Open(sock.Config{Local: netip.MustParseAddrPort("0.0.0.0:0"), Interface: ifi, Loopback: true})
	require.NoError(t, err)
	t.Cleanup(func() { out.Close() })

	const n = 2000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the ponger: echo each ping to the pong group
		defer wg.Done()
		rb, wb := sock.NewBatch(8, 2048), sock.NewBatch(8, 0)
		for echoed := 0; echoed < n; {
			if err := in.c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
				return
			}
			k, err := in.c.ReadBatch(rb)
			if err != nil {
				return
			}
			for i := range k {
				wb.Msgs[i] = sock.Message{Buf: rb.Msgs[i].Buf, Addr: pong}
			}
			if _, err := out.WriteBatch(wb, k); err != nil {
				return
			}
			echoed += k
		}
	}()
	defer wg.Wait()

	p := open(t, publisher.Config{Group: ping, Send: publisher.SendInline, HeartbeatInterval: -1})
	msg := make([]byte, 64)
	for k := range n {
		seq, err := p.Publish(msg)
		require.NoError(t, err)
		pk, ok := back.read(10 * time.Second)
		require.True(t, ok, "pong %d did not come", k+1)
		require.Equal(t, seq, pk.Seq)
	}
	st := p.Stats()
	require.EqualValues(t, n, st.Packets)
	require.EqualValues(t, n, st.InlineSends, "every ping of a closed loop is sent inline")
}
