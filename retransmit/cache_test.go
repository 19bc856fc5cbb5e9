package retransmit

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

func mustSession(t testing.TB, s string) wire.Session {
	t.Helper()
	sess, err := wire.ParseSession(s)
	require.NoError(t, err)
	return sess
}

// testMsg is the deterministic content of message seq: 1 to size bytes.
func testMsg(seq wire.Seq, size int) []byte {
	n := 1 + int(uint64(seq)*7919%uint64(size))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(uint64(seq) + uint64(i)*31)
	}
	return b
}

// fill adds messages [from, to) of session s, of up to size bytes.
func fill(c *Cache, s wire.Session, from, to wire.Seq, size int) {
	for q := from; q < to; q++ {
		c.Add(s, q, testMsg(q, size))
	}
}

// checkRange asserts that exactly [first, next) of s is cached with the
// testMsg contents, after the ranges held before it, given as pairs of
// first and next.
func checkRange(t *testing.T, c *Cache, s wire.Session, first, next wire.Seq, size int, before ...wire.Seq) {
	t.Helper()
	f, n, ok := c.Bounds(s)
	require.True(t, ok)
	if len(before) > 0 {
		require.Equal(t, before[0], f, "first")
		for i := 0; i < len(before); i += 2 {
			for q := before[i]; q < before[i+1]; q++ {
				got, ok := c.AppendMessage(nil, s, q)
				require.True(t, ok, "seq %d", q)
				require.Equal(t, testMsg(q, size), got, "seq %d", q)
			}
		}
		_, ok = c.AppendMessage(nil, s, before[len(before)-1])
		require.False(t, ok)
	} else {
		require.Equal(t, first, f, "first")
	}
	require.Equal(t, next, n, "next")
	for q := first; q < next; q++ {
		got, ok := c.AppendMessage(nil, s, q)
		require.True(t, ok, "seq %d", q)
		require.Equal(t, testMsg(q, size), got, "seq %d", q)
	}
	_, ok = c.AppendMessage(nil, s, first-1)
	require.False(t, ok)
	_, ok = c.AppendMessage(nil, s, next)
	require.False(t, ok)
}

func TestCacheBasics(t *testing.T) {
	s := mustSession(t, "BASIC")
	c := NewCache(CacheConfig{})
	_, _, ok := c.Bounds(s)
	require.False(t, ok, "unknown session")
	fill(c, s, 1, 101, 300)
	checkRange(t, c, s, 1, 101, 300)
	_, ok = c.AppendMessage(nil, mustSession(t, "OTHER"), 5)
	require.False(t, ok)
	st := c.Stats()
	require.EqualValues(t, 100, st.Messages)
	require.EqualValues(t, 100, st.Added)
	require.Equal(t, 1, st.Sessions)
}

func TestCacheWrap(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       CacheConfig
		n         wire.Seq
		size      int
		wantFirst wire.Seq // 0: check only the byte bound
	}{
		{"by-count", CacheConfig{MaxMessages: 100}, 1000, 50, 901},
		{"by-count-pow2", CacheConfig{MaxMessages: 1024}, 5000, 20, 5000 - 1024 + 1},
		{"by-bytes-small", CacheConfig{MaxBytes: MinCacheBytes}, 3000, 1000, 0},
		{"by-bytes-large-messages", CacheConfig{MaxBytes: MinCacheBytes}, 300, math.MaxUint16, 0},
		{"by-bytes-after-growth", CacheConfig{MaxBytes: 1 << 20}, 10000, 1500, 0},
		{"by-both", CacheConfig{MaxMessages: 500, MaxBytes: 100 << 10}, 5000, 400, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSession(t, "WRAP")
			c := NewCache(tc.cfg)
			fill(c, s, 1, tc.n+1, tc.size)
			first, next, ok := c.Bounds(s)
			require.True(t, ok)
			require.Equal(t, tc.n+1, next)
			if tc.wantFirst != 0 {
				require.Equal(t, tc.wantFirst, first)
			}
			st := c.Stats()
			cfg := tc.cfg.withDefaults()
			require.LessOrEqual(t, st.Messages, uint64(cfg.MaxMessages))
			require.LessOrEqual(t, st.Bytes, uint64(cfg.MaxBytes))
			require.LessOrEqual(t, st.ArenaBytes, uint64(cfg.MaxBytes))
			require.Equal(t, uint64(next-first), st.Messages)
			require.Equal(t, st.Added, st.Messages+st.Evicted)
			// The byte bound is tight: one more message of the largest
			// size would not have fitted beside the oldest.
			var held uint64
			for q := first; q < next; q++ {
				held += uint64(len(testMsg(q, tc.size)))
			}
			require.LessOrEqual(t, held, st.Bytes)
			if tc.wantFirst == 0 && tc.size < 1000 && st.Messages < uint64(cfg.MaxMessages) {
				require.Greater(t, st.Bytes+uint64(2*tc.size), uint64(cfg.MaxBytes), "evicted too early")
			}
			checkRange(t, c, s, first, next, tc.size)
		})
	}
}

func TestCacheContiguity(t *testing.T) {
	s := mustSession(t, "CONTIG")
	c := NewCache(CacheConfig{})
	fill(c, s, 10, 20, 100) // a session may start anywhere
	checkRange(t, c, s, 10, 20, 100)

	t.Run("duplicate-ignored", func(t *testing.T) {
		c.Add(s, 15, []byte("other bytes"))
		c.Add(s, 5, []byte("older"))
		checkRange(t, c, s, 10, 20, 100)
		require.EqualValues(t, 2, c.Stats().Duplicates)
	})
	t.Run("jump-keeps-history", func(t *testing.T) {
		fill(c, s, 30, 35, 100)
		checkRange(t, c, s, 30, 35, 100, 10, 20)
		require.EqualValues(t, 1, c.Stats().Jumps)
		c.Add(s, 20, []byte("late")) // fills nothing: older than next
		checkRange(t, c, s, 30, 35, 100, 10, 20)
	})
	t.Run("bad-messages", func(t *testing.T) {
		before := c.Stats().BadMessages
		c.Add(s, 0, []byte("zero"))
		c.Add(s, math.MaxUint64, []byte("max"))
		c.Add(s, 35, make([]byte, math.MaxUint16+1))
		checkRange(t, c, s, 30, 35, 100, 10, 20)
		require.Equal(t, before+3, c.Stats().BadMessages)
	})
	t.Run("empty-message", func(t *testing.T) {
		c.Add(s, 35, nil)
		got, ok := c.AppendMessage([]byte{}, s, 35)
		require.True(t, ok)
		require.Empty(t, got)
	})
	t.Run("dead-entries-reclaimed", func(t *testing.T) {
		c := NewCache(CacheConfig{MaxMessages: 10})
		fill(c, s, 1, 8, 10)
		c.Restart(s, 0) // 1..7 are dead
		fill(c, s, 100, 108, 10)
		checkRange(t, c, s, 100, 108, 10)
		fill(c, s, 108, 115, 10)
		checkRange(t, c, s, 105, 115, 10)
		require.EqualValues(t, 10, c.Stats().Messages)
	})
}

func TestCacheSessions(t *testing.T) {
	a, b, x := mustSession(t, "A"), mustSession(t, "B"), mustSession(t, "C")
	t.Run("lru-eviction", func(t *testing.T) {
		c := NewCache(CacheConfig{MaxSessions: 2})
		fill(c, a, 1, 11, 50)
		fill(c, b, 1, 11, 50)
		fill(c, a, 11, 21, 50) // a is now the most recently written
		fill(c, x, 1, 6, 50)   // evicts b
		_, _, ok := c.Bounds(b)
		require.False(t, ok)
		checkRange(t, c, a, 1, 21, 50)
		checkRange(t, c, x, 1, 6, 50)
		st := c.Stats()
		require.EqualValues(t, 1, st.SessionsEvicted)
		require.Equal(t, 2, st.Sessions)
		// b comes back as a new session.
		fill(c, b, 50, 52, 50)
		checkRange(t, c, b, 50, 52, 50)
		_, _, ok = c.Bounds(a)
		require.False(t, ok, "a was least recently written")
	})
	t.Run("fifo-across-sessions", func(t *testing.T) {
		c := NewCache(CacheConfig{MaxMessages: 100})
		fill(c, a, 1, 61, 50)
		fill(c, b, 1, 61, 50)
		checkRange(t, c, a, 21, 61, 50)
		checkRange(t, c, b, 1, 61, 50)
		fill(c, b, 61, 141, 50) // a is emptied; stays known with first == next
		first, next, ok := c.Bounds(a)
		require.True(t, ok)
		require.Equal(t, first, next)
		checkRange(t, c, b, 41, 141, 50)
		fill(c, a, 61, 71, 50)
		checkRange(t, c, a, 61, 71, 50)
	})
	t.Run("interleaved", func(t *testing.T) {
		c := NewCache(CacheConfig{MaxMessages: 1000, MaxBytes: MinCacheBytes})
		for q := wire.Seq(1); q <= 5000; q++ {
			c.Add(a, q, testMsg(q, 60))
			c.Add(b, q, testMsg(q, 60))
		}
		fa, na, _ := c.Bounds(a)
		fb, nb, _ := c.Bounds(b)
		require.Equal(t, wire.Seq(5001), na)
		require.Equal(t, wire.Seq(5001), nb)
		require.InDelta(t, float64(fa), float64(fb), 1)
		checkRange(t, c, a, fa, na, 60)
		checkRange(t, c, b, fb, nb, 60)
	})
}

// TestCacheRandomized drives a cache with random sessions, jumps,
// duplicates and sizes, and checks its invariants against a model of what
// was added.
func TestCacheRandomized(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			cfg := CacheConfig{MaxMessages: 50 + rng.IntN(500), MaxBytes: MinCacheBytes + rng.IntN(1<<17), MaxSessions: 1 + rng.IntN(4)}
			c := NewCache(cfg)
			cfg = cfg.withDefaults()
			sessions := []wire.Session{mustSession(t, "R0"), mustSession(t, "R1"), mustSession(t, "R2"), mustSession(t, "R3"), mustSession(t, "R4")}
			next := map[wire.Session]wire.Seq{}
			size := map[wire.Session]int{}
			for _, s := range sessions {
				size[s] = 1 + rng.IntN(3000)
			}
			for range 10000 {
				s := sessions[rng.IntN(len(sessions))]
				q := next[s]
				switch r := rng.IntN(100); {
				case q == 0 || r < 2: // new run
					q = wire.Seq(1 + rng.IntN(1e6))
					if q <= next[s] {
						q = next[s] + 1
					}
				case r < 5:
					if q > 1 {
						c.Add(s, q-1-wire.Seq(rng.IntN(int(q-1))), []byte("dup"))
					}
					continue
				}
				c.Add(s, q, testMsg(q, size[s]))
				next[s] = q + 1
				// The newest message is always there; a jump keeps what
				// came before it.
				first, n, ok := c.Bounds(s)
				require.True(t, ok)
				require.Equal(t, q+1, n)
				require.Less(t, first, n)
				got, ok := c.AppendMessage(nil, s, q)
				require.True(t, ok)
				require.Equal(t, testMsg(q, size[s]), got)
				st := c.Stats()
				require.LessOrEqual(t, st.Messages, uint64(cfg.MaxMessages))
				require.LessOrEqual(t, st.Bytes, uint64(cfg.MaxBytes))
				require.LessOrEqual(t, st.Sessions, cfg.MaxSessions)
			}
			// Whatever is held is what was added, and the newest
			// messages since the last jump are held.
			for _, s := range sessions {
				first, n, ok := c.Bounds(s)
				if !ok {
					continue
				}
				held := 0
				for q, ok := c.NextHeld(s, first); ok; q, ok = c.NextHeld(s, q+1) {
					require.Less(t, q, n)
					got, ok := c.AppendMessage(nil, s, q)
					require.True(t, ok)
					require.Equal(t, testMsg(q, size[s]), got, "seq %d", q)
					held++
				}
				require.NotZero(t, held)
				require.GreaterOrEqual(t, n-first, wire.Seq(held))
			}
		})
	}
}

func TestCacheSentPacket(t *testing.T) {
	s := mustSession(t, "SENT")
	c := NewCache(CacheConfig{})
	var enc wire.Encoder
	seq := wire.Seq(1)
	for range 50 {
		enc.Reset(nil, s, seq, wire.DefaultPayloadSizeIPv4)
		for enc.Add(testMsg(seq+wire.Seq(enc.Count()), 200)) == nil {
		}
		seq += wire.Seq(enc.Count())
		c.SentPacket(enc.Bytes())
	}
	c.SentPacket(wire.AppendHeartbeat(nil, s, seq+100))
	c.SentPacket(wire.AppendEndOfSession(nil, s, seq))
	c.SentPacket([]byte("garbage"))
	c.SentPacket(nil)
	checkRange(t, c, s, 1, seq, 200)
	require.EqualValues(t, 2, c.Stats().BadPackets)
	require.Zero(t, c.Stats().Jumps, "heartbeats do not jump")
	require.Zero(t, c.Stats().Incarnations)
}

func TestCacheAppendPackets(t *testing.T) {
	s := mustSession(t, "PKTS")
	c := NewCache(CacheConfig{})
	fill(c, s, 1, 1001, 300)
	for _, tc := range []struct {
		name                 string
		from                 wire.Seq
		count, payload, bufs int
		wantMsgs             int
	}{
		{"all", 1, 1000, wire.DefaultPayloadSizeIPv4, 1000, 1000},
		{"middle", 500, 10, wire.DefaultPayloadSizeIPv6, 100, 10},
		{"past-end", 990, 100, wire.DefaultPayloadSizeIPv4, 100, 11},
		{"few-buffers", 1, 1000, wire.DefaultPayloadSizeIPv4, 3, -1},
		{"jumbo", 1, 1000, 9000, 1000, 1000},
		{"one-message-packets", 1, 20, wire.MinPayloadSize + 300, 100, 20},
		{"not-cached", 1001, 5, wire.DefaultPayloadSizeIPv4, 10, 0},
		{"zero-count", 5, 0, wire.DefaultPayloadSizeIPv4, 10, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pkts := make([][]byte, tc.bufs)
			for i := range pkts {
				pkts[i] = make([]byte, 0, tc.payload)
			}
			np, nm, err := c.AppendPackets(pkts, s, tc.from, tc.count, tc.payload)
			require.NoError(t, err)
			if tc.wantMsgs >= 0 {
				require.Equal(t, tc.wantMsgs, nm)
			} else {
				require.Equal(t, tc.bufs, np)
			}
			q := tc.from
			for _, p := range pkts[:np] {
				require.LessOrEqual(t, len(p), tc.payload)
				pkt, err := wire.ParsePacket(p)
				require.NoError(t, err)
				require.Equal(t, s, pkt.Session)
				require.Equal(t, q, pkt.Seq)
				for it := pkt.Messages(); ; {
					msg, seq, ok := it.Next()
					if !ok {
						break
					}
					require.Equal(t, testMsg(seq, 300), msg)
					q++
				}
			}
			require.Equal(t, nm, int(q-tc.from))
		})
	}
	t.Run("too-large", func(t *testing.T) {
		c := NewCache(CacheConfig{})
		c.Add(s, 1, make([]byte, 2000))
		out, n, err := c.AppendPacket([]byte("keep"), s, 1, 1, wire.DefaultPayloadSizeIPv4)
		require.ErrorIs(t, err, wire.ErrMessageTooLarge)
		require.Zero(t, n)
		require.Equal(t, []byte("keep"), out)
	})
}

// BenchmarkCacheLookup shows that lookup by sequence does not grow with the
// cache (O(1): a ring index, then the log): compare the ns/op of the two
// sizes. Timing belongs in benchmarks, not in unit tests.
func BenchmarkCacheLookup(b *testing.B) {
	s := wire.Session{'O', '1', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '}
	for _, n := range []int{1 << 10, 1 << 18} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			c := NewCache(CacheConfig{MaxMessages: n})
			msg := make([]byte, 32)
			for q := wire.Seq(1); q <= wire.Seq(n); q++ {
				c.Add(s, q, msg)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			seqs := make([]wire.Seq, 4096)
			for i := range seqs {
				seqs[i] = wire.Seq(1 + rng.IntN(n))
			}
			buf := make([]byte, 0, 64)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				buf, _ = c.AppendMessage(buf[:0], s, seqs[i%len(seqs)])
				i++
			}
		})
	}
}

func TestCacheConcurrent(t *testing.T) {
	s := mustSession(t, "RACE")
	c := NewCache(CacheConfig{MaxMessages: 2000, MaxBytes: MinCacheBytes})
	const total = 30000
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() { // the publisher
		defer close(done)
		var enc wire.Encoder
		buf := make([]byte, 0, wire.DefaultPayloadSizeIPv4)
		for q := wire.Seq(1); q <= total; {
			enc.Reset(buf[:0], s, q, wire.DefaultPayloadSizeIPv4)
			for q+wire.Seq(enc.Count()) <= total && enc.Add(testMsg(q+wire.Seq(enc.Count()), 120)) == nil {
			}
			q += wire.Seq(enc.Count())
			c.SentPacket(enc.Bytes())
		}
	})
	errs := make(chan error, 4)
	for r := range 3 {
		wg.Go(func() { // servers reading packets while the cache moves
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			pkts := make([][]byte, 8)
			for i := range pkts {
				pkts[i] = make([]byte, 0, wire.DefaultPayloadSizeIPv4)
			}
			for reads := 0; ; reads++ {
				select {
				case <-done:
					return
				default:
				}
				first, next, ok := c.Bounds(s)
				if !ok || first == next {
					continue
				}
				from := first + wire.Seq(rng.IntN(int(next-first)))
				np, _, err := c.AppendPackets(pkts, s, from, 200, wire.DefaultPayloadSizeIPv4)
				if err != nil {
					errs <- err
					return
				}
				for _, p := range pkts[:np] {
					pkt, err := wire.ParsePacket(p)
					if err != nil {
						errs <- err
						return
					}
					for it := pkt.Messages(); ; {
						msg, seq, ok := it.Next()
						if !ok {
							break
						}
						if !bytes.Equal(msg, testMsg(seq, 120)) {
							errs <- fmt.Errorf("seq %d: torn or wrong message", seq)
							return
						}
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	first, next, _ := c.Bounds(s)
	require.Equal(t, wire.Seq(total+1), next)
	checkRange(t, c, s, first, next, 120)
}

// packets returns n ready packets of session s carrying consecutive
// messages of msgLen bytes from sequence 1.
func testPackets(s wire.Session, n, msgLen int) ([][]byte, wire.Seq) {
	var enc wire.Encoder
	msg := make([]byte, msgLen)
	pkts := make([][]byte, n)
	q := wire.Seq(1)
	for i := range pkts {
		enc.Reset(nil, s, q, wire.DefaultPayloadSizeIPv4)
		for enc.Add(msg) == nil {
		}
		pkts[i] = enc.Bytes()
		q += wire.Seq(enc.Count())
	}
	return pkts, q
}

// rebase rewrites the sequence of pkt to seq.
func rebase(pkt []byte, seq wire.Seq) {
	h, _ := wire.ParseHeader(pkt)
	h.Seq = seq
	wire.AppendHeader(pkt[:0], h)
}

func TestCacheZeroAlloc(t *testing.T) {
	s := mustSession(t, "ALLOC")
	c := NewCache(CacheConfig{MaxMessages: 4096, MaxBytes: 1 << 20})
	pkts, _ := testPackets(s, 1, 100)
	pkt := pkts[0]
	per := wire.Seq(binaryCount(pkt))
	next := wire.Seq(1)
	send := func() {
		rebase(pkt, next)
		c.SentPacket(pkt)
		next += per
	}
	for range 10000 { // reach the working size: arena, log and index grown
		send()
	}
	t.Run("SentPacket", func(t *testing.T) {
		require.Zero(t, testing.AllocsPerRun(1000, send))
	})
	t.Run("Add", func(t *testing.T) {
		msg := make([]byte, 100)
		require.Zero(t, testing.AllocsPerRun(1000, func() {
			c.Add(s, next, msg)
			next++
		}))
	})
	t.Run("AppendPacket", func(t *testing.T) {
		buf := make([]byte, 0, wire.DefaultPayloadSizeIPv4)
		require.Zero(t, testing.AllocsPerRun(1000, func() {
			_, n, err := c.AppendPacket(buf, s, next-50, 50, wire.DefaultPayloadSizeIPv4)
			if err != nil || n == 0 {
				t.Fatal(n, err)
			}
		}))
	})
	t.Run("AppendPackets", func(t *testing.T) {
		bufs := make([][]byte, 8)
		for i := range bufs {
			bufs[i] = make([]byte, 0, wire.DefaultPayloadSizeIPv4)
		}
		require.Zero(t, testing.AllocsPerRun(1000, func() {
			_, n, err := c.AppendPackets(bufs, s, next-100, 100, wire.DefaultPayloadSizeIPv4)
			if err != nil || n != 100 {
				t.Fatal(n, err)
			}
		}))
	})
	t.Run("AppendMessage", func(t *testing.T) {
		buf := make([]byte, 0, 200)
		require.Zero(t, testing.AllocsPerRun(1000, func() {
			if _, ok := c.AppendMessage(buf, s, next-1); !ok {
				t.Fatal("missing")
			}
		}))
	})
}

func binaryCount(pkt []byte) int {
	h, _ := wire.ParseHeader(pkt)
	return h.MessageCount()
}

// BenchmarkCacheSentPacket stores packets of one size of message in a full
// cache, as bytes (SentPacket, validated) and as this module's publisher
// hands them over (SentValidPacket, the walk over the messages skipped).
func BenchmarkCacheSentPacket(b *testing.B) {
	for _, msgLen := range []int{32, 100, 1000} {
		for _, valid := range []bool{false, true} {
			name := fmt.Sprint("msg-", msgLen)
			if valid {
				name += "/valid"
			}
			b.Run(name, func(b *testing.B) {
				s := mustSession(b, "BENCH")
				c := NewCache(CacheConfig{MaxMessages: 1 << 16, MaxBytes: 16 << 20})
				pkts, _ := testPackets(s, 1, msgLen)
				pkt := pkts[0]
				per := wire.Seq(binaryCount(pkt))
				next := wire.Seq(1)
				sent := c.SentPacket
				if valid {
					sent = func(pkt []byte) { sentValid(c, pkt) }
				}
				for i := 0; i < 1<<20 && c.Stats().Evicted == 0; i++ { // steady state: full, wrapping
					rebase(pkt, next)
					sent(pkt)
					next += per
				}
				b.SetBytes(int64(len(pkt)))
				b.ReportAllocs()
				for b.Loop() {
					rebase(pkt, next)
					sent(pkt)
					next += per
				}
			})
		}
	}
}

func BenchmarkCacheAdd(b *testing.B) {
	s := mustSession(b, "BENCH")
	c := NewCache(CacheConfig{MaxMessages: 1 << 16, MaxBytes: 16 << 20})
	msg := make([]byte, 100)
	next := wire.Seq(1)
	for ; next < 1<<20 && c.Stats().Evicted == 0; next++ { // steady state: full, wrapping
		c.Add(s, next, msg)
	}
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		c.Add(s, next, msg)
		next++
	}
}

func BenchmarkCacheAppendPacket(b *testing.B) {
	for _, msgLen := range []int{32, 100, 1000} {
		b.Run(fmt.Sprint("msg-", msgLen), func(b *testing.B) {
			s := mustSession(b, "BENCH")
			c := NewCache(CacheConfig{MaxMessages: 1 << 16, MaxBytes: 64 << 20})
			msg := make([]byte, msgLen)
			const n = 1 << 16
			for q := wire.Seq(1); q <= n; q++ {
				c.Add(s, q, msg)
			}
			buf := make([]byte, 0, wire.DefaultPayloadSizeIPv4)
			rng := rand.New(rand.NewPCG(1, 1))
			var pkt []byte
			pkt, _, _ = c.AppendPacket(buf, s, 1, n, wire.DefaultPayloadSizeIPv4)
			b.SetBytes(int64(len(pkt)))
			b.ReportAllocs()
			for b.Loop() {
				from := wire.Seq(1 + rng.IntN(n-100))
				if _, k, _ := c.AppendPacket(buf, s, from, n, wire.DefaultPayloadSizeIPv4); k == 0 {
					b.Fatal("empty")
				}
			}
		})
	}
}
