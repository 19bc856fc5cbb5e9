package retransmit

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// jumboPayload is the UDP payload of a 9000-byte MTU over IPv4.
const jumboPayload = 9000 - 20 - 8

// fullPacket returns a packet of session s from sequence 1 with as many
// msgLen-byte messages as fit in payloadSize bytes, and their count.
func fullPacket(s wire.Session, msgLen, payloadSize int) ([]byte, wire.Seq) {
	var enc wire.Encoder
	enc.Reset(nil, s, 1, payloadSize)
	msg := make([]byte, msgLen)
	for enc.Add(msg) == nil {
	}
	return enc.Bytes(), wire.Seq(enc.Count())
}

// BenchmarkCacheFill fills a default cache (1<<20 messages, 256 MiB) with
// 64-byte messages in jumbo packets, from empty to half again beyond its
// message bound, as a publisher's sending goroutine does. One op is one
// whole fill. max-ns/pkt is the slowest single SentPacket seen, the stall
// the publisher would suffer, and p99.9-ns/pkt the median over the fills
// of their 99.9th percentile (both include what the machine and the GC
// add).
func BenchmarkCacheFill(b *testing.B) {
	s := mustSession(b, "FILL")
	pkt, per := fullPacket(s, 64, jumboPayload)
	npkts := int((DefaultMaxMessages*3/2)/per) + 1
	b.SetBytes(int64(npkts * len(pkt)))
	b.ReportAllocs()
	var worst time.Duration
	var p999 []time.Duration
	took := make([]time.Duration, npkts)
	for b.Loop() {
		c := NewCache(CacheConfig{})
		next := wire.Seq(1)
		for i := range npkts {
			rebase(pkt, next)
			t0 := monotime.Now()
			c.SentPacket(pkt)
			took[i] = monotime.Since(t0)
			next += per
		}
		b.StopTimer()
		if c.Stats().Evicted == 0 {
			b.Fatal("the cache did not reach its bound")
		}
		slices.Sort(took)
		worst = max(worst, took[npkts-1])
		p999 = append(p999, took[npkts-npkts/1000-1])
		b.StartTimer()
	}
	b.ReportMetric(float64(worst.Nanoseconds()), "max-ns/pkt")
	if len(p999) > 0 {
		slices.Sort(p999)
		b.ReportMetric(float64(p999[len(p999)/2].Nanoseconds()), "p99.9-ns/pkt")
	}
}

// growMsg is the content of message seq of session number k, n bytes.
func growMsg(dst []byte, k int, seq wire.Seq, n int) []byte {
	for i := range n {
		dst = append(dst, byte(uint64(seq)*131+uint64(i)*7+uint64(k)*17))
	}
	return dst
}

// checkHeld checks a cache of two growMsg sessions against a model: each
// session's Bounds are [first[k], next[k]) (none before its first
// message), and message q of session k is held, byte for byte, exactly
// when it is at or after first[k] and size(k, q) (its length) is not
// negative.
func checkHeld(t *testing.T, c *Cache, sessions []wire.Session, first, next []wire.Seq, size func(k int, q wire.Seq) int) {
	t.Helper()
	var got, want []byte
	for k, s := range sessions {
		f, nx, ok := c.Bounds(s)
		if next[k] == 1 {
			require.False(t, ok, "session %d not written yet", k)
			continue
		}
		require.True(t, ok)
		require.Equal(t, first[k], f, "first of %d", k)
		require.Equal(t, next[k], nx, "next of %d", k)
		for q := wire.Seq(1); q < next[k]; q++ {
			got, ok = c.AppendMessage(got[:0], s, q)
			n := size(k, q)
			if q < first[k] || n < 0 {
				require.False(t, ok, "session %d seq %d is not held (evicted or in a hole)", k, q)
				continue
			}
			require.True(t, ok, "session %d seq %d", k, q)
			want = growMsg(want[:0], k, q, n)
			if !bytes.Equal(want, got) {
				t.Fatalf("session %d seq %d: %d bytes differ from the %d added", k, q, len(got), len(want))
			}
		}
	}
}

// TestCacheGrowRandom fills caches across many chunk, log block and index
// block boundaries, wraps and evictions, with two interleaved sessions and
// seeded random message sizes of 1 to 1000 bytes. Against a model of the
// FIFO it checks, as it goes, that exactly the newest messages are held,
// byte for byte, the evicted ones are gone, the bounds hold, and the
// storage grows by at most one chunk per message, lazily.
func TestCacheGrowRandom(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   CacheConfig
		n     int  // messages added
		jumps bool // sequence jumps now and then (holes)
	}{
		// Bound by bytes: chunks of 64K, 64K, 128K ... 1M, 1M and a
		// 100 KiB remainder, then several laps of the fixed ring.
		{"bytes-multi-chunk", CacheConfig{MaxBytes: 3<<20 + 100<<10}, 40000, false},
		// Bound by count: a few chunks are reused, far below MaxBytes.
		{"count", CacheConfig{MaxMessages: 3000}, 40000, false},
		{"both", CacheConfig{MaxMessages: 6000, MaxBytes: 2 << 20}, 40000, false},
		{"small", CacheConfig{MaxMessages: 700, MaxBytes: MinCacheBytes}, 10000, false},
		{"bytes-holes", CacheConfig{MaxBytes: 2<<20 + 500<<10}, 30000, true},
		{"count-holes", CacheConfig{MaxMessages: 2500}, 30000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(42, uint64(len(tc.name))))
			cfg := tc.cfg.withDefaults()
			c := NewCache(tc.cfg)
			sessions := []wire.Session{mustSession(t, "GROW0"), mustSession(t, "GROW1")}
			type added struct {
				k   int
				seq wire.Seq
			}
			var fifo []added           // every message added, in order
			sizes := [][]int{{0}, {0}} // sizes[k][seq]
			next := []wire.Seq{1, 1}
			check := func() {
				st := c.Stats()
				live := fifo[len(fifo)-int(st.Messages):]
				first := []wire.Seq{next[0], next[1]}
				for i := len(live) - 1; i >= 0; i-- {
					first[live[i].k] = live[i].seq // holes keep what came before them
				}
				checkHeld(t, c, sessions, first, next, func(k int, q wire.Seq) int {
					if sizes[k][q] == 0 {
						return -1 // a hole
					}
					return sizes[k][q]
				})
			}
			var buf []byte
			var prev CacheStats
			var held, evicted uint64 // the model's held bytes and evicted count
			for i := range tc.n {
				k := rng.IntN(2)
				n := 1 + rng.IntN(1000)
				if tc.jumps && next[k] > 1 && rng.IntN(200) == 0 {
					jump := 1 + rng.IntN(3000)
					for range jump {
						sizes[k] = append(sizes[k], 0)
					}
					next[k] += wire.Seq(jump)
				}
				buf = growMsg(buf[:0], k, next[k], n)
				c.Add(sessions[k], next[k], buf)
				sizes[k] = append(sizes[k], n)
				fifo = append(fifo, added{k, next[k]})
				next[k]++

				held += uint64(n) + wire.MsgLenLen // each message is stored as a message block
				st := c.Stats()
				for ; evicted < st.Evicted; evicted++ { // the model's FIFO
					held -= uint64(sizes[fifo[evicted].k][fifo[evicted].seq]) + wire.MsgLenLen
				}
				// Bytes is the held message blocks plus the tails skipped
				// at the chunk boundaries among them (less than a block,
				// 1,002 bytes, each, at most one per chunk of the ring
				// and one more).
				slack := uint64(len(c.chunks)+1) * 1001
				require.GreaterOrEqual(t, st.Bytes, held)
				require.LessOrEqual(t, st.Bytes, held+slack)
				require.LessOrEqual(t, st.Messages, uint64(cfg.MaxMessages))
				require.LessOrEqual(t, st.Bytes, st.ArenaBytes)
				require.LessOrEqual(t, st.ArenaBytes, uint64(cfg.MaxBytes))
				require.Equal(t, st.Added, st.Messages+st.Evicted)
				if i == 0 {
					require.EqualValues(t, MinCacheBytes, st.ArenaBytes, "the first chunk is small")
				}
				require.LessOrEqual(t, st.ArenaBytes-prev.ArenaBytes, uint64(chunkLen+MinCacheBytes), "one chunk at a time")
				if st.Evicted > prev.Evicted && st.Messages < uint64(cfg.MaxMessages) {
					// Evicted by bytes: only at MaxBytes, and only as
					// much as needed (the evicted message, the newest
					// and the tails skipped before them).
					require.EqualValues(t, cfg.MaxBytes, st.ArenaBytes, "evicted below MaxBytes")
					require.Greater(t, held+2004+slack, st.ArenaBytes, "evicted too much")
				}
				prev = st
				if i%4999 == 0 {
					check()
				}
			}
			check()
			st := c.Stats()
			require.NotZero(t, st.Evicted)
			if tc.jumps {
				require.NotZero(t, st.Jumps)
			}
			if tc.name == "count" {
				require.Less(t, st.ArenaBytes, uint64(4<<20), "count-bound: chunks reused, not MaxBytes")
			}
			t.Logf("%+v", st)
		})
	}
}

// TestCacheLazy checks that a cache that never fills allocates little.
func TestCacheLazy(t *testing.T) {
	s := mustSession(t, "LAZY")
	c := NewCache(CacheConfig{})
	require.Zero(t, c.Stats().ArenaBytes)
	allocs := testing.AllocsPerRun(1, func() {
		c := NewCache(CacheConfig{})
		c.Add(s, 1, []byte("one"))
	})
	require.LessOrEqual(t, allocs, 20.0)
	fill(c, s, 1, 1001, 100)
	require.EqualValues(t, MinCacheBytes, c.Stats().ArenaBytes)
	checkRange(t, c, s, 1, 1001, 100)
}

// TestCacheZeroAllocFull pins zero allocations per SentPacket once the
// cache is warm, also while it is full and evicting, bound by bytes
// (several chunks, reused) or by count (chunks reused below MaxBytes),
// with one or two sessions.
func TestCacheZeroAllocFull(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      CacheConfig
		msgLen   int
		payload  int
		sessions int
	}{
		{"bytes-bound", CacheConfig{MaxBytes: 4 << 20}, 1000, jumboPayload, 1},
		{"bytes-bound-two-sessions", CacheConfig{MaxBytes: 3<<20 + 300<<10}, 300, wire.DefaultPayloadSizeIPv4, 2},
		{"count-bound", CacheConfig{MaxMessages: 1 << 15}, 64, jumboPayload, 1},
		{"count-bound-two-sessions", CacheConfig{MaxMessages: 1 << 14}, 64, jumboPayload, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCache(tc.cfg)
			pkts := make([][]byte, tc.sessions)
			nexts := make([]wire.Seq, tc.sessions)
			var per wire.Seq
			for k := range pkts {
				pkts[k], per = fullPacket(mustSession(t, fmt.Sprint("ZA", k)), tc.msgLen, tc.payload)
				nexts[k] = 1
			}
			i := 0
			send := func() {
				k := i % len(pkts)
				rebase(pkts[k], nexts[k])
				c.SentPacket(pkts[k])
				nexts[k] += per
				i++
			}
			// Warm: reach the bound, then one more full turn.
			for j := 0; j < 1e6 && c.Stats().Evicted == 0; j++ {
				send()
			}
			require.NotZero(t, c.Stats().Evicted)
			held := c.Stats().Messages
			for j := uint64(0); j < 2*held/uint64(per)+10; j++ {
				send()
			}
			before := c.Stats()
			require.Zero(t, testing.AllocsPerRun(2000, send))
			after := c.Stats()
			require.Greater(t, after.Evicted, before.Evicted, "evicting during the run")
			require.Equal(t, before.ArenaBytes, after.ArenaBytes, "chunks reused")
			require.Greater(t, after.Evicted-before.Evicted, 1000*uint64(per), "evicting throughout")
		})
	}
}

// TestCacheGrowthPerPacket pins that growing never costs more than one
// piece: no SentPacket allocates more than one byte chunk plus a log and
// an index block (and a small table of blocks), however large the cache
// already is, and none copies what is stored.
func TestCacheGrowthPerPacket(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  CacheConfig
	}{
		{"bytes-bound", CacheConfig{MaxBytes: 6<<20 + 200<<10}},
		{"count-bound", CacheConfig{MaxMessages: 1 << 17}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSession(t, "PERPKT")
			pkt, per := fullPacket(s, 64, jumboPayload)
			c := NewCache(tc.cfg)
			var ms runtime.MemStats
			next := wire.Seq(1)
			var worst uint64
			for i := 0; i < 3000 && c.Stats().Evicted < 100000; i++ {
				rebase(pkt, next)
				runtime.ReadMemStats(&ms)
				before := ms.TotalAlloc
				c.SentPacket(pkt)
				runtime.ReadMemStats(&ms)
				worst = max(worst, ms.TotalAlloc-before)
				next += per
			}
			st := c.Stats()
			require.GreaterOrEqual(t, st.Evicted, uint64(100000), "went well past the bound")
			t.Logf("largest allocation by one SentPacket: %d bytes; %+v", worst, st)
			require.LessOrEqual(t, worst, uint64(chunkLen+MinCacheBytes+32<<10))
		})
	}
}
