package retransmit

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/mdbus/mdbus/internal/validpkt"
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
	// maxRuns is how many separate ranges a session holds: a jump longer
	// than maxHole starts a new range, and beyond maxRuns the oldest range
	// goes, so a far jump never costs index memory for what it skipped.
	maxRuns = 4
	// maxHole is the longest jump kept inside a range as a hole (index
	// slots marked noEntry, 8 bytes per skipped sequence); it is the
	// largest gap a subscriber tracks by default (nak.DefaultMaxPending).
	maxHole = 1 << 16
	// noEntry marks an index slot of a hole: a sequence not held.
	noEntry = math.MaxUint64
)

// CacheConfig bounds a Cache. The zero value of each field is its default.
// The bounds hold for the Cache as a whole, across all its sessions. A
// negative value is invalid: Validate says which field; the roles that
// take a CacheConfig in their own configuration refuse it with their
// configuration error. NewCache, which returns no error, takes a negative
// value as zero (the default).
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

// Validate returns an error wrapping ErrConfig that names the first
// negative field of c, nil when c is valid.
func (c CacheConfig) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"MaxMessages", c.MaxMessages}, {"MaxBytes", c.MaxBytes}, {"MaxSessions", c.MaxSessions}} {
		if f.v < 0 {
			return fmt.Errorf("%w: cache %s %d: want a positive value (0: the default)", ErrConfig, f.name, f.v)
		}
	}
	return nil
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
	// dropped ranges, incarnations and evicted sessions whose room is not
	// reclaimed yet.
	Messages uint64
	// Bytes is the part of the byte chunks in use (message blocks, each
	// message's bytes and its 2-byte length, plus the unused tails of
	// chunks skipped where a write would not fit).
	Bytes uint64
	// ArenaBytes is the size of all byte chunks allocated now.
	ArenaBytes uint64
	// Sessions is the number of sessions tracked.
	Sessions int
	// Added counts messages stored; AddedBytes their bytes (the feed's
	// rate, which the Server's budgets follow).
	Added, AddedBytes uint64
	// Evicted counts messages dropped to make room, oldest first (a
	// packet stored by SentPacket goes as a whole).
	Evicted uint64
	// Duplicates counts messages ignored because their sequence was
	// already cached or older (SentPacket: because they equal the bytes
	// held for their sequence).
	Duplicates uint64
	// Jumps counts messages that skipped sequences (lost before they
	// reached the cache): the history before a jump stays held.
	Jumps uint64
	// RangesDropped counts ranges of a session dropped, with their
	// messages, because the session held maxRuns ranges apart (4) and
	// jumped far again.
	RangesDropped uint64
	// Incarnations counts new incarnations of a session (SentPacket saw
	// its sequence go down, or Restart was called): the previous
	// incarnation's messages were dropped.
	Incarnations uint64
	// SessionsEvicted counts sessions dropped to admit a new one.
	SessionsEvicted uint64
	// BadPackets counts packets given to SentPacket that did not parse.
	BadPackets uint64
	// BadMessages counts messages refused by Add: sequence 0, the largest
	// sequence, or longer than 0xFFFF bytes.
	BadMessages uint64
}

// entry is one write in the log: count consecutive messages of one
// session, from sequence seq on, stored as MoldUDP64 message blocks (a
// 2-byte length, then the bytes) in chunks[chunk].buf[off:off+size]. A
// packet given to SentPacket is one entry, so storing and evicting cost
// one entry per packet, not per message; Add writes one-message entries.
type entry struct {
	seq   wire.Seq // sequence of the first message
	off   uint32   // offset in the chunk
	chunk uint32   // chunk number
	skip  uint32   // bytes skipped after the entry, before the next one (a chunk's tail)
	size  uint32   // bytes of the message blocks
	count uint16   // messages
	slot  uint16   // session slot that stored it
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

// fill sets elements [from, to) to v, making their blocks held (from is
// at or above the window's top element, as for hold).
func (b *blocks[T]) fill(from, to uint64, v T, pool *[]*[blockLen]T) {
	for i := from; i < to; {
		if !b.held(i) {
			b.hold(i, pool)
		}
		blk := b.tab[(i/blockLen)&uint64(len(b.tab)-1)]
		end := i + min(to-i, blockLen-i%blockLen) // the block's end may be 2^64: no overflow
		for k := i % blockLen; i < end; i, k = i+1, k+1 {
			blk[k] = v
		}
	}
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

// run is one range of a session: the sequences [first, next) and the
// index from sequence to log number. first is held (or first == next);
// inside the range a sequence whose slot is noEntry is a hole, not held.
type run struct {
	first, next wire.Seq       // next == 0 before the first message
	idx         blocks[uint64] // log number of the entry holding sequence q at idx.at(q), for q in [first, next)
	logStart    uint64         // log number of the range's first message: this session's entries before it are dead
}

// cacheSession is the state of one incarnation of a session: up to
// maxRuns ranges, oldest first, in a ring.
type cacheSession struct {
	id        wire.Session
	live      bool
	runs      [maxRuns]run
	head, n   int    // runs[head], ... the n ranges (n >= 1 while live)
	lastWrite uint64 // Cache.writes at the last store, for LRU eviction of sessions
}

func (ss *cacheSession) run(i int) *run { return &ss.runs[uint(ss.head+i)%maxRuns] }
func (ss *cacheSession) oldest() *run   { return ss.run(0) }
func (ss *cacheSession) newest() *run   { return ss.run(ss.n - 1) }

// find returns the range holding seq and its log number; nil when seq is
// not held.
func (ss *cacheSession) find(seq wire.Seq) (*run, uint64) {
	for i := range ss.n {
		r := ss.run(i)
		if seq >= r.first && seq < r.next {
			if g := *r.idx.at(uint64(seq)); g != noEntry {
				return r, g
			}
			return nil, 0
		}
	}
	return nil, 0
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
	msgs    uint64              // messages in the entries [gh, gt)
	logFree []*[blockLen]entry  // released log blocks
	idxFree []*[blockLen]uint64 // released index blocks, shared by the sessions

	sessions  []cacheSession
	bySession map[wire.Session]int
	lastSlot  int // slot of the last write, a fast path for SentPacket
	writes    uint64
	span      uint64 // index slots in use: the sum of next-first over all ranges
	maxSpan   uint64 // bound on span: holes cost index memory, so they count against MaxMessages

	st CacheStats

	// The servers AfterSend polls (Server.poll), copied on write under
	// pollMu; sent counts the packets since the last poll.
	pollMu  sync.Mutex
	pollers atomic.Pointer[[]*Server]
	sent    atomic.Uint32
}

// NewCache returns an empty Cache bounded by cfg. It allocates no message
// storage until messages come.
func NewCache(cfg CacheConfig) *Cache {
	cfg = cfg.withDefaults()
	return &Cache{
		maxMsgs:   uint64(cfg.MaxMessages),
		maxBytes:  uint64(cfg.MaxBytes),
		maxSpan:   2*uint64(cfg.MaxMessages) + maxHole,
		sessions:  make([]cacheSession, cfg.MaxSessions),
		bySession: make(map[wire.Session]int, cfg.MaxSessions),
		lastSlot:  -1,
	}
}

// SentPacket stores a copy of every message of a downstream packet. It is
// the publisher's Sink hook: pkt is only read during the call. Heartbeats
// and end-of-session packets are ignored, packets that do not parse are
// counted (CacheStats.BadPackets) and ignored.
//
// A publisher's Sink sees its packets in sequence order, so a packet whose
// sequence is below the session's next one is either the same packet
// offered again (every message equal to the bytes held: a duplicate) or a
// new incarnation of the session, a publisher restarted under the same
// name: the previous incarnation's messages are dropped before the packet
// is stored, so they are never served as the new one's. Sequences above
// the next one are a jump, as in Add. Its cost is constant per message: at
// most one byte chunk, log block and index block allocated while the cache
// grows, nothing once it has reached its working size.
func (c *Cache) SentPacket(pkt []byte) {
	c.sentPacket(pkt)
	if c.pollers.Load() != nil {
		c.sent.Add(1)
	}
}

// AfterSend is told by a publisher (publisher.AfterSendSink) that the
// packets it offered were handed to the kernel. Once at least pollEvery
// packets came since the last poll, while re-requests come, it answers
// those queued at the servers the cache is a Source of, on the
// publisher's goroutine (see "Who reads the requests" in the package
// documentation); after the send, so the packets never wait for it.
func (c *Cache) AfterSend() {
	ps := c.pollers.Load()
	if ps == nil || c.sent.Load() < pollEvery {
		return
	}
	c.sent.Store(0)
	for _, s := range *ps {
		s.poll()
	}
}

// pollEvery is how many packets SentPacket takes between polls of the
// request sockets of the servers that serve the cache (Server.poll).
const pollEvery = 8

// pollSource is a Source that polls the servers serving it (Cache).
type pollSource interface {
	addPoller(s *Server)
	removePoller(s *Server)
}

// addPoller makes AfterSend poll s once pollEvery packets came.
func (c *Cache) addPoller(s *Server) {
	c.pollMu.Lock()
	defer c.pollMu.Unlock()
	var ps []*Server
	if old := c.pollers.Load(); old != nil {
		ps = append(ps, *old...)
	}
	ps = append(ps, s)
	c.pollers.Store(&ps)
}

// removePoller undoes addPoller.
func (c *Cache) removePoller(s *Server) {
	c.pollMu.Lock()
	defer c.pollMu.Unlock()
	old := c.pollers.Load()
	if old == nil {
		return
	}
	var ps []*Server
	for _, p := range *old {
		if p != s {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		c.pollers.Store(nil)
		return
	}
	c.pollers.Store(&ps)
}

// SentValidPacket is SentPacket for a packet that this module's publisher
// encoded itself (publisher.Publication calls it in SentPacket's stead):
// the header's fields come beside the message blocks, and the walk over
// every length prefix that SentPacket must make before it relies on them
// is skipped. Only code in this module can make a validpkt.Packet.
func (c *Cache) SentValidPacket(p validpkt.Packet) {
	if p.Count == wire.CountHeartbeat || p.Count == wire.CountEndOfSession {
		return
	}
	if (wire.Header{Session: p.Session, Seq: p.Seq, Count: p.Count}).CheckData() != nil {
		c.mu.Lock()
		c.st.BadPackets++
		c.mu.Unlock()
	} else {
		c.sentMessages(p.Session, p.Seq, p.Count, p.Body)
	}
	if c.pollers.Load() != nil {
		c.sent.Add(1)
	}
}

func (c *Cache) sentPacket(pkt []byte) {
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
	c.sentMessages(p.Session, p.Seq, p.Count, p.Body())
}

// sentMessages stores the count messages of a validated packet of session
// s, the first numbered first, whose blocks are body.
func (c *Cache) sentMessages(s wire.Session, first wire.Seq, count uint16, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	slot := c.slotFor(s)
	it := wire.MessagesOf(body, first)
	if nr := c.sessions[slot].newest(); nr.next != 0 && first < nr.next {
		if !c.heldEqual(slot, wire.MessagesOf(body, first)) {
			c.restart(slot, 0)
		} else {
			// The part already held is a duplicate; the rest is stored.
			k := min(uint64(nr.next-first), uint64(count))
			it.Skip(int(k))
			c.st.Duplicates += k
		}
	}
	seq, body := it.Rest()
	k := uint64(count) - uint64(seq-first)
	if k == 0 {
		return
	}
	if k > c.maxMsgs {
		// More messages than the cache holds: one entry each, so that the
		// bound evicts them one by one.
		for {
			msg, seq, ok := it.Next()
			if !ok {
				return
			}
			c.put(slot, seq, 1, nil, msg)
		}
	}
	c.put(slot, seq, uint16(k), body, nil)
}

// heldEqual reports whether every message that it walks below the
// session's next sequence is held with the same bytes. c.mu is held.
func (c *Cache) heldEqual(slot int, it wire.MessageIter) bool {
	ss := &c.sessions[slot]
	next := ss.newest().next
	var cur cursor
	for {
		msg, seq, ok := it.Next()
		if !ok || seq >= next {
			return true
		}
		r, g := ss.find(seq)
		if r == nil || !bytes.Equal(c.message(g, seq, &cur), msg) {
			return false
		}
	}
}

// Add stores a copy of msg as message seq of session s (the rewinder's
// path: one message as a subscriber delivers it).
//
// Messages of a session come in sequence order. A message whose sequence
// is below the next expected one is a duplicate and is ignored. A sequence
// above it is a jump over messages lost before they reached the cache: the
// messages held before it stay held, and the skipped sequences are a hole
// that is never answered (a jump longer than 65,536 sequences starts a
// separate range instead; a session keeps at most 4 ranges, dropping the
// oldest). A new incarnation of the session (a publisher restarted under
// the same name) must be announced with Restart, since Add cannot tell it
// from a duplicate. Sequence 0, the largest sequence and messages longer
// than 0xFFFF bytes are refused (CacheStats.BadMessages).
func (c *Cache) Add(s wire.Session, seq wire.Seq, msg []byte) {
	c.mu.Lock()
	if seq == wire.InvalidSeq || seq == math.MaxUint64 || len(msg) > math.MaxUint16 {
		c.st.BadMessages++
	} else {
		c.put(c.slotFor(s), seq, 1, nil, msg)
	}
	c.mu.Unlock()
}

// Restart tells the cache that session s has a new incarnation (its
// publisher restarted under the same name) whose next message is first (0:
// whichever comes next). Every message held for s is dropped at once, so
// that none is served as the new incarnation's, and the session's range
// starts empty at first.
func (c *Cache) Restart(s wire.Session, first wire.Seq) {
	c.mu.Lock()
	c.restart(c.slotFor(s), first)
	c.mu.Unlock()
}

// restart drops all the ranges of a session and starts it empty at first.
// c.mu is held.
func (c *Cache) restart(slot int, first wire.Seq) {
	ss := &c.sessions[slot]
	c.dropRuns(ss)
	ss.head, ss.n = 0, 1
	*ss.run(0) = run{first: first, next: first, idx: ss.run(0).idx, logStart: c.gt}
	c.st.Incarnations++
}

// dropRuns gives back the index blocks of all the ranges of ss; their
// messages stay in the log as dead entries. c.mu is held.
func (c *Cache) dropRuns(ss *cacheSession) {
	for i := range ss.n {
		c.dropRun(ss.run(i))
	}
}

func (c *Cache) dropRun(r *run) {
	if r.next > r.first {
		c.span -= uint64(r.next - r.first)
	}
	r.idx.reset(&c.idxFree)
	r.first, r.next = 0, 0
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
		c.dropRuns(ss)
	}
	ss.id, ss.live, ss.lastWrite = s, true, c.writes
	ss.head, ss.n = 0, 1 // the index tables stay for reuse; their blocks went back to the pool
	*ss.run(0) = run{idx: ss.run(0).idx, logStart: c.gt}
	c.bySession[s] = slot
	c.st.Sessions++
	c.lastSlot = slot
	return slot
}

// put stores count consecutive messages of a session from sequence seq
// on as one entry: the message blocks body (a packet's, validated), or the
// single message msg when body is nil. The sequences are valid: seq is
// not 0 and seq+count-1 is below the largest. c.mu is held.
func (c *Cache) put(slot int, seq wire.Seq, count uint16, body, msg []byte) {
	ss := &c.sessions[slot]
	r := ss.newest()
	switch {
	case r.next != 0 && seq < r.next:
		c.st.Duplicates += uint64(count)
		return
	case r.next == 0 || r.first == r.next:
		// An empty range starts at the first message it gets.
		r.idx.reset(&c.idxFree)
		r.first, r.next, r.logStart = seq, seq, c.gt
	case seq > r.next && uint64(seq-r.next) <= maxHole:
		// A hole: its slots say not held, the range goes on.
		c.st.Jumps++
		r.idx.fill(uint64(r.next), uint64(seq), noEntry, &c.idxFree)
		c.span += uint64(seq - r.next)
		r.next = seq
	case seq > r.next:
		// A far jump: a new range, the held ones stay.
		c.st.Jumps++
		if ss.n == maxRuns {
			c.dropRun(ss.oldest())
			ss.head = (ss.head + 1) % maxRuns
			ss.n--
			c.st.RangesDropped++
		}
		ss.n++
		r = ss.newest()
		r.idx.reset(&c.idxFree)
		r.first, r.next, r.logStart = seq, seq, c.gt
	}
	size := uint32(len(body))
	if body == nil {
		size = wire.MsgLenLen + uint32(len(msg))
	}
	ch, off, gap := c.reserve(size, uint64(count))
	// reserve may have evicted this session's oldest messages (even all
	// of r's: then r.first == r.next == seq still holds); next is still
	// right.
	dst := c.chunks[ch].buf[off : off+size]
	if body != nil {
		copy(dst, body)
		c.st.AddedBytes += uint64(len(body)) - wire.MsgLenLen*uint64(count)
	} else {
		binary.BigEndian.PutUint16(dst, uint16(len(msg)))
		copy(dst[wire.MsgLenLen:], msg)
		c.st.AddedBytes += uint64(len(msg))
	}
	if c.gh == c.gt {
		c.used = uint64(size) // the skipped tail before the oldest entry does not count
	} else {
		c.used += uint64(gap) + uint64(size)
		if gap > 0 {
			c.log.at(c.gt - 1).skip = gap
		}
	}
	c.tc, c.toff = ch, off+size
	if !c.log.held(c.gt) {
		c.log.hold(c.gt, &c.logFree)
	}
	*c.log.at(c.gt) = entry{seq: seq, off: off, chunk: ch, size: size, count: count, slot: uint16(slot)}
	r.idx.fill(uint64(seq), uint64(seq)+uint64(count), c.gt, &c.idxFree)
	c.gt++
	c.msgs += uint64(count)
	r.next = seq + wire.Seq(count)
	c.span += uint64(count)
	c.writes++
	ss.lastWrite = c.writes
	c.lastSlot = slot
	c.st.Added += uint64(count)
	// Holes cost index slots: keep them bounded with the messages.
	for c.span > c.maxSpan && c.gt-c.gh > 1 {
		c.evictOldest()
	}
}

// reserve makes room for an entry of n bytes and k messages (at most
// maxMsgs), adding a chunk or evicting the oldest entries, and returns
// where it goes and how many bytes of the tail's chunk it skips. c.mu is
// held.
//
// The chunks form a ring that the tail walks around; the live messages
// are the stretch of the ring from the oldest one's start to the tail,
// c.used bytes long, so the free stretch after the tail is arenaBytes -
// used bytes. A message never straddles two chunks: when it does not fit
// in the rest of the tail's chunk, that rest is skipped and counts as
// used. While the chunks total less than maxBytes, the tail only enters a
// chunk that holds no live message: when the next one still does, a new
// chunk is linked in after the tail's, in the free stretch, and nothing
// moves. At maxBytes the ring is fixed and the oldest entries are evicted
// until the new one fits.
func (c *Cache) reserve(n uint32, k uint64) (ch, off, gap uint32) {
	for c.gh < c.gt && c.msgs+k > c.maxMsgs {
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

// evictOldest drops the oldest entry of the log. c.mu is held.
func (c *Cache) evictOldest() {
	e := c.log.at(c.gh)
	size := uint64(e.size) + uint64(e.skip)
	// The log holds a session's ranges in order, after its older (dead)
	// ranges and those of the slot's former sessions: an entry from the
	// oldest range's logStart on holds that range's first messages.
	if ss := &c.sessions[e.slot]; ss.live {
		if r := ss.oldest(); c.gh >= r.logStart && r.first < r.next {
			c.advance(ss, r, e.seq+wire.Seq(e.count))
		}
	}
	c.gh++
	c.msgs -= uint64(e.count)
	c.st.Evicted += uint64(e.count)
	if c.gh == c.gt {
		c.used, c.toff = 0, 0 // empty: start again at the tail chunk's beginning
	} else {
		c.used -= size
	}
	if c.gh%blockLen == 0 {
		c.log.releaseBelow(c.gh, &c.logFree)
	}
}

// advance drops the first messages of r, the oldest range of ss, up to
// sequence end, and the hole after them; an emptied range goes when a
// newer one exists. c.mu is held.
func (c *Cache) advance(ss *cacheSession, r *run, end wire.Seq) {
	q := min(max(end, r.first+1), r.next)
	for q < r.next && *r.idx.at(uint64(q)) == noEntry {
		q++
	}
	c.span -= uint64(q - r.first)
	r.first = q
	r.idx.releaseBelow(uint64(q), &c.idxFree)
	if r.first == r.next && ss.n > 1 {
		c.dropRun(r)
		ss.head = (ss.head + 1) % maxRuns
		ss.n--
	}
}

// cursor remembers where the last message looked up lies in its entry,
// so that reading consecutive messages walks each entry once.
type cursor struct {
	g   uint64   // entry number, valid when ok
	seq wire.Seq // sequence of the message at pos
	pos uint32   // offset of its message block in the entry
	ok  bool
}

// message returns the bytes of message seq, held in log entry g. They
// alias a chunk: valid only while c.mu is held. cur speeds up reading
// messages in sequence order. The entry's blocks were validated when
// stored (a parsed packet, a packet this module's publisher encoded, or
// one message framed here), so the walk needs no checks.
func (c *Cache) message(g uint64, seq wire.Seq, cur *cursor) []byte {
	e := c.log.at(g)
	buf := c.chunks[e.chunk].buf[e.off : e.off+e.size]
	if !cur.ok || cur.g != g || cur.seq > seq {
		*cur = cursor{g: g, seq: e.seq, ok: true}
	}
	for ; cur.seq < seq; cur.seq++ {
		cur.pos += wire.MsgLenLen + uint32(binary.BigEndian.Uint16(buf[cur.pos:]))
	}
	start := cur.pos + wire.MsgLenLen
	end := start + uint32(binary.BigEndian.Uint16(buf[cur.pos:]))
	return buf[start:end:end]
}

// lookup returns the live session s. c.mu is held.
func (c *Cache) lookup(s wire.Session) *cacheSession {
	slot, ok := c.bySession[s]
	if !ok {
		return nil
	}
	return &c.sessions[slot]
}

// Bounds returns the range [first, next) of session s the cache spans;
// ok is false when the cache does not know s. A known session with nothing
// cached has first == next. The range may have holes (sequences lost
// before they reached the cache); NextHeld finds what is held.
func (c *Cache) Bounds(s wire.Session) (first, next wire.Seq, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ss := c.lookup(s)
	if ss == nil {
		return 0, 0, false
	}
	return ss.oldest().first, ss.newest().next, true
}

// NextHeld returns the smallest sequence at or after from that the cache
// holds for session s; ok is false when there is none. It skips holes in
// time bounded by the longest hole (65,536 sequences).
func (c *Cache) NextHeld(s wire.Session, from wire.Seq) (_ wire.Seq, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ss := c.lookup(s)
	if ss == nil {
		return 0, false
	}
	for i := range ss.n {
		r := ss.run(i)
		if r.first >= r.next || from >= r.next {
			continue
		}
		q := max(from, r.first)
		for q < r.next && *r.idx.at(uint64(q)) == noEntry {
			q++
		}
		if q < r.next {
			return q, true
		}
	}
	return 0, false
}

// AppendMessage appends a copy of cached message seq of session s to dst;
// ok is false when it is not cached. It looks the message up in constant
// time and does not allocate when dst has room.
func (c *Cache) AppendMessage(dst []byte, s wire.Session, seq wire.Seq) (_ []byte, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ss := c.lookup(s)
	if ss == nil {
		return dst, false
	}
	r, g := ss.find(seq)
	if r == nil {
		return dst, false
	}
	var cur cursor
	return append(dst, c.message(g, seq, &cur)...), true
}

// AppendPacket appends to dst one downstream packet (wire.Encoder) of
// session s whose first message is from, with as many consecutive cached
// messages as fit in payloadSize bytes, at most max; it stops before a
// sequence that is not held. It returns the extended dst and the number of
// messages in the packet: 0, with dst unchanged, when from is not cached.
// A cached message too large for payloadSize returns an error matching
// wire.ErrMessageTooLarge.
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
	if ss == nil {
		return dst, 0, nil
	}
	r, _ := ss.find(from)
	if r == nil {
		return dst, 0, nil
	}
	n := min(uint64(r.next-from), uint64(max), wire.MaxCount)
	var enc wire.Encoder
	enc.Reset(dst, s, from, payloadSize)
	k := uint64(0)
	var cur cursor
	for ; k < n; k++ {
		g := *r.idx.at(uint64(from) + k)
		if g == noEntry {
			break
		}
		msg := c.message(g, from+wire.Seq(k), &cur)
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
	st.Messages = c.msgs
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

var _ HoleySource = (*Cache)(nil)
