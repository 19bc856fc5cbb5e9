package impair

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// runReceiver pushes n packets through a Receiver over a fake conn, in
// chunks, and returns what came out and the stats.
func runReceiver(t *testing.T, wrap func(sock.PacketConn) sock.PacketConn, n int) ([]wire.Seq, Stats) {
	t.Helper()
	f := newFake(t)
	c := wrap(f).(*Conn)
	defer c.Close()
	var got []wire.Seq
	b := sock.NewBatch(32, 2048)
	pump(t, f, c, packets(n), b, func(k int) {
		for _, m := range b.Msgs[:k] {
			got = append(got, seqOf(t, m.Buf))
		}
	})
	return got, c.Stats()
}

// pump pushes ps into f in chunks of 64 and reads c into b until every
// datagram is through (the tail of held ones included), calling each with
// the count of every batch read.
func pump(t *testing.T, f *fakeConn, c *Conn, ps [][]byte, b *sock.Batch, each func(k int)) {
	t.Helper()
	n := len(ps)
	for i := 0; i < n; i += 64 {
		f.push(ps[i:min(i+64, n)]...)
		// Read until the wrapper has taken the chunk and has nothing
		// ready; what it holds comes out with later chunks or the tail.
		for c.Stats().Seen < uint64(min(i+64, n)) || c.r.e.pending() > 0 {
			require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Millisecond)))
			k, err := c.ReadBatch(b)
			if sock.IsTimeout(err) {
				continue
			}
			require.NoError(t, err)
			each(k)
		}
	}
	// Tail: whatever is held comes out within its bound.
	for c.Stats().Held > 0 || c.r.e.pending() > 0 {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Second)))
		k, err := c.ReadBatch(b)
		require.NoError(t, err)
		each(k)
	}
}

func TestLossRate(t *testing.T) {
	const n = 20000
	for _, p := range []float64{0.01, 0.1, 0.5} {
		t.Run("", func(t *testing.T) {
			got, st := runReceiver(t, Receiver(Config{Loss: p, Seed: 42}), n)
			require.Equal(t, uint64(n), st.Seen)
			// 5 standard deviations of a binomial, at least 0.3%.
			near(t, p, st.Dropped, n, max(0.003, 5*math.Sqrt(p*(1-p)/n)), "loss")
			require.Len(t, missing(got, n), int(st.Dropped))
			require.Equal(t, uint64(len(got)), st.Out)
			require.True(t, slices.IsSorted(got))
		})
	}
}

func TestSameSeedSameDecisions(t *testing.T) {
	const n = 5000
	cfg := Config{Loss: 0.05, Duplicate: 0.05, Reorder: 0.05, ReorderWait: time.Second, Seed: 9, Stream: 3}
	a, sa := runReceiver(t, Receiver(cfg), n)
	b, sb := runReceiver(t, Receiver(cfg), n)
	require.Equal(t, a, b, "same seed: same output, order included")
	require.Equal(t, sa.Dropped, sb.Dropped)
	require.Equal(t, sa.Duplicated, sb.Duplicated)
	require.Equal(t, sa.Reordered, sb.Reordered)

	cfg.Seed = 10
	c, _ := runReceiver(t, Receiver(cfg), n)
	require.NotEqual(t, a, c, "another seed decides differently")

	// Changing one probability does not shift the others' decisions.
	cfg.Seed, cfg.Duplicate, cfg.Reorder = 9, 0, 0
	d, sd := runReceiver(t, Receiver(cfg), n)
	require.Equal(t, sa.Dropped, sd.Dropped)
	require.Equal(t, missing(a, n), missing(d, n))
}

func TestStreamsOfOneWrapperAreIndependent(t *testing.T) {
	const n = 20000
	var conns []*Conn
	wrap := Receiver(Config{Loss: 0.1, Seed: 1, OnWrap: func(c *Conn) { conns = append(conns, c) }})
	a, _ := runReceiver(t, wrap, n)
	b, _ := runReceiver(t, wrap, n)
	require.Len(t, conns, 2)
	ma, mb := missing(a, n), missing(b, n)
	require.NotEqual(t, ma, mb)
	both := 0
	for _, s := range ma {
		if _, ok := slices.BinarySearch(mb, s); ok {
			both++
		}
	}
	// Independent: about p*p of all are lost by both (1%), not p (10%).
	near(t, 0.01, uint64(both), n, 0.004, "lost by both")

	// A fresh Receiver with the same Config repeats stream 0 exactly.
	c, _ := runReceiver(t, Receiver(Config{Loss: 0.1, Seed: 1}), n)
	require.Equal(t, ma, missing(c, n))
}

func TestDuplicates(t *testing.T) {
	const n = 20000
	got, st := runReceiver(t, Receiver(Config{Duplicate: 0.05, Seed: 2}), n)
	near(t, 0.05, st.Duplicated, n, 0.008, "duplicate")
	require.Equal(t, uint64(n)+st.Duplicated, st.Out)
	require.Len(t, got, int(st.Out))
	count := make([]int, n+1)
	twice := 0
	for _, s := range got {
		count[s]++
		if count[s] == 2 {
			twice++
		}
	}
	require.Equal(t, int(st.Duplicated), twice)
	require.Empty(t, missing(got, n))
	require.True(t, slices.IsSorted(got), "duplicates follow their original")
}

func TestReorderDeliversEverything(t *testing.T) {
	const n = 20000
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"reorder", Config{Reorder: 0.05, Seed: 3}},
		{"reorder depth 10 with duplicates", Config{Reorder: 0.2, ReorderDepth: 10, Duplicate: 0.1, Seed: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, st := runReceiver(t, Receiver(tc.cfg), n)
			require.Empty(t, missing(got, n), "nothing lost when Loss is 0")
			require.Equal(t, uint64(n)+st.Duplicated, uint64(len(got)))
			near(t, tc.cfg.Reorder, st.Reordered, n+int(st.Duplicated), 0.01, "reorder")
			// A datagram is late when a higher sequence came before it.
			late, hi := 0, wire.Seq(0)
			for _, s := range got {
				if s < hi {
					late++
				}
				hi = max(hi, s)
			}
			require.Positive(t, late)
			require.LessOrEqual(t, late, int(st.Reordered+st.Duplicated))
			// Depth bounds the displacement when nothing forced a release.
			if tc.cfg.Duplicate == 0 && st.Forced == 0 {
				for i, s := range got {
					require.LessOrEqual(t, i-int(s)+1, 2*(tc.cfg.ReorderDepth+DefaultReorderDepth),
						"datagram %d delivered at %d", s, i)
				}
			}
		})
	}
}

func TestDelayAndJitter(t *testing.T) {
	f := newFake(t)
	const delay, jitter = 30 * time.Millisecond, 20 * time.Millisecond
	c, err := NewReceiver(f, Config{Delay: delay, Jitter: jitter, Seed: 5})
	require.NoError(t, err)
	defer c.Close()
	const n = 200
	start := time.Now()
	f.push(packets(n)...)
	b := sock.NewBatch(16, 2048)
	var got []wire.Seq
	var first, last time.Duration
	for len(got) < n {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(2*time.Second)))
		k, err := c.ReadBatch(b)
		require.NoError(t, err)
		if len(got) == 0 {
			first = time.Since(start)
		}
		for _, m := range b.Msgs[:k] {
			got = append(got, seqOf(t, m.Buf))
		}
	}
	last = time.Since(start)
	require.GreaterOrEqual(t, first, delay)
	require.Less(t, last, delay+jitter+time.Second, "released within the bound")
	require.Empty(t, missing(got, n))
	require.False(t, slices.IsSorted(got), "jitter of 20ms over datagrams that came at once reorders them")
	st := c.Stats()
	require.Equal(t, uint64(n), st.Delayed)
	require.Zero(t, st.Held)
}

func TestOnlyData(t *testing.T) {
	hb := wire.AppendHeartbeat(nil, testSession, 11)
	eos := wire.AppendEndOfSession(nil, testSession, 11)
	req := wire.AppendRequest(nil, wire.Request{Session: testSession, Seq: 1, Count: 1})
	t.Run("exempt pass with Loss 1", func(t *testing.T) {
		f := newFake(t)
		c, err := NewReceiver(f, Config{Loss: 1, OnlyData: true})
		require.NoError(t, err)
		defer c.Close()
		f.push(append(packets(5), hb, eos, req)...)
		b := sock.NewBatch(16, 2048)
		n, err := c.ReadBatch(b)
		require.NoError(t, err)
		require.Equal(t, 3, n)
		require.Equal(t, hb, b.Msgs[0].Buf)
		require.Equal(t, eos, b.Msgs[1].Buf)
		require.Equal(t, req, b.Msgs[2].Buf)
		st := c.Stats()
		require.Equal(t, uint64(3), st.Exempt)
		require.Equal(t, uint64(5), st.Dropped)
	})
	t.Run("heartbeats consume no draws", func(t *testing.T) {
		cfg := Config{Loss: 0.3, OnlyData: true, Seed: 6}
		plain, _ := runReceiver(t, Receiver(cfg), 500)
		f := newFake(t)
		c, err := NewReceiver(f, cfg)
		require.NoError(t, err)
		defer c.Close()
		for i, p := range packets(500) {
			f.push(p)
			if i%7 == 0 {
				f.push(hb)
			}
		}
		var got []wire.Seq
		b := sock.NewBatch(16, 2048)
		for c.Stats().Seen < 500+72 {
			n, err := c.ReadBatch(b)
			require.NoError(t, err)
			for _, m := range b.Msgs[:n] {
				if h, _ := wire.ParseHeader(m.Buf); !h.IsHeartbeat() {
					got = append(got, h.Seq)
				}
			}
		}
		require.Equal(t, plain, got)
	})
	t.Run("without OnlyData heartbeats are impaired", func(t *testing.T) {
		f := newFake(t)
		c, err := NewReceiver(f, Config{Loss: 1})
		require.NoError(t, err)
		defer c.Close()
		f.push(hb, eos)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
		_, err = c.ReadBatch(sock.NewBatch(4, 2048))
		require.True(t, sock.IsTimeout(err))
		require.Equal(t, uint64(2), c.Stats().Dropped)
	})
}

func TestForcedReleaseWhenFull(t *testing.T) {
	f := newFake(t)
	c, err := NewReceiver(f, Config{Reorder: 1, ReorderDepth: 100, ReorderWait: 50 * time.Millisecond, MaxHeld: 4})
	require.NoError(t, err)
	defer c.Close()
	f.push(packets(20)...)
	got := readAll(t, c, 21, 200*time.Millisecond)
	require.Equal(t, seqs(1, 20), got, "the held one due soonest (the oldest) goes first; %+v held %d pending %d", c.Stats(), c.r.e.held(), c.r.e.pending())
	st := c.Stats()
	require.Equal(t, uint64(16), st.Forced)
	require.Equal(t, uint64(20), st.Reordered)
	require.Zero(t, st.Held)
	require.Len(t, c.r.e.slots, 4+2*16, "slots: MaxHeld plus two per datagram of a batch")
}

func TestTruncatedIntoSmallBuffers(t *testing.T) {
	f := newFake(t)
	c, err := NewReceiver(f, Config{Reorder: 1, ReorderWait: time.Millisecond})
	require.NoError(t, err)
	defer c.Close()
	p := dataPacket(1, 10)
	f.push(p)
	b := sock.NewBatch(2, 30)
	n, err := c.ReadBatch(b)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.True(t, b.Msgs[0].Truncated)
	require.Equal(t, p[:30], b.Msgs[0].Buf)
	require.Equal(t, fakeAddr, b.Msgs[0].Addr)
}
