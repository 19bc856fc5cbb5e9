package retransmit

import (
	"hash/maphash"
	"math"
	"net/netip"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/wire"
)

// deferred is a request held back because the buckets could not pay for
// its first packet: it is answered, in order, as they refill.
type deferred struct {
	at        monotime.Time // when it was held
	session   wire.Session
	seq       wire.Seq
	count     int
	from      netip.AddrPort
	src       netip.Addr
	multicast bool
}

// laterScan bounds the held-back requests looked at per wake-up, so that
// one wake-up costs little however many are held. laterShare: one
// requester address (IPv6: /64) holds at most 1/laterShare of the queue,
// so that a flood from a few addresses cannot fill it and shut out the
// others' recovery.
const (
	laterScan  = 256
	laterShare = 4
)

// hold keeps a request the buckets could not pay for, to be answered when
// they refill, and confirms it at once (wire.ConfirmLater, with the time
// until the buckets pay for everything held before it), so that its
// requester and, on the repair group, everyone missing the same range
// wait for it instead of asking again. It reports false when the queue is
// full (the request is then refused).
func (h *handler) hold(now monotime.Time, s wire.Session, seq wire.Seq, count int, from netip.AddrPort, src netip.Addr, multicast bool) bool {
	rq := h.reqs.requester(now, requesterKey(src))
	if len(h.later) >= h.maxLater || rq.held >= max(h.maxLater/laterShare, 1) {
		return false
	}
	rq.held++
	h.later = append(h.later, deferred{at: now, session: s, seq: seq, count: count, from: from, src: src, multicast: multicast})
	h.st.deferred.Add(1)
	// Every held request costs about one packet: the answer leaves when
	// the slower of the two buckets has paid for those before it.
	payload := float64(h.cfg.payloadUni)
	if multicast {
		payload = float64(h.cfg.payloadMulti)
	}
	need := float64(len(h.later)) * payload
	wait := max(need-h.global.Tokens(), 0) / h.global.Rate()
	if rb := &rq.b; rb.Limited() {
		wait = max(wait, max(float64(rq.held)*payload-rb.Tokens(), 0)/rb.Rate())
	}
	after := uint32(min(wait*1e6, math.MaxUint32))
	h.confirm(now, wire.Confirm{Session: s, Seq: seq, Count: uint16(count), Kind: wire.ConfirmLater, After: after}, from, multicast)
	return true
}

// tellLater answers a request for messages the sources have not received
// yet (h.ahead) that hold could not keep, the held table or its host's
// share of it being full, with a confirm "later" it does not keep: the
// requester waits its retry interval from the confirm and asks again, as
// a held request's requester would if no answer came. Such requests are
// legitimate: a retransmitter that receives the feed itself (a rewinder,
// a recorder) and falls behind the subscribers it serves gets them by
// the thousand, and several subscribers on one host share its quarter
// of the table. Refused, they got nothing and looked like a dead
// retransmitter. It reports false when the global bucket cannot pay for
// the confirm (the request is then refused): a confirm costs what a held
// request's does, so the bound on bytes out per request holds, and
// nothing is kept per request.
func (h *handler) tellLater(now monotime.Time, s wire.Session, seq wire.Seq, count int, from netip.AddrPort, multicast bool) bool {
	if !h.confirm(now, wire.Confirm{Session: s, Seq: seq, Count: uint16(count), Kind: wire.ConfirmLater}, from, multicast) {
		return false
	}
	h.st.toldLater.Add(1)
	return true
}

// serveLater answers the held-back requests the buckets can pay for now,
// oldest first (a requester whose own bucket is dry does not hold up the
// others), and returns when to try again: zero when nothing is held.
func (h *handler) serveLater(now monotime.Time) monotime.Time {
	if len(h.later) == 0 {
		return 0
	}
	h.global.Refill(now)
	out, i := 0, 0
	for ; i < len(h.later) && i < laterScan; i++ {
		d := h.later[i]
		msgs, r := h.answerConfirmed(now, d.session, d.seq, d.count, d.from, d.src, d.multicast)
		wait := msgs == 0 && h.keepWaiting(now, d, r)
		if !wait {
			if rq := h.reqs.requester(now, requesterKey(d.src)); rq.held > 0 {
				rq.held--
			}
		}
		switch {
		case msgs > 0:
			h.st.deferredAnswered.Add(1)
			h.answered(now, d.session, d.seq, d.count, msgs)
			continue
		case wait:
			h.later[out] = d // still waiting
			out++
			if !h.global.Has(wire.HeaderLen + wire.MsgLenLen) {
				i++
				goto done // nobody can be paid for: stop looking
			}
			continue
		case !h.known(d.session):
			h.refuse(ReasonUnknownSession) // never seen within aheadHold
		default:
			// Gone from the sources meanwhile (evicted), or failed.
			h.refuse(r)
		}
	}
done:
	out += copy(h.later[out:], h.later[i:])
	h.later = h.later[:out]
	if out == 0 {
		return 0
	}
	// The global bucket pays for a packet after this long; a requester's
	// bucket may take longer, which the next wake-up finds.
	payload := float64(max(h.cfg.payloadUni, h.cfg.payloadMulti))
	wait := time.Duration(max(payload-h.global.Tokens(), 0) / h.global.Rate() * float64(time.Second))
	return now.Add(max(wait, laterMinWait))
}

// aheadHold is how long a request for messages the sources do not hold
// yet (at or past the next they expect, or of a session they have not
// seen yet) is held before it is refused: a subscriber can see a gap
// before a rewinder beside it has cached the packets after it, and asking
// at once is not an error. A second: the NAK deadline, past which the
// subscriber gives up anyway.
const aheadHold = time.Second

// aheadSpan bounds how far past the next expected sequence a request is
// taken as "not yet held" (a subscriber's whole pending set, nak's
// MaxPending default); farther is refused at once.
const aheadSpan = 1 << 16

// keepWaiting reports whether a held request that got nothing now (r)
// stays held: the buckets could not pay, or what it asks for is not held
// yet but may come (past what a source holds, or a session no source
// knows yet: a subscriber can see the first packets before a rewinder
// beside it), for up to aheadHold.
func (h *handler) keepWaiting(now monotime.Time, d deferred, r Reason) bool {
	switch {
	case r == ReasonRateLimited:
		return true
	case r != ReasonOutOfRange || now.Sub(d.at) >= aheadHold:
		return false
	}
	// Not yet held, or held since the answer was built (the source took
	// it in meanwhile): look again. Only a range the sources have let go
	// of (older than they hold) is refused at once.
	return !h.known(d.session) || h.ahead(d.session, d.seq) || !h.gone(d.session, d.seq)
}

// gone reports whether every source knowing s holds only sequences after
// seq: seq fell out of them (or never reached them before the oldest they
// kept).
func (h *handler) gone(s wire.Session, seq wire.Seq) bool {
	for _, src := range h.cfg.sources {
		if first, _, ok := src.Bounds(s); ok && seq >= first {
			return false
		}
	}
	return true
}

// ahead reports whether seq is at or past the next sequence a source
// expects for s: not held yet, rather than gone.
func (h *handler) ahead(s wire.Session, seq wire.Seq) bool {
	for _, src := range h.cfg.sources {
		if _, next, ok := src.Bounds(s); ok && seq >= next && seq-next < aheadSpan {
			return true
		}
	}
	return false
}

// laterMinWait is the shortest sleep between two looks at the held-back
// requests: a requester's bucket refills one packet in 70 µs at 20 MB/s.
const laterMinWait = 100 * time.Microsecond

// groupTable estimates how many subscribers ask this server for repairs:
// the distinct requesters (address and port: several subscriber processes
// may share a host) heard within groupWindow, in a fixed direct-mapped
// table (a collision undercounts by one). The count is sent in every
// confirm, where it sizes the subscribers' NAK back-off (NORM's GSIZE).
type groupTable struct {
	slots   []groupSlot
	seed    maphash.Seed
	last    uint16        // the latest count
	counted monotime.Time // when last was counted
}

type groupSlot struct {
	addr netip.AddrPort
	at   monotime.Time
}

const (
	groupSlots       = 1024
	groupWindow      = 10 * time.Second
	groupCountPeriod = 250 * time.Millisecond
)

func newGroupTable(n int) groupTable {
	return groupTable{slots: make([]groupSlot, nextPow2(uint64(n))), seed: maphash.MakeSeed(), last: 1}
}

// heard notes a request from a.
func (t *groupTable) heard(now monotime.Time, a netip.AddrPort) {
	b := a.Addr().As16()
	var k [18]byte
	copy(k[:], b[:])
	k[16], k[17] = byte(a.Port()>>8), byte(a.Port())
	sl := &t.slots[maphash.Bytes(t.seed, k[:])&uint64(len(t.slots)-1)]
	if sl.addr != a && sl.at != 0 && now.Sub(sl.at) < groupWindow {
		// Another live requester holds the slot: keep the older one
		// (both count once; the table undercounts by one).
		return
	}
	if sl.addr != a {
		t.counted = 0 // a new requester: count again at the next size
	}
	sl.addr, sl.at = a, now
}

// size is the number of requesters heard within groupWindow, at least 1,
// recounted at most every groupCountPeriod.
func (t *groupTable) size(now monotime.Time) uint16 {
	if t.counted != 0 && now.Sub(t.counted) < groupCountPeriod {
		return t.last
	}
	n := 0
	for i := range t.slots {
		if sl := &t.slots[i]; sl.at != 0 && now.Sub(sl.at) < groupWindow {
			n++
		}
	}
	t.last, t.counted = uint16(min(max(n, 1), math.MaxUint16)), now
	return t.last
}

// feedBudget lets the buckets follow the feed: the repair bandwidth a
// subscriber needs to catch up grows with the rate of what it lost, so
// fixed byte rates that suit a slow feed refuse legitimate recovery of a
// fast one. Every feedPeriod it measures the bytes the caches added (the
// feed's rate, smoothed) and raises the global rate to at least
// globalFeedFactor times that and each requester's to requesterFeedFactor
// times that, never below the configured rates. The bounds against
// amplification do not move: every answer is still at most one packet
// per request.
type feedBudget struct {
	baseGlobal, baseRequester float64
	burst                     time.Duration
	minBurst                  float64
	lastBytes                 uint64
	lastAt                    monotime.Time
	rate                      float64 // smoothed feed bytes/s
}

const (
	feedPeriod          = 100 * time.Millisecond
	globalFeedFactor    = 4
	requesterFeedFactor = 2
)

func newFeedBudget(now monotime.Time, sources []Source, global, requester float64, burst time.Duration, minBurst float64) feedBudget {
	return feedBudget{baseGlobal: global, baseRequester: requester, burst: burst, minBurst: minBurst,
		lastAt: now, lastBytes: fedBytes(sources)}
}

// fedBytes is the bytes the sources that count them were given.
func fedBytes(sources []Source) uint64 {
	var n uint64
	for _, s := range sources {
		if m, ok := s.(feedMeter); ok {
			n += m.Stats().AddedBytes
		}
	}
	return n
}

// feedMeter is a Source that counts the bytes it was given (*Cache).
type feedMeter interface{ Stats() CacheStats }

// tick measures the feed and rescales the buckets, every feedPeriod.
func (h *handler) tick(now monotime.Time) {
	b := &h.budget
	if now.Sub(b.lastAt) < feedPeriod {
		return
	}
	bytes := fedBytes(h.cfg.sources)
	secs := now.Sub(b.lastAt).Seconds()
	cur := float64(bytes-b.lastBytes) / secs
	if bytes < b.lastBytes {
		cur = 0
	}
	b.lastBytes, b.lastAt = bytes, now
	if cur > b.rate {
		b.rate = cur // rise at once: a burst of loss follows a burst of feed
	} else {
		b.rate += (cur - b.rate) / 8
	}
	h.st.feedRate.Store(uint64(b.rate))
	g := max(b.baseGlobal, globalFeedFactor*b.rate)
	r := max(b.baseRequester, requesterFeedFactor*b.rate)
	h.global.Refill(now)
	h.global.SetRate(g, max(g*b.burst.Seconds(), b.minBurst))
	h.reqs.rate, h.reqs.burst = r, max(r*b.burst.Seconds(), b.minBurst)
}
