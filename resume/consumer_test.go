package resume

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/labtest"
	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// feed is a publisher with a cache and a re-request server; rate caps
// the publisher in messages per second (0: none).
type feed struct {
	pub   *publisher.Publication
	srv   *retransmit.Server
	cache *retransmit.Cache
}

func newFeed(t *testing.T, group netip.AddrPort, session string, rate float64) *feed {
	cache := retransmit.NewCache(retransmit.CacheConfig{MaxMessages: 1 << 20})
	srv, err := retransmit.NewServer(retransmit.ServerConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"),
		Sources: []retransmit.Source{cache}, RequesterRateBytes: 1e9, RateBytes: 1e9})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	pub, err := publisher.New(publisher.Config{Group: group, Session: session, Sinks: []publisher.Sink{cache},
		HeartbeatInterval: 20 * time.Millisecond, RateMessages: rate})
	require.NoError(t, err)
	t.Cleanup(func() { pub.Close() })
	return &feed{pub, srv, cache}
}

func msg(i uint64) []byte { return binary.BigEndian.AppendUint64([]byte("m"), i) }

func (f *feed) publish(t *testing.T, from, to uint64) {
	for i := from; i < to; i++ {
		_, err := f.pub.Publish(msg(i))
		require.NoError(t, err)
	}
}

// collector checks that it gets 1, 2, 3, ... of one session, once each.
type collector struct {
	mu   sync.Mutex
	next uint64
	err  error
}

func (c *collector) on(m subscriber.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	if uint64(m.Seq) != c.next || string(m.Data) != string(msg(c.next)) {
		c.err = fmt.Errorf("got seq %d %x, want %d", m.Seq, m.Data, c.next)
		return
	}
	c.next++
}

func (c *collector) wait(t *testing.T, n uint64) {
	t.Helper()
	var next uint64
	var err error
	ok := assert.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		next, err = c.next, c.err
		return err != nil || next == n+1
	}, 20*time.Second, 5*time.Millisecond)
	require.NoError(t, err)
	require.True(t, ok, "delivered up to %d, want %d", next-1, n)
}

// TestConsumerResumes: a consumer stops (checkpoint saved), the feed goes
// on well beyond what subscriber NAK recovery would carry, and a new
// consumer resumes from the checkpoint: history by re-request, then live,
// every message once, in order.
func TestConsumerResumes(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.192.40.1:32401")
	// The publisher's rate (200,000 messages/s) keeps the live feed
	// coming, as a publisher's would, while history is fetched: 30,000
	// live messages over 150 ms.
	f := newFeed(t, group, "RESUME", 200_000)
	path := filepath.Join(t.TempDir(), "cp")
	col := &collector{next: 1}
	run := func(maxBuf int) *Consumer {
		cp, err := OpenCheckpoint(path, CheckpointConfig{})
		require.NoError(t, err)
		c, err := New(Config{Feed: subscriber.Config{Group: group, Recovery: subscriber.Recovery{Retransmitter: f.srv.Addr()}},
			Checkpoint: cp, Start: Start{Kind: StartSession}, OnMessage: col.on, MaxBuffered: maxBuf})
		require.NoError(t, err)
		return c
	}
	c := run(0)
	f.publish(t, 1, 1001) // the consumer joins late: history from 1
	col.wait(t, 1000)
	require.NoError(t, c.Close())
	st := c.Stats()
	t.Logf("first run: %+v", st)

	f.publish(t, 1001, 120_001) // beyond NAK.MaxPending (65,536) while nobody listens
	c = run(64)                 // a small live buffer: it overflows while history is fetched
	done := make(chan struct{})
	go func() { // the live feed keeps going during the catch-up
		defer close(done)
		for i := uint64(120_001); i < 150_001; i++ {
			if _, err := f.pub.Publish(msg(i)); err != nil {
				return
			}
		}
	}()
	<-done
	col.wait(t, 150_000)
	require.NoError(t, c.Close())
	st = c.Stats()
	t.Logf("second run: %+v", st)
	require.NoError(t, st.Err)
	require.Equal(t, uint64(1), st.CatchUps)
	require.Zero(t, st.LostHistory)
	require.GreaterOrEqual(t, st.History, uint64(119_000))
}

// TestConsumerHistoryFromBackup: the feed's Retransmitter is down (its
// port refuses); the history comes from its backup, the next source, and
// the refusal, covered, is logged but not reported as the consumer's
// error.
func TestConsumerHistoryFromBackup(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.192.40.2:32402")
	f := newFeed(t, group, "BACKUP", 0)
	deadAddr := labtest.RefusedAddr(t) // nothing listens there
	f.publish(t, 1, 5001)
	// Sent before the consumer joins, so all of it is history (the
	// publisher sends asynchronously: under -race CI saw 551 of them
	// arrive live).
	require.NoError(t, f.pub.Flush(context.Background()))
	col := &collector{next: 1}
	c, err := New(Config{
		Feed:  subscriber.Config{Group: group, Recovery: subscriber.Recovery{Retransmitter: deadAddr, Backups: []netip.AddrPort{f.srv.Addr()}}},
		Start: Start{Kind: StartSession}, OnMessage: col.on,
	})
	require.NoError(t, err)
	f.publish(t, 5001, 6001) // live, after the join
	col.wait(t, 6000)
	require.NoError(t, c.Close())
	st := c.Stats()
	t.Logf("%+v", st)
	require.NoError(t, st.Err)
	require.Zero(t, st.LostHistory)
	require.GreaterOrEqual(t, st.History, uint64(5000))
	require.Positive(t, f.srv.Stats().Answered)
}
