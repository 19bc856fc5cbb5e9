package retransmit

import (
	"fmt"
	"math"
	"sync"

	"github.com/mdbus/mdbus/wire"
)

// Cache defaults and limits.
const (
	// DefaultMaxMessages is CacheConfig.MaxMessages when zero.
	DefaultMaxMessages = 1 << 20
	// DefaultMaxBytes is CacheConfig.MaxBytes when zero.
	DefaultMaxBytes = 256 << 20
	// DefaultMaxSessions is CacheConfig.MaxSessions when zero.
	DefaultMaxSessions = 16
	// MinCacheBytes is the smallest byte budget: a message of any length
	// MoldUDP64 can carry (at most 0xFFFF bytes) fits.
	MinCacheBytes = 1 << 16
	// MaxCacheSessions caps CacheConfig.MaxSessions.
	MaxCacheSessions = 4096

	// chunkLen is the usual size of a byte chunk. The first chunks are
	// smaller (MinCacheBytes, then as large as all before them) and the
	// last one takes what remains of MaxBytes, so every chunk is from
	// MinCacheBytes to chunkLen+MinCacheBytes bytes: any message fits.
	chunkLen = 1 << 20
	// blockLen is the number of elements in a block of the message log
	// (8 KiB) or of a session's index (4 KiB).
	blockLen = 1 << 9
)

// CacheConfig bounds a Cache. The zero value of each field is its default.
// The bounds hold for the Cache as a whole, across all its sessions.
type CacheConfig struct {
	// MaxMessages is how many messages the cache holds at most. Default
	// DefaultMaxMessages (1<<20).
	MaxMessages int
	// MaxBytes bounds the memory that stores message bytes, in bytes
	// (allocated in chunks of at most about 1 MiB as needed, up to it).
	// Default DefaultMaxBytes (256 MiB); at least MinCacheBytes (64 KiB).
	MaxBytes int
	// MaxSessions is how many sessions the cache tracks; a new session
	// beyond it evicts the one written least recently. Default
	// DefaultMaxSessions (16), at most MaxCacheSessions.
	MaxSessions int
}

func (c CacheConfig) withDefaults() CacheConfig {
	if c.MaxMessages <= 0 {
		c.MaxMessages = DefaultMaxMessages
	}
	c.MaxMessages = min(c.MaxMessages, 1<<40)
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	c.MaxBytes = max(c.MaxBytes, MinCacheBytes)
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	c.MaxSessions = min(c.MaxSessions, MaxCacheSessions)
	return c
}

// CacheStats counts what a Cache did. All counts are since NewCache, but
// Messages, Bytes and Sessions, which describe the cache now.
type CacheStats struct {
	// Messages is the number of messages held, including those of
	// restarted or evicted sessions whose room is not reclaimed yet.
	Messages uint64
	// Bytes is the part of the byte chunks in use (message bytes plus the
	// unused tails of chunks skipped where a message would not fit).
	Bytes uint64
	// ArenaBytes is the size of all byte chunks allocated now.
	ArenaBytes uint64
	// Sessions is the number of sessions tracked.
	Sessions int
	// Added counts messages stored.
	Added uint64
	// Evicted counts messages dropped to make room, oldest first.
	Evicted uint64
	// Duplicates counts messages ignored because their sequence was
	// already cached or older.
	Duplicates uint64
	// Restarts counts sequence jumps that restarted a session's range.
	Restarts uint64
	// SessionsEvicted counts sessions dropped to admit a new one.
	SessionsEvicted uint64
	// BadPackets counts packets given to SentPacket that did not parse.
	BadPackets uint64
	// BadMessages counts messages refused by Add: sequence 0, the largest
	// sequence, or longer than 0xFFFF bytes.
	BadMessages uint64
}

// entry is one message in the log: its bytes are
// chunks[chunk].buf[off:off+n].
type entry struct {
	off   uint32 // offset in the chunk
	chunk uint32 // chunk number
	skip  uint32 // bytes skipped after the message, before the next one (a chunk's tail)
	n     uint16 // message length
	slot  uint16 // session slot that stored it
}

// chunk is one piece of the byte ring.
type chunk struct {
	buf  []byte
	next uint32 // the chunk after this one in the ring
}

// blocks is an array indexed by uint64 stored in blocks of blockLen
// elements: element i is in block i/blockLen, and only the blocks [lo, hi)
// are held, a window that only moves up (reset empties it). A block comes
// from a pool shared by all blocks values of a Cache, or is allocated when
// the pool is empty, and goes back to the pool when released. The table of
// blocks is a ring that doubles when the window outgrows it: that copies
// block pointers, never elements.
type blocks[T any] struct {
	tab    []*[blockLen]T // block k at tab[k&(len(tab)-1)]
	lo, hi uint64
}

// at returns element i, whose block is held.
func (b *blocks[T]) at(i uint64) *T {
	return &b.tab[(i/blockLen)&uint64(len(b.tab)-1)][i%blockLen]
}

// held reports whether the block of element i is held, for i above lo.
func (b *blocks[T]) held(i uint64) bool {
	return i/blockLen < b.hi && b.lo < b.hi
}

// hold makes the block of element i held (and those between the window
// and it, which for the callers, writing elements in order, are none),
// taking blocks from pool.
func (b *blocks[T]) hold(i uint64, pool *[]*[blockLen]T) {
	n := i / blockLen
	if b.lo == b.hi {
		b.lo, b.hi = n, n
	}
	for b.hi <= n {
		if b.hi-b.lo >= uint64(len(b.tab)) {
			b.growTable()
		}
		var blk *[blockLen]T
		if k := len(*pool); k > 0 {
			blk = (*pool)[k-1]
			(*pool)[k-1] = nil
			*pool = (*pool)[:k-1]
		} else {
			blk = new([blockLen]T)
		}
		b.tab[b.hi&uint64(len(b.tab)-1)] = blk
		b.hi++
	}
}

// growTable doubles the table of blocks.
func (b *blocks[T]) growTable() {
	nt := make([]*[blockLen]T, max(2*len(b.tab), 4))
	om, nm := uint64(len(b.tab)-1), uint64(len(nt)-1)
	for k := b.lo; k < b.hi; k++ {
		nt[k&nm] = b.tab[k&om]
	}
	b.tab = nt
}

// releaseBelow gives back to pool the held blocks entirely below element i.
func (b *blocks[T]) releaseBelow(i uint64, pool *[]*[blockLen]T) {
	for n := i / blockLen; b.lo < b.hi && b.lo < n; b.lo++ {
		k := b.lo & uint64(len(b.tab)-1)
		*pool = append(*pool, b.tab[k])
		b.tab[k] = nil
	}
}

// reset gives back to pool all the held blocks.
func (b *blocks[T]) reset(pool *[]*[blockLen]T) {
	for ; b.lo < b.hi; b.lo++ {
		k := b.lo & uint64(len(b.tab)-1)
		*pool = append(*pool, b.tab[k])
		b.tab[k] = nil
	}
}

// cacheSession is the state of one session: its cached range and the index
// from sequence to log number.
type cacheSession struct {
	id          wire.Session
	live        bool
	first, next wire.Seq       // cached range [first, next); next == 0 before the first message
	idx         blocks[uint64] // log number of sequence q at idx.at(q), for q in [first, next)
	runStart    uint64         // log number of the range's first message: those before are dead
	lastWrite   uint64         // Cache.writes at the last store, for LRU eviction of sessions
}

// Cache keeps the most recent messages of a few sessions so that a Server
// can answer re-requests. See the package documentation for its layout.
//
// A Cache is safe for concurrent use. Writers (SentPacket, Add) serialize on
// a mutex; readers (Bounds, AppendPacket, AppendPackets, AppendMessage,
// Stats) share a read lock, taken once per packet built, so a writer waits
// at most for one packet's copy.
//
// A Cache grows in pieces allocated as needed (byte chunks of up to about
// 1 MiB, blocks of 512 log entries or index slots) and never moves what
// it stores: a write costs constant time per message, plus at most one
// allocation of each kind of piece, and never copies the cache. Pieces
// freed by eviction are reused, so once its bounds (or its working size)
// are reached, a Cache allocates nothing.
type Cache struct {
	mu       sync.RWMutex
	maxMsgs  uint64
	maxBytes uint64

	// The byte ring: chunks linked by next in a cycle, in the order the
	// tail visits them; a new chunk goes in right after the tail's.
	chunks     []chunk
	tc, toff   uint32 // the tail: chunk and offset where the next message goes
	used       uint64 // bytes from the oldest message's start to the tail, skipped tails included
	arenaBytes uint64 // total size of the chunks

	log     blocks[entry] // entries numbered [gh, gt)
	gh, gt  uint64
	logFree []*[blockLen]entry  // released log blocks
	idxFree []*[blockLen]uint64 // released index blocks, shared by the sessions

	sessions  []cacheSession
	bySession map[wire.Session]int
	lastSlot  int // slot of the last write, a fast path for SentPacket
	writes    uint64

	st CacheStats
}

// NewCache returns an empty Cache bounded by cfg. It allocates no message
// storage until messages come.
func NewCache(cfg CacheConfig) *Cache {
	cfg = cfg.withDefaults()
	return &Cache{
		maxMsgs:   uint64(cfg.MaxMessages),
		maxBytes:  uint64(cfg.MaxBytes),
		sessions:  make([]cacheSession, cfg.MaxSessions),
		bySession: make(map[wire.Session]int, cfg.MaxSessions),
		lastSlot:  -1,
	}
}

// SentPacket stores a copy of every message of a downstream packet. It is
// the publisher's Sink hook: pkt is only read during the call. Heartbeats
// and end-of-session packets are ignored, packets that do not parse are
// counted (CacheStats.BadPackets) and ignored. Messages follow the
// contiguity rule of Add. Its cost is constant per message: at most one
// byte chunk, log block and index block allocated while the cache grows,
// nothing once it has reached its working size.
func (c *Cache) SentPacket(pkt []byte) {
	p, err := wire.ParsePacket(pkt)
	if err != nil {
		c.mu.Lock()
		c.st.BadPackets++
		c.mu.Unlock()
		return
	}
	if p.MessageCount() == 0 {
		return
	}
	c.mu.Lock()
	slot := c.slotFor(p.Session)
	for it := p.Messages(); ; {
		msg, seq, ok := it.Next()
		if !ok {
			break
		}
		c.add(slot, seq, msg)
	}
	c.mu.Unlock()
}

// Add stores a copy of msg as message seq of session s (the rewinder's
// path: one message as a subscriber delivers it).
//
// Messages of a session must come in sequence order, contiguous. A message
// whose sequence is below the next expected one is a duplicate and is
// ignored. A sequence above it (a jump over a gap) restarts the session's
// cached range at seq: the older messages can no longer be found, because
// the cache only holds gap-free ranges, and their room is reclaimed as the
// oldest messages are evicted. Sequence 0, the largest sequence and
// messages longer than 0xFFFF bytes are refused (CacheStats.BadMessages).
func (c *Cache) Add(s wire.Session, seq wire.Seq, msg []byte) {
	c.mu.Lock()
	c.add(c.slotFor(s), seq, msg)
	c.mu.Unlock()
}

// slotFor returns the slot of session s, making one (and evicting the least
// recently written session when all are taken) if needed. c.mu is held.
func (c *Cache) slotFor(s wire.Session) int {
	if c.lastSlot >= 0 && c.sessions[c.lastSlot].id == s && c.sessions[c.lastSlot].live {
		return c.lastSlot
	}
	if slot, ok := c.bySession[s]; ok {
		c.lastSlot = slot
		return slot
	}
	slot := -1
	for i := range c.sessions {
		ss := &c.sessions[i]
		if !ss.live {
			slot = i
			break
		}
		if slot < 0 || ss.lastWrite < c.sessions[slot].lastWrite {
			slot = i
		}
	}
	ss := &c.sessions[slot]
	if ss.live {
		delete(c.bySession, ss.id)
		c.st.SessionsEvicted++
		c.st.Sessions--
	}
	idx := ss.idx // keep the table; the blocks go back to the pool
	idx.reset(&c.idxFree)
	*ss = cacheSession{id: s, live: true, idx: idx, runStart: c.gt, lastWrite: c.writes}
	c.bySession[s] = slot
	c.st.Sessions++
	c.lastSlot = slot
	return slot
}

// add stores one message. c.mu is held.
func (c *Cache) add(slot int, seq wire.Seq, msg []byte) {
	ss := &c.sessions[slot]
	switch {
	case seq == wire.InvalidSeq || seq == math.MaxUint64 || len(msg) > math.MaxUint16:
		c.st.BadMessages++
		return
	case ss.next != 0 && seq < ss.next:
		c.st.Duplicates++
		return
	case seq != ss.next:
		if ss.next != 0 {
			c.st.Restarts++
		}
		ss.idx.reset(&c.idxFree) // a restart gives its index blocks back
		ss.first, ss.next = seq, seq
		ss.runStart = c.gt
	}
	n := uint32(len(msg))
	ch, off, gap := c.reserve(n)
	// reserve may have evicted this session's oldest messages; first and
	// next are still right.
	copy(c.chunks[ch].buf[off:off+n], msg)
	if c.gh == c.gt {
		c.used = uint64(n) // the skipped tail before the oldest message does not count
	} else {
		c.used += uint64(gap) + uint64(n)
		if gap > 0 {
			c.log.at(c.gt - 1).skip = gap
		}
	}
	c.tc, c.toff = ch, off+n
	if !c.log.held(c.gt) {
		c.log.hold(c.gt, &c.logFree)
	}
	*c.log.at(c.gt) = entry{off: off, chunk: ch, n: uint16(n), slot: uint16(slot)}
	if !ss.idx.held(uint64(seq)) {
		ss.idx.hold(uint64(seq), &c.idxFree)
	}
	*ss.idx.at(uint64(seq)) = c.gt
	c.gt++
	ss.next = seq + 1
	c.writes++
	ss.lastWrite = c.writes
	c.lastSlot = slot
	c.st.Added++
}

// reserve makes room for one message of n bytes, adding a chunk or
// evicting the oldest messages, and returns where it goes and how many
// bytes of the tail's chunk it skips. c.mu is held.
//
// The chunks form a ring that the tail walks around; the live messages
// are the stretch of the ring from the oldest one's start to the tail,
// c.used bytes long, so the free stretch after the tail is arenaBytes -
// used bytes. A message never straddles two chunks: when it does not fit
// in the rest of the tail's chunk, that rest is skipped and counts as
// used. While the chunks total less than maxBytes, the tail only enters a
// chunk that holds no live message: when the next one still does, a new
// chunk is linked in after the tail's, in the free stretch, and nothing
// moves. At maxBytes the ring is fixed and the oldest messages are
// evicted until the new one fits.
func (c *Cache) reserve(n uint32) (ch, off, gap uint32) {
	for c.gt-c.gh >= c.maxMsgs {
		c.evictOldest()
	}
	for {
		if len(c.chunks) == 0 {
			c.addChunk()
		}
		empty := c.gh == c.gt
		ch, off, gap = c.tc, c.toff, 0
		if size := uint32(len(c.chunks[ch].buf)); off+n > size {
			gap = size - off
			ch, off = c.chunks[ch].next, 0
			if !empty && c.arenaBytes < c.maxBytes &&
				c.used+uint64(gap)+uint64(len(c.chunks[ch].buf)) > c.arenaBytes {
				c.addChunk() // the next chunk is not all free: link a new one before it
				continue
			}
		}
		if empty || c.used+uint64(gap)+uint64(n) <= c.arenaBytes {
			return ch, off, gap
		}
		c.evictOldest()
	}
}

// addChunk allocates a chunk and links it in the ring after the tail's.
// Its size is that of all the chunks before it, from MinCacheBytes to
// chunkLen, and the last one takes what remains of maxBytes when less
// than MinCacheBytes would be left. c.mu is held.
func (c *Cache) addChunk() {
	rem := c.maxBytes - c.arenaBytes
	size := min(max(c.arenaBytes, MinCacheBytes), chunkLen, rem)
	if rem-size < MinCacheBytes {
		size = rem
	}
	id := uint32(len(c.chunks))
	ck := chunk{buf: make([]byte, size), next: id}
	if len(c.chunks) > 0 {
		ck.next = c.chunks[c.tc].next
		c.chunks[c.tc].next = id
	}
	c.chunks = append(c.chunks, ck)
	c.arenaBytes += size
}

// evictOldest drops the oldest message of the log. c.mu is held.
func (c *Cache) evictOldest() {
	e := c.log.at(c.gh)
	size := uint64(e.n) + uint64(e.skip)
	// The log holds a session's range in order, after its older (dead)
	// ranges and those of the slot's former sessions: an entry from
	// runStart on is the session's first message.
	if ss := &c.sessions[e.slot]; ss.live && c.gh >= ss.runStart {
		ss.first++
		if ss.first%blockLen == 0 {
			ss.idx.releaseBelow(uint64(ss.first), &c.idxFree)
		}
	}
	c.gh++
	c.st.Evicted++
	if c.gh == c.gt {
		c.used, c.toff = 0, 0 // empty: start again at the tail chunk's beginning
	} else {
		c.used -= size
	}
	if c.gh%blockLen == 0 {
		c.log.releaseBelow(c.gh, &c.logFree)
	}
}

// message returns the bytes of cached message seq of ss (first <= seq <
// next). They alias a chunk: valid only while c.mu is held.
func (c *Cache) message(ss *cacheSession, seq wire.Seq) []byte {
	e := c.log.at(*ss.idx.at(uint64(seq)))
	end := e.off + uint32(e.n)
	return c.chunks[e.chunk].buf[e.off:end:end]
}

// lookup returns the live session s. c.mu is held.
func (c *Cache) lookup(s wire.Session) *cacheSession {
	slot, ok := c.bySession[s]
	if !ok {
		return nil
	}
	return &c.sessions[slot]
}

// Bounds returns the cached range [first, next) of session s; ok is false
// when the cache does not know s. A known session with nothing cached has
// first == next.
func (c *Cache) Bounds(s wire.Session) (first, next wire.Seq, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ss := c.lookup(s)
	if ss == nil {
		return 0, 0, false
	}
	return ss.first, ss.next, true
}

// AppendMessage appends a copy of cached message seq of session s to dst;
// ok is false when it is not cached. It looks the message up in constant
// time and does not allocate when dst has room.
func (c *Cache) AppendMessage(dst []byte, s wire.Session, seq wire.Seq) (_ []byte, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ss := c.lookup(s)
	if ss == nil || seq < ss.first || seq >= ss.next {
		return dst, false
	}
	return append(dst, c.message(ss, seq)...), true
}

// AppendPacket appends to dst one downstream packet (wire.Encoder) of
// session s whose first message is from, with as many consecutive cached
// messages as fit in payloadSize bytes, at most max. It returns the
// extended dst and the number of messages in the packet: 0, with dst
// unchanged, when from is not cached. A cached message too large for
// payloadSize returns an error matching wire.ErrMessageTooLarge.
//
// It does not allocate when dst has payloadSize bytes of room. It takes the
// read lock once, so a packet is a consistent snapshot.
func (c *Cache) AppendPacket(dst []byte, s wire.Session, from wire.Seq, max, payloadSize int) ([]byte, int, error) {
	if max <= 0 {
		return dst, 0, nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	ss := c.lookup(s)
	if ss == nil || from < ss.first || from >= ss.next {
		return dst, 0, nil
	}
	n := min(uint64(ss.next-from), uint64(max), wire.MaxCount)
	var enc wire.Encoder
	enc.Reset(dst, s, from, payloadSize)
	k := uint64(0)
	for ; k < n; k++ {
		msg := c.message(ss, from+wire.Seq(k))
		if !enc.Fits(len(msg)) {
			if k == 0 {
				return dst, 0, fmt.Errorf("retransmit: session %q sequence %d: %d bytes in a %d-byte payload: %w",
					s.String(), from, len(msg), payloadSize, wire.ErrMessageTooLarge)
			}
			break
		}
		_ = enc.Add(msg) // Fits checked
	}
	return enc.Bytes(), int(k), nil
}

// AppendPackets builds the packets carrying the cached part of [from,
// from+count) of session s that starts at from: packet i is appended to
// pkts[i][:0] and stored back in pkts[i]. It stops when pkts is full, the
// range is done or the next message is not cached, and returns the number
// of packets built and of messages they carry. It does not allocate when
// every pkts[i] has payloadSize bytes of capacity.
func (c *Cache) AppendPackets(pkts [][]byte, s wire.Session, from wire.Seq, count, payloadSize int) (npkts, nmsgs int, err error) {
	for npkts < len(pkts) && nmsgs < count {
		p, n, err := c.AppendPacket(pkts[npkts][:0], s, from+wire.Seq(nmsgs), count-nmsgs, payloadSize)
		if err != nil {
			return npkts, nmsgs, err
		}
		if n == 0 {
			break
		}
		pkts[npkts] = p
		npkts++
		nmsgs += n
	}
	return npkts, nmsgs, nil
}

// Stats returns the cache's counters.
func (c *Cache) Stats() CacheStats {
	c.mu.RLock()
	defer c.mu.RUnlock()
	st := c.st
	st.Messages = c.gt - c.gh
	st.Bytes = c.used
	st.ArenaBytes = c.arenaBytes
	return st
}

func nextPow2(n uint64) int {
	p := 1
	for uint64(p) < n {
		p <<= 1
	}
	return p
}

var _ Source = (*Cache)(nil)
