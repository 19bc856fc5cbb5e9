package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/packetconn/impair"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/stretchr/testify/require"
)

// servingGrace is the publisher's Config.Grace in the tail runs:
// MDBUS_E2E_GRACE (a duration; -1ns reproduces a Close that returns right
// after the end of session) or the default.
func servingGrace(t *testing.T) time.Duration {
	v := os.Getenv("MDBUS_E2E_GRACE")
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	require.NoError(t, err)
	return d
}

// tailRun is one run of TestAcceptanceServingTailAfterEnd: the publisher
// "host" on the veth end A, with its in-process cache and retransmit
// server, publishes n messages at rate to a subscriber on end B that
// loses 3% of what it receives; then the publisher closes, and the
// retransmit server right after it, as a process that exits does. It
// returns how many messages the subscriber never got.
func tailRun(t *testing.T, run, n int, rate float64, grace time.Duration) (lost int, st subscriber.Stats) {
	t.Helper()
	// IPv6: both veth ends are in one namespace, and IPv4 drops a packet
	// that arrives with a local source address.
	group := netip.MustParseAddrPort("[ff15::40:1]:32400")
	cache := retransmit.NewCache(retransmit.CacheConfig{})
	srv, err := retransmit.NewServer(retransmit.ServerConfig{
		Listen:  netip.AddrPortFrom(netip.MustParseAddr(netlab.IPv6A), 0),
		Sources: []retransmit.Source{cache},
	})
	require.NoError(t, err)
	srvClosed := false
	defer func() {
		if !srvClosed {
			srv.Close()
		}
	}()
	c := newChecker(fmt.Sprintf("run%d", run), n)
	// When each loss was declared, against the end of session and the
	// server's exit: a loss given up while the server still answered is
	// the subscriber's doing, one after it exited the tail's.
	var mu sync.Mutex
	var losses []string
	var pubClosing, srvGone time.Time
	sub, err := subscriber.New(subscriber.Config{
		Group: group, Interface: netlab.VethB, StartSeq: 1, Recovery: subscriber.Recovery{Retransmitter: srv.Addr()},
		Wrap:      impair.Receiver(impair.Config{Loss: 0.03, Seed: uint64(1000 + run)}),
		OnMessage: c.onMessage,
		OnLoss: func(l subscriber.Loss) {
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			at := "before Close"
			switch {
			case !srvGone.IsZero():
				at = fmt.Sprintf("%v after the server exited", now.Sub(srvGone).Round(time.Millisecond))
			case !pubClosing.IsZero():
				at = fmt.Sprintf("%v after Close began, the server still up", now.Sub(pubClosing).Round(time.Millisecond))
			}
			losses = append(losses, fmt.Sprintf("[%d,%d) %s", l.From, l.To, at))
		},
	})
	require.NoError(t, err)
	defer sub.Close()
	pub, err := publisher.New(publisher.Config{
		Group: group, Interface: netlab.VethA, Source: netip.MustParseAddr(netlab.IPv6A), TTL: 1,
		RateMessages: rate, Sinks: []publisher.Sink{cache}, Grace: grace,
	})
	require.NoError(t, err)
	sum := publishRandom(t, pub, n, uint64(run), 1, 200)
	mu.Lock()
	pubClosing = time.Now()
	mu.Unlock()
	require.NoError(t, pub.Close()) // the end of session, then the grace
	require.NoError(t, srv.Close()) // the process exits
	srvClosed = true
	mu.Lock()
	srvGone = time.Now()
	mu.Unlock()
	// Nothing can be repaired any more: what is not delivered within a
	// NAK deadline is lost.
	select {
	case <-c.Done():
	case <-time.After(2 * time.Second):
	}
	st = sub.Stats()
	lost = n - int(c.Delivered())
	mu.Lock()
	if len(losses) > 0 {
		t.Logf("run %d: losses declared: %v (server: %+v)", run, losses, srv.Stats())
	}
	mu.Unlock()
	if lost == 0 {
		c.verify(t, pub.Session(), sum, n, 1)
	}
	return lost, st
}

// Acceptance: a publisher with its in-process retransmitter on
// one host (veth end A), a subscriber on another (end B) with 3% receive
// loss, 300,000 messages at 100k msgs/s, 20 runs: nothing is lost in any,
// the tail included, because Close keeps answering and repeating the end
// of session for its grace period. MDBUS_E2E_RUNS and MDBUS_E2E_N change
// the runs and messages; MDBUS_E2E_GRACE=-1ns measures a Close without
// grace.
func TestAcceptanceServingTailAfterEnd(t *testing.T) {
	netlab.Require(t)
	runs, n := scale(20, 3), scale(300_000, 30_000)
	if v := os.Getenv("MDBUS_E2E_RUNS"); v != "" {
		runs, _ = strconv.Atoi(v)
	}
	if v := os.Getenv("MDBUS_E2E_N"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	grace := servingGrace(t)
	failed := 0
	for run := range runs {
		lost, st := tailRun(t, run, n, 100_000, grace)
		t.Logf("run %d: %d messages, lost %d; NAKs %d, recovered %d, lost ranges %d, kernel drops %d",
			run, n, lost, st.NAKs, st.Recovered, st.LostRanges, st.KernelDrops)
		if lost > 0 {
			failed++
		}
	}
	t.Logf("%d of %d runs lost messages (grace %v)", failed, runs, grace)
	require.Zero(t, failed)
}
