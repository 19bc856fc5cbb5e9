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

	minLogLen   = 1 << 10 // initial length of the message log
	minIdxLen   = 1 << 6  // smallest per-session index
	minArenaLen = 1 << 16 // initial size of the byte arena
)

// CacheConfig bounds a Cache. The zero value of each field is its default.
// The bounds hold for the Cache as a whole, across all its sessions.
type CacheConfig struct {
	// MaxMessages is how many messages the cache holds at most. Default
	// DefaultMaxMessages (1<<20).
	MaxMessages int
	// MaxBytes bounds the byte arena that stores message bytes, in bytes
	// (the arena grows by doubling up to it). Default DefaultMaxBytes
	// (256 MiB); at least MinCacheBytes (64 KiB).
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
	// Bytes is the part of the byte arena in use (message bytes plus the
	// unused tail skipped where a message would have wrapped).
	Bytes uint64
	// ArenaBytes is the size of the byte arena now.
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

// entry is one message in the log.
type entry struct {
	pos  uint64 // monotonic byte position; the bytes are at arena[pos%len(arena):]
	n    uint16 // message length
	slot uint16 // session slot that stored it
}

// cacheSession is the state of one session: its cached range and the index
// from sequence to log number.
type cacheSession struct {
	id          wire.Session
	live        bool
	first, next wire.Seq // cached range [first, next); next == 0 before the first message
	idx         []uint64 // log number of sequence q at idx[q&(len-1)], for q in [first, next)
	lastWrite   uint64   // Cache.writes at the last store, for LRU eviction of sessions
}

// Cache keeps the most recent messages of a few sessions so that a Server
// can answer re-requests. See the package documentation for its layout.
//
// A Cache is safe for concurrent use. Writers (SentPacket, Add) serialize on
// a mutex; readers (Bounds, AppendPacket, AppendPackets, AppendMessage,
// Stats) share a read lock, taken once per packet built, so a writer waits
// at most for one packet's copy.
type Cache struct {
	mu       sync.RWMutex
	maxMsgs  uint64
	maxBytes int

	arena []byte
	tail  uint64 // byte position after the newest message

	log    []entry // ring of log numbers [gh, gt), len a power of two
	gh, gt uint64

	sessions  []cacheSession
	bySession map[wire.Session]int
	lastSlot  int // slot of the last write, a fast path for SentPacket
	writes    uint64

	st CacheStats
}

// NewCache returns an empty Cache bounded by cfg.
func NewCache(cfg CacheConfig) *Cache {
	cfg = cfg.withDefaults()
	return &Cache{
		maxMsgs:   uint64(cfg.MaxMessages),
		maxBytes:  cfg.MaxBytes,
		arena:     make([]byte, min(minArenaLen, cfg.MaxBytes)),
		log:       make([]entry, min(minLogLen, nextPow2(uint64(cfg.MaxMessages)))),
		sessions:  make([]cacheSession, cfg.MaxSessions),
		bySession: make(map[wire.Session]int, cfg.MaxSessions),
		lastSlot:  -1,
	}
}

// SentPacket stores a copy of every message of a downstream packet. It is
// the publisher's Sink hook: pkt is only read during the call. Heartbeats
// and end-of-session packets are ignored, packets that do not parse are
// counted (CacheStats.BadPackets) and ignored. Messages follow the
// contiguity rule of Add. It does not allocate once the cache has grown to
// its working size.
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
	idx := ss.idx // reuse the evicted session's index only if it is small
	if len(idx) != minIdxLen {
		idx = make([]uint64, minIdxLen)
	}
	*ss = cacheSession{id: s, live: true, idx: idx, lastWrite: c.writes}
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
			if len(ss.idx) > minIdxLen { // a restart is rare: give back a large index
				ss.idx = make([]uint64, minIdxLen)
			}
		}
		ss.first, ss.next = seq, seq
	}
	n := uint64(len(msg))
	start := c.reserve(n)
	if c.gt-c.gh == uint64(len(c.log)) {
		c.resizeLog(2 * len(c.log))
	}
	// reserve may have evicted this session's oldest messages; first and
	// next are still right, and the count can only have shrunk.
	if uint64(ss.next-ss.first) == uint64(len(ss.idx)) {
		c.resizeIdx(ss, 2*len(ss.idx))
	}
	p := start % uint64(len(c.arena))
	copy(c.arena[p:p+n], msg)
	c.log[c.gt&uint64(len(c.log)-1)] = entry{pos: start, n: uint16(n), slot: uint16(slot)}
	ss.idx[uint64(seq)&uint64(len(ss.idx)-1)] = c.gt
	c.gt++
	c.tail = start + n
	ss.next = seq + 1
	c.writes++
	ss.lastWrite = c.writes
	c.lastSlot = slot
	c.st.Added++
}

// reserve makes room for one message of n bytes, growing the arena or
// evicting the oldest messages, and returns its byte position.
func (c *Cache) reserve(n uint64) uint64 {
	for {
		size := uint64(len(c.arena))
		if n > size {
			c.growArena(n)
			continue
		}
		start := c.tail
		if off := start % size; off+n > size {
			start += size - off // skip the tail of the arena: messages never wrap
		}
		head := start
		if c.gh < c.gt {
			head = c.log[c.gh&uint64(len(c.log)-1)].pos
		}
		overBytes := start+n-head > size
		if !overBytes && c.gt-c.gh < c.maxMsgs {
			return start
		}
		if overBytes && len(c.arena) < c.maxBytes {
			c.growArena(n)
			continue
		}
		c.evictOldest()
	}
}

// evictOldest drops the oldest message of the log.
func (c *Cache) evictOldest() {
	e := c.log[c.gh&uint64(len(c.log)-1)]
	ss := &c.sessions[e.slot]
	if ss.live && ss.first < ss.next && ss.idx[uint64(ss.first)&uint64(len(ss.idx)-1)] == c.gh {
		ss.first++
		if len(ss.idx) > minIdxLen && uint64(ss.next-ss.first)*4 <= uint64(len(ss.idx)) {
			c.resizeIdx(ss, len(ss.idx)/2)
		}
	}
	c.gh++
	c.st.Evicted++
	if c.gh == c.gt {
		c.tail = 0 // empty: start again at the arena's beginning
	}
}

// growArena doubles the arena (at least to hold n bytes, at most
// maxBytes) and packs the held messages at its beginning.
func (c *Cache) growArena(n uint64) {
	size := max(2*len(c.arena), int(n))
	size = min(size, c.maxBytes)
	na := make([]byte, size)
	old := uint64(len(c.arena))
	var p uint64
	mask := uint64(len(c.log) - 1)
	for g := c.gh; g < c.gt; g++ {
		e := &c.log[g&mask]
		src := e.pos % old
		copy(na[p:], c.arena[src:src+uint64(e.n)])
		e.pos = p
		p += uint64(e.n)
	}
	c.arena = na
	c.tail = p
}

func (c *Cache) resizeLog(n int) {
	nl := make([]entry, n)
	om, nm := uint64(len(c.log)-1), uint64(n-1)
	for g := c.gh; g < c.gt; g++ {
		nl[g&nm] = c.log[g&om]
	}
	c.log = nl
}

func (c *Cache) resizeIdx(ss *cacheSession, n int) {
	ni := make([]uint64, n)
	om, nm := uint64(len(ss.idx)-1), uint64(n-1)
	for q := ss.first; q < ss.next; q++ {
		ni[uint64(q)&nm] = ss.idx[uint64(q)&om]
	}
	ss.idx = ni
}

// message returns the bytes of cached message seq of ss (first <= seq <
// next). They alias the arena: valid only while c.mu is held.
func (c *Cache) message(ss *cacheSession, seq wire.Seq) []byte {
	g := ss.idx[uint64(seq)&uint64(len(ss.idx)-1)]
	e := c.log[g&uint64(len(c.log)-1)]
	p := e.pos % uint64(len(c.arena))
	end := p + uint64(e.n)
	return c.arena[p:end:end]
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
	if c.gh < c.gt {
		st.Bytes = c.tail - c.log[c.gh&uint64(len(c.log)-1)].pos
	}
	st.ArenaBytes = uint64(len(c.arena))
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
