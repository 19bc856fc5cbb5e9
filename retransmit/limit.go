package retransmit

import (
	"hash/maphash"
	"net/netip"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/internal/ratelimit"
	"github.com/mdbus/mdbus/wire"
)

// bucket is a token bucket of bytes. The server never lets one go into
// debt: it takes only what Has said is there, so the bytes taken between
// t0 and t1 are at most burst + rate*(t1-t0).
type bucket = ratelimit.Bucket

func newBucket(now monotime.Time, rate, burst float64) bucket {
	return ratelimit.New(now, rate, burst)
}

// requesterTable holds a token bucket per requester address, in a fixed
// set-associative table: an address hashes (with a random seed) to a set of
// requesterWays slots, and a new address takes the set's free or least
// recently used slot. It never allocates after construction. Losing a slot
// only hands the requester a fresh (full) bucket; the global bucket still
// bounds the total.
type requesterTable struct {
	slots []requester
	sets  uint64
	seed  maphash.Seed
	rate  float64
	burst float64
}

const requesterWays = 4

type requester struct {
	addr  netip.Addr
	used  monotime.Time
	inUse bool
	b     bucket
	held  int // requests of this requester held back (handler.later)
}

func newRequesterTable(n int, rate, burst float64) requesterTable {
	sets := uint64(nextPow2(uint64(max(n, requesterWays)) / requesterWays))
	return requesterTable{
		slots: make([]requester, sets*requesterWays),
		sets:  sets,
		seed:  maphash.MakeSeed(),
		rate:  rate,
		burst: burst,
	}
}

// get returns the bucket of addr, refilled to now.
func (t *requesterTable) get(now monotime.Time, addr netip.Addr) *bucket {
	return &t.requester(now, addr).b
}

// requester returns the entry of addr, its bucket refilled to now.
func (t *requesterTable) requester(now monotime.Time, addr netip.Addr) *requester {
	a16 := addr.As16()
	set := (maphash.Bytes(t.seed, a16[:]) & (t.sets - 1)) * requesterWays
	ways := t.slots[set : set+requesterWays]
	victim := &ways[0]
	for i := range ways {
		r := &ways[i]
		if r.inUse && r.addr == addr {
			r.used = now
			r.b.Refill(now)
			r.b.SetRate(t.rate, t.burst) // the feed may have moved them
			return r
		}
		if victim.inUse && (!r.inUse || r.used < victim.used) {
			victim = r
		}
	}
	*victim = requester{addr: addr, used: now, inUse: true, b: newBucket(now, t.rate, t.burst)}
	return victim
}

// coalesceKey identifies a request after capping.
type coalesceKey struct {
	session wire.Session
	seq     wire.Seq
	count   int
}

type coalesceEntry struct {
	key       coalesceKey
	at        monotime.Time
	from      netip.AddrPort
	multicast bool
	used      bool
}

// coalesceTable remembers recent answers in a fixed direct-mapped table (a
// colliding key overwrites: coalescing is best effort, and a miss only
// means one more answer within the rate limits).
type coalesceTable struct {
	slots  []coalesceEntry
	seed   maphash.Seed
	window monotime.Time
}

func newCoalesceTable(n int, window time.Duration) coalesceTable {
	return coalesceTable{
		slots:  make([]coalesceEntry, nextPow2(uint64(max(n, 1)))),
		seed:   maphash.MakeSeed(),
		window: monotime.Time(window),
	}
}

func (t *coalesceTable) slot(k coalesceKey) *coalesceEntry {
	var b [wire.SessionLen + 8 + 4]byte
	copy(b[:], k.session[:])
	s, c := uint64(k.seq), uint32(k.count)
	for i := range 8 {
		b[wire.SessionLen+i] = byte(s >> (8 * i))
	}
	for i := range 4 {
		b[wire.SessionLen+8+i] = byte(c >> (8 * i))
	}
	return &t.slots[maphash.Bytes(t.seed, b[:])&uint64(len(t.slots)-1)]
}

// recent returns the entry of k if it was answered within the window.
func (t *coalesceTable) recent(now monotime.Time, k coalesceKey) *coalesceEntry {
	if t.window <= 0 {
		return nil
	}
	e := t.slot(k)
	if !e.used || e.key != k || now-e.at >= t.window {
		return nil
	}
	return e
}

func (t *coalesceTable) record(now monotime.Time, k coalesceKey, from netip.AddrPort, multicast bool) {
	if t.window <= 0 {
		return
	}
	*t.slot(k) = coalesceEntry{key: k, at: now, from: from, multicast: multicast, used: true}
}
