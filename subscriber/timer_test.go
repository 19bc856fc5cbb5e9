package subscriber

import (
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mdbus/mdbus/internal/alarm"
	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// sentNAKs stands for the repair socket: it keeps each re-request sent
// with the moment it left.
type sentNAKs struct {
	sock.PacketConn // only WriteBatch is called
	mu              sync.Mutex
	at              []time.Time
	reqs            []wire.Request
	to              []netip.AddrPort
}

func (f *sentNAKs) WriteBatch(b *sock.Batch, n int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range b.Msgs[:n] {
		r, err := wire.ParseRequest(m.Buf)
		if err != nil {
			return 0, err
		}
		f.at, f.reqs, f.to = append(f.at, time.Now()), append(f.reqs, r), append(f.to, m.Addr)
	}
	return n, nil
}

// TestTimerGoroutineOnVirtualTime runs the real NAK timer goroutine
// (runTimer: monotime and a Go timer) in a synctest bubble, over a core
// fed by hand and a repair socket that records: the re-requests leave
// exactly when the detector says (delay, then back-off capped at
// MaxRetry), the range is given up exactly at the deadline, and the
// goroutine sleeps in between (the clock would not move otherwise).
func TestTimerGoroutineOnVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{Group: testGroup, Recovery: Recovery{Retransmitter: repairer, NAK: testNAK()}}
		h := newHarness(t, cfg)
		cfg, err := cfg.withDefaults()
		require.NoError(t, err)
		rec := &sentNAKs{}
		s := &Subscriber{cfg: cfg, c: h.c, quit: make(chan struct{}), repair: rec,
			out: sock.NewBatch(requestBatchSize, 0), reqBuf: make([]byte, requestBatchSize*wire.RequestLen)}
		h.c.alarm = alarm.NewGo() // a Go timer: the bubble's clock
		s.wg.Add(1)
		go s.runTimer()
		defer func() {
			close(s.quit)
			h.c.alarm.Close()
			s.wg.Wait()
		}()
		feed := func(b []byte) {
			h.r.batch.Msgs[0] = sock.Message{Buf: b, Addr: srcA, Dst: testGroup.Addr()}
			h.c.mu.Lock()
			h.r.handleLocked(h.r.batch, 1, monotime.Now())
			h.c.mu.Unlock()
		}

		// The loss is the last thing the timer does: the test waits for
		// it (the bubble's clock runs on while every goroutine sleeps)
		// and reads the clock when it came.
		lost := make(chan time.Time, 1)
		onLoss := h.c.cfg.onLoss
		h.c.cfg.onLoss = func(l Loss) {
			onLoss(l)
			lost <- time.Now()
		}
		synctest.Wait() // the timer goroutine sleeps: no gap yet
		feed(pkt(sessA, 1, 2))
		found := time.Now()
		feed(pkt(sessA, 5, 2)) // 3 and 4 are missing
		require.Equal(t, 100*time.Millisecond, (<-lost).Sub(found), "given up exactly at the deadline")
		// The harness's callbacks run under the core's mutex, on the
		// timer goroutine: read what they kept under it too.
		synctest.Wait()
		h.c.mu.Lock()
		defer h.c.mu.Unlock()

		rec.mu.Lock()
		defer rec.mu.Unlock()
		var at []time.Duration
		for i, r := range rec.reqs {
			require.Equal(t, wire.Request{Session: sessA, Seq: 3, Count: 2}, r)
			require.Equal(t, repairer, rec.to[i])
			at = append(at, rec.at[i].Sub(found))
		}
		ms := time.Millisecond
		require.Equal(t, []time.Duration{1 * ms, 11 * ms, 31 * ms, 51 * ms, 71 * ms, 91 * ms}, at, "delay, then back-off capped at MaxRetry")
		require.Equal(t, []Loss{{StreamID{Source: srcA, Session: sessA, Incarnation: 1}, 3, 5}}, h.losses, "given up at the deadline")
		require.Equal(t, []wire.Seq{1, 2, 5, 6}, h.seqs(srcA, sessA))
	})
}
