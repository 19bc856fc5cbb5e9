package retransmit

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mdbus/mdbus/internal/validpkt"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// TestCacheSentPacketModel stores whole packets (one log entry each) of
// two interleaved sessions, with holes, packets offered again and packets
// that overlap the held ones, into caches bounded by messages, bytes or
// both, and checks against a model of the FIFO of packets that whole
// packets are evicted oldest first, exactly the newest are held byte for
// byte, and AppendPackets rebuilds them.
func TestCacheSentPacketModel(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  CacheConfig
	}{
		{"count", CacheConfig{MaxMessages: 3000}},
		{"bytes", CacheConfig{MaxBytes: MinCacheBytes * 3}},
		{"both", CacheConfig{MaxMessages: 2000, MaxBytes: MinCacheBytes * 2}},
	} {
		for _, valid := range []bool{false, true} {
			name := tc.name
			if valid {
				name += "/valid" // the packets as a publisher of this module hands them over
			}
			t.Run(name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(7, uint64(len(tc.name))))
				c := NewCache(tc.cfg)
				offer := func(pkt []byte) {
					if valid {
						sentValid(c, pkt)
					} else {
						c.SentPacket(pkt)
					}
				}
				sessions := []wire.Session{mustSession(t, "PKT0"), mustSession(t, "PKT1")}
				type stored struct {
					k           int
					first, next wire.Seq
				}
				var fifo []stored            // entries in the order stored
				sizes := [][]int{{-1}, {-1}} // sizes[k][seq]; -1 in a hole
				next := []wire.Seq{1, 1}
				last := [][]byte{nil, nil} // the last packet of each session
				var dups uint64
				encode := func(k int, from wire.Seq, count int) []byte {
					var enc wire.Encoder
					enc.Reset(nil, sessions[k], from, 9000)
					var msg []byte
					for q := from; q < from+wire.Seq(count); q++ {
						msg = growMsg(msg[:0], k, q, sizes[k][q])
						require.NoError(t, enc.Add(msg))
					}
					return enc.Bytes()
				}
				var evicted uint64
				check := func(full bool) {
					st := c.Stats()
					for ; evicted < st.Evicted; fifo = fifo[1:] {
						require.NotEmpty(t, fifo)
						evicted += uint64(fifo[0].next - fifo[0].first)
					}
					require.Equal(t, evicted, st.Evicted, "evicted whole packets")
					var held uint64
					first := []wire.Seq{next[0], next[1]}
					for i := len(fifo) - 1; i >= 0; i-- {
						held += uint64(fifo[i].next - fifo[i].first)
						first[fifo[i].k] = fifo[i].first
					}
					require.Equal(t, held, st.Messages)
					require.Equal(t, st.Added, st.Messages+st.Evicted)
					require.Equal(t, dups, st.Duplicates)
					if !full {
						return
					}
					pkts := make([][]byte, 4)
					for i := range pkts {
						pkts[i] = make([]byte, 0, 1472)
					}
					checkHeld(t, c, sessions, first, next, func(k int, q wire.Seq) int { return sizes[k][q] })
					var want []byte
					for k, s := range sessions {
						if next[k] == 1 {
							continue
						}
						// Rebuild the held stretch after the last hole in
						// packets of at most 1472 bytes.
						from := next[k]
						for from > first[k] && sizes[k][from-1] >= 0 {
							from--
						}
						for q := from; q < next[k]; {
							np, nm, err := c.AppendPackets(pkts, s, q, int(next[k]-q), 1472)
							require.NoError(t, err)
							require.Positive(t, nm)
							for _, b := range pkts[:np] {
								p, err := wire.ParsePacket(b)
								require.NoError(t, err)
								for it := p.Messages(); ; {
									msg, seq, ok := it.Next()
									if !ok {
										break
									}
									require.Equal(t, q, seq)
									want = growMsg(want[:0], k, seq, sizes[k][seq])
									require.True(t, bytes.Equal(want, msg), "packet: session %d seq %d", k, seq)
									q++
								}
							}
						}
					}
				}
				for i := range 4000 {
					k := rng.IntN(2)
					switch r := rng.IntN(40); {
					case r == 0 && last[k] != nil:
						// The same packet offered again: a duplicate.
						offer(last[k])
						p, _ := wire.ParsePacket(last[k])
						dups += uint64(p.MessageCount())
						continue
					case r == 1 && next[k] > 1:
						// A hole.
						jump := 1 + rng.IntN(500)
						for range jump {
							sizes[k] = append(sizes[k], -1)
						}
						next[k] += wire.Seq(jump)
					}
					count := 1 + rng.IntN(60)
					for range count {
						sizes[k] = append(sizes[k], rng.IntN(120))
					}
					from := next[k]
					// Now and then the packet starts inside the last one: its
					// held part is a duplicate, the rest is stored.
					if p, err := wire.ParsePacket(last[k]); err == nil && rng.IntN(10) == 0 && p.Seq+wire.Seq(p.MessageCount()) == next[k] {
						back := 1 + rng.IntN(int(p.MessageCount()))
						from -= wire.Seq(back)
						dups += uint64(back)
					}
					pkt := encode(k, from, int(next[k]-from)+count)
					offer(pkt)
					fifo = append(fifo, stored{k, next[k], next[k] + wire.Seq(count)})
					next[k] += wire.Seq(count)
					last[k] = pkt
					check(i%500 == 0)
				}
				check(true)
				require.Zero(t, c.Stats().Incarnations, "no duplicate was taken for a new incarnation")
			})
		}
	}
}

// sentValid hands c the encoded packet pkt as this module's publisher
// does: its header's fields beside the message blocks.
func sentValid(c *Cache, pkt []byte) {
	h, err := wire.ParseHeader(pkt)
	if err != nil {
		panic(err)
	}
	c.SentValidPacket(validpkt.Packet{Session: h.Session, Seq: h.Seq, Count: h.Count, Body: pkt[wire.HeaderLen:]})
}

// TestCacheSentValidPacketHeader checks the header fields SentValidPacket
// still checks, at no cost per message: heartbeats and ends of session are
// ignored as by SentPacket, and a zero sequence, a sequence that overflows
// and an invalid session are counted as bad packets and not stored.
func TestCacheSentValidPacketHeader(t *testing.T) {
	c := NewCache(CacheConfig{})
	s := mustSession(t, "VALID")
	body := []byte{0, 1, 'A'}
	for _, p := range []validpkt.Packet{
		{Session: s, Seq: 5, Count: wire.CountHeartbeat},
		{Session: s, Seq: 5, Count: wire.CountEndOfSession},
		{},
	} {
		c.SentValidPacket(p)
	}
	require.Zero(t, c.Stats().BadPackets)
	require.Zero(t, c.Stats().Added)
	var bad wire.Session
	bad[0] = 0x01 // a control byte: not a valid session
	for _, p := range []validpkt.Packet{
		{Session: s, Seq: wire.InvalidSeq, Count: 1, Body: body},
		{Session: s, Seq: wire.Seq(math.MaxUint64), Count: 2, Body: []byte{0, 1, 'A', 0, 1, 'B'}},
		{Session: bad, Seq: 5, Count: 1, Body: body},
	} {
		c.SentValidPacket(p)
	}
	st := c.Stats()
	require.EqualValues(t, 3, st.BadPackets)
	require.Zero(t, st.Added)
	c.SentValidPacket(validpkt.Packet{Session: s, Seq: 5, Count: 1, Body: body})
	require.EqualValues(t, 1, c.Stats().Added)
	first, next, ok := c.Bounds(s)
	require.True(t, ok)
	require.Equal(t, [2]wire.Seq{5, 6}, [2]wire.Seq{first, next})
}

// TestCacheSentPacketBeyondMaxMessages stores a packet of more messages
// than the cache may hold: the newest ones are held.
func TestCacheSentPacketBeyondMaxMessages(t *testing.T) {
	s := mustSession(t, "BIG")
	c := NewCache(CacheConfig{MaxMessages: 10})
	var enc wire.Encoder
	enc.Reset(nil, s, 1, 1472)
	var msg []byte
	for q := wire.Seq(1); q <= 25; q++ {
		msg = growMsg(msg[:0], 0, q, int(q))
		require.NoError(t, enc.Add(msg))
	}
	c.SentPacket(enc.Bytes())
	st := c.Stats()
	require.EqualValues(t, 10, st.Messages)
	require.EqualValues(t, 25, st.Added)
	first, next, ok := c.Bounds(s)
	require.True(t, ok)
	require.Equal(t, wire.Seq(16), first)
	require.Equal(t, wire.Seq(26), next)
	for q := wire.Seq(16); q < 26; q++ {
		got, ok := c.AppendMessage(nil, s, q)
		require.True(t, ok)
		require.Equal(t, growMsg(nil, 0, q, int(q)), got)
	}
}

// FuzzCacheSentPacket offers arbitrary bytes as packets (a Sink is a
// public hook) and reads back everything the cache then holds: nothing
// may panic, and what is read back parses.
func FuzzCacheSentPacket(f *testing.F) {
	s := mustSession(f, "FUZZ")
	var enc wire.Encoder
	enc.Reset(nil, s, 5, 200)
	_ = enc.Add([]byte("hello"))
	_ = enc.Add([]byte("world!"))
	f.Add(enc.Bytes(), enc.Bytes())
	f.Add([]byte("garbage"), enc.Bytes()[:30])
	f.Fuzz(func(t *testing.T, a, b []byte) {
		c := NewCache(CacheConfig{MaxMessages: 3, MaxBytes: MinCacheBytes})
		c.SentPacket(a)
		c.SentPacket(b)
		pkts := [][]byte{make([]byte, 0, 9000), make([]byte, 0, 9000)}
		for _, pkt := range [][]byte{a, b} {
			h, err := wire.ParseHeader(pkt)
			if err != nil {
				continue
			}
			first, next, ok := c.Bounds(h.Session)
			if !ok {
				continue
			}
			for q := first; q < next && q-first < 1000; q++ {
				_, _ = c.AppendMessage(nil, h.Session, q)
			}
			np, _, err := c.AppendPackets(pkts, h.Session, first, int(min(uint64(next-first), 1000)), 9000)
			if err != nil {
				continue
			}
			for _, p := range pkts[:np] {
				if _, err := wire.ParsePacket(p); err != nil {
					t.Fatalf("a packet built from the cache does not parse: %v", err)
				}
			}
		}
	})
}
