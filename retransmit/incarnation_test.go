package retransmit

import (
	"bytes"
	"github.com/mdbus/mdbus/internal/monotime"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// seededPackets encodes n messages of session s from sequence 1, their
// bytes drawn from seed, into full packets, and returns the packets and
// the messages by sequence (index 0 unused).
func seededPackets(s wire.Session, n int, seed uint64) ([][]byte, [][]byte) {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	msgs := make([][]byte, n+1)
	for q := 1; q <= n; q++ {
		m := make([]byte, 8+rng.IntN(100))
		for i := range m {
			m[i] = byte(rng.Uint32())
		}
		msgs[q] = m
	}
	var pkts [][]byte
	var enc wire.Encoder
	for q := 1; q <= n; {
		enc.Reset(nil, s, wire.Seq(q), wire.DefaultPayloadSizeIPv4)
		for q <= n && enc.Add(msgs[q]) == nil {
			q++
		}
		pkts = append(pkts, bytes.Clone(enc.Bytes()))
	}
	return pkts, msgs
}

// requireNotStale asserts that every message of s the cache returns is
// run's message of that sequence.
func requireNotStale(t *testing.T, c *Cache, s wire.Session, run [][]byte) {
	t.Helper()
	for q := 1; q < len(run); q++ {
		got, ok := c.AppendMessage(nil, s, wire.Seq(q))
		if !ok {
			continue
		}
		require.Equal(t, run[q], got, "sequence %d served another incarnation's bytes", q)
	}
	// The same through whole packets, as the Server builds them.
	for q := wire.Seq(1); q < wire.Seq(len(run)); q++ {
		pkt, n, err := c.AppendPacket(nil, s, q, 1024, wire.DefaultPayloadSizeIPv4)
		require.NoError(t, err)
		if n == 0 {
			continue
		}
		p, err := wire.ParsePacket(pkt)
		require.NoError(t, err)
		for it := p.Messages(); ; {
			msg, seq, ok := it.Next()
			if !ok {
				break
			}
			require.Equal(t, run[seq], msg, "packet from %d: sequence %d is stale", q, seq)
		}
	}
}

// sentRuns hands c every packet of each run in order, as a publisher's
// Sink sees them across its restarts.
func sentRuns(c *Cache, runs ...[][]byte) {
	for _, run := range runs {
		for _, p := range run {
			c.SentPacket(p)
		}
	}
}

// TestCacheReusedSessionName: a publisher restarted under the same session
// name (run 2, other seed) must never have run 1's bytes served for run 2's
// sequences. Its Sink sees its packets in order, so a sequence that goes
// down is a new incarnation.
func TestCacheReusedSessionName(t *testing.T) {
	s := mustSession(t, "REUSED0001")
	c := NewCache(CacheConfig{})
	run1, _ := seededPackets(s, 5000, 1)
	run2, msgs2 := seededPackets(s, 3000, 2)
	sentRuns(c, run1, run2)
	requireNotStale(t, c, s, msgs2)
	first, next, ok := c.Bounds(s)
	require.True(t, ok)
	require.Equal(t, wire.Seq(1), first)
	require.Equal(t, wire.Seq(3001), next, "run 2 is held whole; run 1's tail is not")
	require.EqualValues(t, 1, c.Stats().Incarnations)

	t.Run("mid-run restart", func(t *testing.T) {
		// Run 3 crashes after 1000 messages of its own; run 4 starts
		// again at 1 and stays shorter than run 3.
		c := NewCache(CacheConfig{})
		run3, _ := seededPackets(s, 1000, 3)
		run4, msgs4 := seededPackets(s, 400, 4)
		sentRuns(c, run3, run4)
		requireNotStale(t, c, s, msgs4)
		_, next, _ := c.Bounds(s)
		require.Equal(t, wire.Seq(401), next)
	})
	t.Run("same packet twice is a duplicate", func(t *testing.T) {
		c := NewCache(CacheConfig{})
		run, msgs := seededPackets(s, 1000, 5)
		sentRuns(c, run, run[3:4])
		requireNotStale(t, c, s, msgs)
		st := c.Stats()
		require.Zero(t, st.Incarnations)
		require.NotZero(t, st.Duplicates)
		_, next, _ := c.Bounds(s)
		require.Equal(t, wire.Seq(1001), next)
	})
	t.Run("Restart through Add", func(t *testing.T) {
		// The rewinder's path: the role that sees the incarnation change
		// (a subscriber) says so before adding the new run.
		c := NewCache(CacheConfig{})
		_, msgs1 := seededPackets(s, 2000, 6)
		_, msgs2 := seededPackets(s, 800, 7)
		for q := 1; q < len(msgs1); q++ {
			c.Add(s, wire.Seq(q), msgs1[q])
		}
		c.Restart(s, 1)
		first, next, ok := c.Bounds(s)
		require.True(t, ok)
		require.Equal(t, first, next, "nothing of the new run yet")
		requireNotStale(t, c, s, msgs2)
		for q := 1; q < len(msgs2); q++ {
			c.Add(s, wire.Seq(q), msgs2[q])
		}
		requireNotStale(t, c, s, msgs2)
		first, next, _ = c.Bounds(s)
		require.Equal(t, wire.Seq(1), first)
		require.Equal(t, wire.Seq(801), next)
	})
}

// TestCacheHoleKeepsHistory: a jump over lost messages keeps what was held
// before it; only the hole is unanswerable.
func TestCacheHoleKeepsHistory(t *testing.T) {
	s := mustSession(t, "HOLES")
	c := NewCache(CacheConfig{})
	fill(c, s, 1, 101, 100)
	fill(c, s, 110, 201, 100)             // a small hole: [101, 110)
	fill(c, s, 1_000_000, 1_000_050, 100) // a far jump: a new range
	first, next, ok := c.Bounds(s)
	require.True(t, ok)
	require.Equal(t, wire.Seq(1), first)
	require.Equal(t, wire.Seq(1_000_050), next)
	for _, r := range [][2]wire.Seq{{1, 101}, {110, 201}, {1_000_000, 1_000_050}} {
		for q := r[0]; q < r[1]; q++ {
			got, ok := c.AppendMessage(nil, s, q)
			require.True(t, ok, "seq %d", q)
			require.Equal(t, testMsg(q, 100), got)
		}
	}
	for _, q := range []wire.Seq{101, 105, 109, 201, 5000, 999_999, 1_000_050} {
		_, ok := c.AppendMessage(nil, s, q)
		require.False(t, ok, "seq %d is not held", q)
	}
	// A packet stops at a hole.
	pkt, n, err := c.AppendPacket(nil, s, 95, 1024, wire.MaxPayloadSize)
	require.NoError(t, err)
	require.Equal(t, 6, n)
	require.NotEmpty(t, pkt)
	_, n, _ = c.AppendPacket(nil, s, 105, 1024, wire.MaxPayloadSize)
	require.Zero(t, n)
	// NextHeld skips holes.
	for _, tc := range []struct{ from, want wire.Seq }{{1, 1}, {101, 110}, {109, 110}, {201, 1_000_000}, {1_000_049, 1_000_049}} {
		got, ok := c.NextHeld(s, tc.from)
		require.True(t, ok, "from %d", tc.from)
		require.Equal(t, tc.want, got, "from %d", tc.from)
	}
	_, ok = c.NextHeld(s, 1_000_050)
	require.False(t, ok)
	require.Zero(t, c.Stats().Incarnations)
}

// TestHandlerSkipsHoles: an answer crosses a hole of the cache and goes on
// with what is held after it, and never sends a sequence of the hole.
func TestHandlerSkipsHoles(t *testing.T) {
	s := mustSession(t, "HOLES")
	c := NewCache(CacheConfig{})
	fill(c, s, 1, 51, 80)
	fill(c, s, 60, 101, 80)
	h, uni, _, st := testHandler(t, ServerConfig{Sources: []Source{c}, MaxPerRequest: 1000, MaxRequestBytes: 1 << 20})
	h.handle(monotime.Now(), request(s, 40, 40), false, netip.MustParseAddrPort("127.0.0.1:9"))
	h.flush()
	var got []wire.Seq
	for _, p := range uni.sent {
		pkt, err := wire.ParsePacket(p.pkt)
		require.NoError(t, err)
		for it := pkt.Messages(); ; {
			msg, seq, ok := it.Next()
			if !ok {
				break
			}
			require.Equal(t, testMsg(seq, 80), msg)
			got = append(got, seq)
		}
	}
	var want []wire.Seq
	for q := wire.Seq(40); q < 80; q++ {
		if q < 51 || q >= 60 {
			want = append(want, q)
		}
	}
	require.Equal(t, want, got)
	require.EqualValues(t, 1, st.snapshot().Partial)
}

// FuzzCacheIncarnations drives a small cache with packets, messages,
// jumps and restarts of two sessions, and checks that whatever it serves
// for a sequence is the last bytes stored for it in the session's current
// incarnation: never a previous incarnation's, never a sequence of a hole.
func FuzzCacheIncarnations(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 2, 0, 9, 1, 5, 3, 0, 2, 4, 8})
	f.Add([]byte{2, 0, 40, 2, 0, 40, 2, 0, 10, 3, 1, 0, 0, 200, 2, 1, 50})
	f.Fuzz(fuzzIncarnations)
}

func fuzzIncarnations(t *testing.T, ops []byte) {
	if len(ops) > 600 {
		ops = ops[:600]
	}
	c := NewCache(CacheConfig{MaxMessages: 64, MaxBytes: MinCacheBytes, MaxSessions: 2})
	sessions := []wire.Session{mustSession(t, "F0"), mustSession(t, "F1")}
	model := []map[wire.Seq][]byte{{}, {}}
	next := []wire.Seq{1, 1}
	var enc wire.Encoder
	for i := 0; i+2 < len(ops); i += 3 {
		k := int(ops[i+1] & 1)
		s, arg := sessions[k], ops[i+2]
		before := c.Stats()
		switch ops[i] % 4 {
		case 0: // one message at next, or after a jump
			q := next[k] + wire.Seq(arg%8)
			msg := []byte{byte(k), arg, byte(q), byte(i)}
			c.Add(s, q, msg)
			if c.Stats().Added > before.Added {
				model[k][q] = msg
				next[k] = q + 1
			}
		case 1: // a restart
			c.Restart(s, 0)
			model[k] = map[wire.Seq][]byte{}
			next[k] = 1
		case 2, 3: // a packet of 1 to 4 messages, at next or earlier
			q := next[k]
			if back := wire.Seq(arg % 16); ops[i]%4 == 3 && q > back {
				q -= back
			}
			enc.Reset(nil, s, q, wire.DefaultPayloadSizeIPv4)
			for j := range 1 + int(arg%4) {
				_ = enc.Add([]byte{byte(k), arg, byte(i), byte(j)})
			}
			pkt := bytes.Clone(enc.Bytes())
			c.SentPacket(pkt)
			if c.Stats().Incarnations > before.Incarnations {
				model[k] = map[wire.Seq][]byte{}
			}
			p, err := wire.ParsePacket(pkt)
			require.NoError(t, err)
			for it := p.Messages(); ; {
				msg, seq, ok := it.Next()
				if !ok {
					break
				}
				if seq >= next[k] || c.Stats().Incarnations > before.Incarnations {
					model[k][seq] = msg
				}
				next[k] = max(next[k], seq+1)
			}
			if c.Stats().Incarnations > before.Incarnations {
				next[k] = p.Seq + wire.Seq(p.MessageCount())
			}
		}
		if _, _, ok := c.Bounds(s); !ok { // evicted (MaxSessions)
			model[k] = map[wire.Seq][]byte{}
		}
		for k, s := range sessions {
			first, _, ok := c.Bounds(s)
			if !ok {
				continue
			}
			steps := 0
			for q, ok := c.NextHeld(s, first); ok && steps < 200; q, ok = c.NextHeld(s, q+1) {
				steps++
				// Plain ifs: require's variadic arguments would
				// dominate the run time.
				got, held := c.AppendMessage(nil, s, q)
				want, written := model[k][q]
				switch {
				case !held:
					t.Fatalf("NextHeld %d not held", q)
				case !written:
					t.Fatalf("session %d seq %d served but not written in this incarnation", k, q)
				case !bytes.Equal(want, got):
					t.Fatalf("session %d seq %d: got %x, want %x", k, q, got, want)
				}
			}
		}
	}
}
