package publisher_test

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// Tests of what the publisher does on its timers (linger, heartbeats, the
// grace after the end of session, the rate limit) run in a testing/synctest
// bubble, where time is virtual: it moves only when every goroutine of the
// bubble is blocked, so a timer fires exactly when due and a test waits
// for nothing. A socket cannot take part (a goroutine blocked on the
// network does not let virtual time move), so the publication still opens
// its socket but sends through captureConn, given by Config.Wrap: it
// records each packet with the virtual time it was sent, as a receiver on
// the wire would see it, and never makes the system call.

// advance moves the bubble's virtual time on by d, then returns once every
// goroutine in the bubble is blocked again (synctest.Wait): timers due by
// then have fired and what they started is done. Call it only in a
// bubble, from the test's goroutine.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// captured is a packet handed to captureConn.
type captured struct {
	packet
	at time.Time // virtual time of the WriteBatch
}

// captureConn is the bubble's wire: see above. Close closes the socket
// under it (the Wrap contract).
type captureConn struct {
	sock.PacketConn
	mu   sync.Mutex
	pkts []captured
}

func (c *captureConn) WriteBatch(b *sock.Batch, n int) (int, error) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range n {
		raw := b.Msgs[i].Buf
		wp, err := wire.ParsePacket(raw)
		if err != nil {
			panic("publisher sent a packet that does not parse: " + err.Error())
		}
		pk := packet{Header: wp.Header, size: len(raw), raw: append([]byte(nil), raw...)}
		for it := wp.Messages(); ; {
			msg, _, ok := it.Next()
			if !ok {
				break
			}
			pk.msgs = append(pk.msgs, append([]byte(nil), msg...))
		}
		c.pkts = append(c.pkts, captured{packet: pk, at: now})
	}
	return n, nil
}

// sent returns the packets captured so far.
func (c *captureConn) sent() []captured {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]captured(nil), c.pkts...)
}

// data returns the data packets captured so far.
func (c *captureConn) data() []packet {
	var out []packet
	for _, pk := range c.sent() {
		if pk.isData() {
			out = append(out, pk.packet)
		}
	}
	return out
}

// openCaptured starts a publication, in the bubble of t, whose packets go
// to the returned captureConn (under any Wrap cfg already has), and closes
// it at the end of the test.
func openCaptured(t *testing.T, cfg publisher.Config) (*publisher.Publication, *captureConn) {
	t.Helper()
	cc := &captureConn{}
	outer := cfg.Wrap
	cfg.Wrap = func(c sock.PacketConn) sock.PacketConn {
		cc.PacketConn = c
		if outer != nil {
			return outer(cc)
		}
		return cc
	}
	p, err := publisher.New(publisher.GoTimers(cfg))
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p, cc
}
