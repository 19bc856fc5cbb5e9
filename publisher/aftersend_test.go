package publisher_test

import (
	"net/netip"
	"sync"
	"testing"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// afterSink records the packets offered and, at each AfterSend, how many
// of them a receiver could already read: every one, since AfterSend comes
// once they are in the kernel.
type afterSink struct {
	mu      sync.Mutex
	rx      *sock.Conn
	in      *sock.Batch
	offered int
	read    int
	calls   int
	behind  int // AfterSend calls that found packets not yet readable
}

func (s *afterSink) SentPacket([]byte) {
	s.mu.Lock()
	s.offered++
	s.mu.Unlock()
}

func (s *afterSink) AfterSend() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	for s.read < s.offered {
		n, err := s.rx.TryReadBatch(s.in)
		if err != nil || n == 0 {
			s.behind++
			return
		}
		s.read += n
	}
}

// TestAfterSend: an AfterSendSink is told after its packets were handed to
// the kernel (a receiver on the host can read each of them at that
// moment), at least once per publish that sent, and a plain Sink is not
// asked to be one.
func TestAfterSend(t *testing.T) {
	netlab.Require(t)
	for _, inline := range []bool{true, false} {
		name := "goroutine"
		if inline {
			name = "inline"
		}
		t.Run(name, func(t *testing.T) {
			group := netip.MustParseAddrPort("239.10.9.1:32901")
			if !inline {
				group = netip.MustParseAddrPort("239.10.9.2:32902")
			}
			rx := listen(t, group, "lo")
			s := &afterSink{rx: rx.c, in: sock.NewBatch(64, wire.MaxPayloadSize)}
			p := open(t, publisher.Config{Group: group, Send: sendMode(inline), Sinks: []publisher.Sink{s, nopSink{}}, HeartbeatInterval: -1})
			publishAll(t, p, 200, func(i int) []byte { return []byte{byte(i)} })
			s.mu.Lock()
			defer s.mu.Unlock()
			require.Positive(t, s.offered)
			require.Equal(t, s.offered, s.read, "every packet readable by the last AfterSend")
			require.Zero(t, s.behind)
			require.Positive(t, s.calls)
		})
	}
}
