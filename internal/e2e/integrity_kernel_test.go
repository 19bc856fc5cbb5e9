package e2e

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/stretchr/testify/require"
)

// TestAcceptanceKernelDrops: losses the kernel makes, not
// injected ones. A subscriber with a small receive buffer whose consumer
// stalls three times, each while the publisher sends 300 packets (some
// 400 KiB against a buffer of 64 KiB; a stall that comes after the last
// message was published ends at once), makes the kernel drop datagrams (counted
// exactly by SO_RXQ_OVFL in Stats.KernelDrops); recovery from the
// retransmitter repairs every message, byte-identical.
func TestAcceptanceKernelDrops(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.192.93.1:32931")
	n := scale(100_000, 20_000)
	b := newBus(t, publisher.Config{Group: group, RateMessages: 50_000, HeartbeatInterval: 20 * time.Millisecond},
		retransmit.CacheConfig{}, retransmit.ServerConfig{})
	c := newChecker("sub", n)
	stallAt := map[int]bool{n / 5: true, n / 2: true, 4 * n / 5: true}
	seen := 0
	s, err := subscriber.New(subscriber.Config{
		Group: group, StartSeq: 1,
		Recovery: subscriber.Recovery{
			Retransmitter: b.srv.Addr(),
			// The repair socket has the same small buffer: answers of 64
			// messages fit in it, the default 1024 would overflow it too.
			NAK: nak.Config{Deadline: 10 * time.Second, MaxRequest: 64},
		},
		Receive: subscriber.Receive{
			ReorderPackets: 1 << 16,
			ReadBuffer:     32 << 10, // the kernel doubles it: 64 KiB, a few dozen datagrams
		},
		OnMessage: func(m subscriber.Message) {
			seen++
			if stallAt[seen] {
				// A consumer that stalls: the lock is held, nothing is
				// read while the publisher overfills the buffer. A
				// subscriber far behind (under -race) may stall after the
				// publisher has sent everything: then nothing more comes
				// to overfill the buffer, and the stall ends at once
				// instead of outlasting the NAK deadline.
				sent := b.pub.Stats().Packets
				poll(10*time.Second, func() bool {
					st := b.pub.Stats()
					return st.Packets >= sent+300 || st.Messages >= uint64(n)
				})
			}
			c.onMessage(m)
		},
	})
	require.NoError(t, err)
	defer s.Close()
	sum := publishRandom(t, b.pub, n, 31, 20, 200)
	waitAllSubs(t, 60*time.Second, []*subscriber.Subscriber{s}, c)
	c.verify(t, b.pub.Session(), sum, n, 1)
	st := s.Stats()
	t.Logf("%d messages: kernel drops %d datagrams (read buffer granted %d bytes), gaps %d (%d messages), NAKs %d, recovered %d, lost %d, recovery p50 %v p99 %v max %v",
		n, st.KernelDrops, st.ReadBufferGranted, st.Gaps, st.GapMessages, st.NAKs, st.Recovered, st.LostMessages, st.RecoveryP50, st.RecoveryP99, st.RecoveryMax)
	require.Positive(t, st.KernelDrops, "the stalls made the kernel drop nothing: %s", fmt.Sprint(st.ReadBufferGranted))
	require.Zero(t, st.LostMessages)
	require.Positive(t, st.Recovered)
}
