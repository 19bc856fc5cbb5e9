package impair

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

func TestReceiverDeadlines(t *testing.T) {
	held := Config{Reorder: 1, ReorderDepth: 100, ReorderWait: 300 * time.Millisecond}
	// On the bubble's clock the bounds are exact.
	t.Run("caller deadline before the hold bound times out, then the held one comes", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(t)
			c, err := NewReceiver(f, held)
			require.NoError(t, err)
			defer c.Close()
			f.push(dataPacket(1, 1))
			b := sock.NewBatch(4, 2048)
			start := time.Now()
			require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Millisecond)))
			_, err = c.ReadBatch(b)
			require.True(t, sock.IsTimeout(err), "got %v", err)
			require.Equal(t, 30*time.Millisecond, time.Since(start), "at the caller's deadline")
			require.NoError(t, c.SetReadDeadline(time.Time{}))
			n, err := c.ReadBatch(b)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			require.Equal(t, 300*time.Millisecond, time.Since(start), "at the hold bound")
		})
	})
	t.Run("no caller deadline: held datagrams end the read at their bound", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(t)
			c, err := NewReceiver(f, Config{Reorder: 1, ReorderWait: 40 * time.Millisecond})
			require.NoError(t, err)
			defer c.Close()
			f.push(dataPacket(1, 1), dataPacket(2, 1))
			start := time.Now()
			b := sock.NewBatch(4, 2048)
			for n := 0; n < 2; {
				k, err := c.ReadBatch(b)
				require.NoError(t, err)
				n += k
			}
			require.Equal(t, 40*time.Millisecond, time.Since(start))
		})
	})
	// In a bubble: synctest.Wait returns once the reader is blocked, and
	// the clock moves only when every goroutine waits on it, so an
	// interrupted read that took no virtual time was not woken by a timer.
	t.Run("deadline set from another goroutine interrupts a read with held datagrams", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(t)
			c, err := NewReceiver(f, Config{Reorder: 1, ReorderWait: 10 * time.Second})
			require.NoError(t, err)
			defer c.Close()
			f.push(dataPacket(1, 1))
			require.NoError(t, c.SetReadDeadline(time.Time{}))
			done := make(chan error, 1)
			go func() {
				_, err := c.ReadBatch(sock.NewBatch(4, 2048))
				done <- err
			}()
			synctest.Wait()
			start := time.Now()
			require.NoError(t, c.SetReadDeadline(time.Now()))
			select {
			case err := <-done:
				require.True(t, sock.IsTimeout(err), "got %v", err)
			case <-time.After(2 * time.Second):
				t.Fatal("ReadBatch not interrupted by SetReadDeadline")
			}
			require.Zero(t, time.Since(start), "the read waited for a timer")
			require.Equal(t, uint64(1), c.Stats().Held)
		})
	})
	t.Run("ready datagrams come even past the caller deadline", func(t *testing.T) {
		f := newFake(t)
		c, err := NewReceiver(f, Config{})
		require.NoError(t, err)
		defer c.Close()
		f.push(packets(2)...)
		b := sock.NewBatch(1, 2048)
		n, err := c.ReadBatch(sock.NewBatch(2, 2048)) // sizes the inner batch to 2
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(-time.Second)))
		_, err = c.ReadBatch(b)
		require.True(t, sock.IsTimeout(err), "nothing ready, deadline passed: %v", err)
		require.NoError(t, c.SetReadDeadline(time.Time{}))
		f.push(packets(2)...)
		n, err = c.ReadBatch(b) // reads 2, returns 1, keeps 1 ready
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(-time.Second)))
		n, err = c.ReadBatch(b)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		_, err = c.ReadBatch(b)
		require.True(t, sock.IsTimeout(err))
	})
}

func TestClose(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(sock.PacketConn) sock.PacketConn
	}{
		{"receiver", Receiver(Config{Reorder: 0.5})},
		{"sender", Sender(Config{Reorder: 0.5, Delay: time.Millisecond})},
		{"sender without goroutine", Sender(Config{Loss: 0.5})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			c := tc.wrap(f)
			require.NoError(t, c.Close())
			require.ErrorIs(t, c.Close(), ErrClosed)
			require.ErrorIs(t, c.Close(), net.ErrClosed)
			_, err := c.ReadBatch(sock.NewBatch(1, 10))
			require.ErrorIs(t, err, net.ErrClosed)
			b := sock.NewBatch(1, 0)
			b.Msgs[0].Buf = dataPacket(1, 1)
			_, err = c.WriteBatch(b, 1)
			require.ErrorIs(t, err, net.ErrClosed)
			require.ErrorIs(t, c.WriteTo(b.Msgs[0].Buf, fakeAddr), net.ErrClosed)
			f.mu.Lock()
			require.True(t, f.closed, "Close closes the inner conn")
			f.mu.Unlock()
		})
	}
	t.Run("receiver close unblocks a read", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(t)
			c, err := NewReceiver(f, Config{Reorder: 1, ReorderWait: 10 * time.Second})
			require.NoError(t, err)
			f.push(dataPacket(1, 1))
			done := make(chan error, 1)
			go func() {
				_, err := c.ReadBatch(sock.NewBatch(4, 2048))
				done <- err
			}()
			synctest.Wait()
			require.NoError(t, c.Close())
			select {
			case err := <-done:
				require.ErrorIs(t, err, ErrClosed)
			case <-time.After(2 * time.Second):
				t.Fatal("ReadBatch not unblocked by Close")
			}
		})
	})
}

func TestSenderReleasesWithoutFurtherWrites(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		min  time.Duration
	}{
		{"delay", Config{Delay: 40 * time.Millisecond}, 40 * time.Millisecond},
		{"reorder wait", Config{Reorder: 1, ReorderDepth: 100, ReorderWait: 40 * time.Millisecond}, 40 * time.Millisecond},
		{"reorder then delay", Config{Reorder: 1, ReorderDepth: 100, ReorderWait: 20 * time.Millisecond, Delay: 20 * time.Millisecond}, 40 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			c, err := NewSender(f, tc.cfg)
			require.NoError(t, err)
			defer c.Close()
			start := time.Now()
			b := sock.NewBatch(3, 0)
			for i, p := range packets(3) {
				b.Msgs[i].Buf, b.Msgs[i].Addr = p, fakeAddr
			}
			n, err := c.WriteBatch(b, 3)
			require.NoError(t, err)
			require.Equal(t, 3, n)
			require.Empty(t, f.sentSnapshot())
			require.Equal(t, uint64(3), c.Stats().Held)
			// The release goroutine sends, then updates Stats.Held: wait
			// for both (CI once saw the three sent and Held still 3).
			require.Eventually(t, func() bool { return len(f.sentSnapshot()) == 3 && c.Stats().Held == 0 }, 2*time.Second, time.Millisecond,
				"sent %d, held %d", len(f.sentSnapshot()), c.Stats().Held)
			for i, d := range f.sentSnapshot() {
				require.GreaterOrEqual(t, d.at.Sub(start), tc.min)
				require.Less(t, d.at.Sub(start), time.Second)
				require.Equal(t, wire.Seq(i+1), seqOf(t, d.data))
			}
		})
	}
}

func TestSenderCloseFlushesHeld(t *testing.T) {
	f := newFake(t)
	c, err := NewSender(f, Config{Delay: 30 * time.Second, Reorder: 0.5, ReorderWait: 30 * time.Second, Seed: 1})
	require.NoError(t, err)
	b := sock.NewBatch(10, 0)
	for i, p := range packets(10) {
		b.Msgs[i].Buf, b.Msgs[i].Addr = p, fakeAddr
	}
	_, err = c.WriteBatch(b, 10)
	require.NoError(t, err)
	require.Empty(t, f.sentSnapshot())
	require.NoError(t, c.Close())
	sent := f.sentSnapshot()
	require.Len(t, sent, 10)
	st := c.Stats()
	require.Equal(t, uint64(10), st.Forced)
	require.Equal(t, uint64(10), st.Out)
	require.Zero(t, st.Held)
}

func TestSenderWriteToAndRules(t *testing.T) {
	f := newFake(t)
	c, err := NewSender(f, Config{Drop: AnyOf(DropSeqs(3), DropRange(6, 7), DropHeartbeats())})
	require.NoError(t, err)
	defer c.Close()
	to := netip.MustParseAddrPort("239.9.9.9:9")
	for _, p := range packets(8) {
		require.NoError(t, c.WriteTo(p, to))
	}
	require.NoError(t, c.WriteTo(wire.AppendHeartbeat(nil, testSession, 9), to))
	var got []wire.Seq
	for _, d := range f.sentSnapshot() {
		got = append(got, seqOf(t, d.data))
		require.Equal(t, to, d.to)
	}
	require.Equal(t, []wire.Seq{1, 2, 4, 5, 8}, got)
	require.Equal(t, uint64(4), c.Stats().RuleDropped)
}

// failingConn fails every write.
type failingConn struct{ *fakeConn }

var errWrite = errors.New("write failed")

func (failingConn) WriteBatch(*sock.Batch, int) (int, error) { return 0, errWrite }

func TestSenderErrors(t *testing.T) {
	t.Run("foreground", func(t *testing.T) {
		c, err := NewSender(failingConn{newFake(t)}, Config{})
		require.NoError(t, err)
		b := sock.NewBatch(4, 0)
		for i, p := range packets(4) {
			b.Msgs[i].Buf = p
		}
		n, err := c.WriteBatch(b, 4)
		require.ErrorIs(t, err, errWrite)
		require.Zero(t, n)
		require.NoError(t, c.Close())
	})
	t.Run("background error latched for Close", func(t *testing.T) {
		c, err := NewSender(failingConn{newFake(t)}, Config{Delay: 5 * time.Millisecond})
		require.NoError(t, err)
		b := sock.NewBatch(2, 0)
		for i, p := range packets(2) {
			b.Msgs[i].Buf = p
		}
		n, err := c.WriteBatch(b, 2)
		require.NoError(t, err, "held datagrams are not written yet")
		require.Equal(t, 2, n)
		require.Eventually(t, func() bool { return c.Stats().SendErrors > 0 }, 2*time.Second, time.Millisecond)
		require.ErrorIs(t, c.Close(), errWrite)
	})
}

func TestSenderConcurrentWriters(t *testing.T) {
	f := newFake(t)
	c, err := NewSender(f, Config{Reorder: 0.1, Duplicate: 0.1, Delay: time.Millisecond, Jitter: time.Millisecond, Seed: 3})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			b := sock.NewBatch(8, 0)
			for i := range 50 {
				for j := range b.Msgs {
					b.Msgs[j].Buf = dataPacket(wire.Seq(g*10000+i*8+j+1), 1)
				}
				if _, err := c.WriteBatch(b, 8); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, c.Close())
	st := c.Stats()
	require.Equal(t, uint64(4*50*8), st.Seen)
	require.Equal(t, st.Seen+st.Duplicated, st.Out)
	require.Len(t, f.sentSnapshot(), int(st.Out))
}

func TestAllocs(t *testing.T) {
	cfg := Config{Loss: 0.05, Duplicate: 0.05, Reorder: 0.1, ReorderWait: time.Minute, Drop: DropSeqs(5, 6), Seed: 1}
	ps := packets(32)
	t.Run("receiver", func(t *testing.T) {
		f := newFake(t)
		c, err := NewReceiver(f, cfg)
		require.NoError(t, err)
		defer c.Close()
		b := sock.NewBatch(32, 2048)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(-time.Second)))
		round := func() {
			f.push(ps...)
			for f.pendingReads() > 0 || c.r.e.pending() > 0 {
				if _, err := c.ReadBatch(b); err != nil && !sock.IsTimeout(err) {
					t.Fatal(err)
				}
			}
		}
		for range 100 {
			round() // warm up: slot buffers
		}
		require.Zero(t, testing.AllocsPerRun(200, round))
		require.Positive(t, c.Stats().Reordered)
	})
	t.Run("sender", func(t *testing.T) {
		f := newFake(t)
		f.discard = true
		c, err := NewSender(f, cfg)
		require.NoError(t, err)
		defer c.Close()
		b := sock.NewBatch(32, 0)
		for i, p := range ps {
			b.Msgs[i].Buf, b.Msgs[i].Addr = p, fakeAddr
		}
		round := func() {
			if _, err := c.WriteBatch(b, 32); err != nil {
				t.Fatal(err)
			}
		}
		for range 100 {
			round()
		}
		require.Zero(t, testing.AllocsPerRun(200, round))
		require.Positive(t, c.Stats().Reordered)
	})
}

func (f *fakeConn) pendingReads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.q) - f.qh
}
