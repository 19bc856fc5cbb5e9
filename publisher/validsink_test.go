package publisher_test

import (
	"net/netip"
	"sync"
	"testing"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/validpkt"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// validSink records the packets it is handed as validpkt.Packets, and
// counts the ones it is handed as bytes instead.
type validSink struct {
	mu    sync.Mutex
	pkts  []validpkt.Packet
	bytes int
}

func (s *validSink) SentPacket([]byte) {
	s.mu.Lock()
	s.bytes++
	s.mu.Unlock()
}

func (s *validSink) SentValidPacket(p validpkt.Packet) {
	s.mu.Lock()
	p.Body = append([]byte(nil), p.Body...)
	s.pkts = append(s.pkts, p)
	s.mu.Unlock()
}

// TestValidSink: a sink of this module that takes validpkt.Packets (a
// retransmit.Cache) is handed every packet that way, never as bytes, and
// each one is exactly the packet a plain Sink beside it gets: the header's
// fields, and message blocks that parse to that many messages.
func TestValidSink(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.10.9.3:32903")
	v, rec := &validSink{}, &recordingSink{}
	p := open(t, publisher.Config{Group: group, Sinks: []publisher.Sink{v, rec}, HeartbeatInterval: -1})
	const msgs = 500
	publishAll(t, p, msgs, func(i int) []byte { return make([]byte, i%300) })
	v.mu.Lock()
	defer v.mu.Unlock()
	require.Zero(t, v.bytes)
	raw := rec.packets()
	require.Len(t, v.pkts, len(raw))
	var n int
	for i, b := range raw {
		want, err := wire.ParsePacket(b)
		require.NoError(t, err)
		got := v.pkts[i]
		require.Equal(t, want.Header, wire.Header{Session: got.Session, Seq: got.Seq, Count: got.Count}, "packet %d", i)
		require.Equal(t, want.Body(), got.Body, "packet %d", i)
		n += int(got.Count)
	}
	require.Equal(t, msgs, n)
}
