package nak

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/wire"
)

// entry is one tracked missing range with its timers. Pieces of a range
// split by partial fills are separate entries with the same timers.
type entry struct {
	from, to  wire.Seq
	firstSeen monotime.Time // when the gap was reported
	next      monotime.Time // when the next NAK is due
	interval  time.Duration // wait after the last NAK; 0 before the first
	asked     monotime.Time // when the last NAK was sent
	naks      uint32        // NAKs sent for this range
	start     bool          // the last NAK's request began at from
	doomed    bool          // declared lost at once (MaxPending rule); the next Poll reports it
	held      bool          // a confirm said its answer is held back: no round trip sample
	// clock is when the deadline started: when the gap was reported, or,
	// for a range that waited for room in the window (waited), when it
	// was first asked. A range waiting for the window has no deadline:
	// the subscriber's own pacing must not give up what the server would
	// still answer.
	clock  monotime.Time
	waited bool
}

func (e *entry) len() uint64 { return uint64(e.to - e.from) }

// LossDetector tracks the missing sequence ranges of one stream and decides
// when to ask for them again and when to give up. See the package
// documentation for the timing rules.
//
// A LossDetector is not safe for concurrent use: one goroutine, the one that
// owns the stream, calls all its methods. It keeps no reference to the
// slices passed to Poll or GiveUp. OnGap, OnReceived and Poll do not allocate
// once its internal slice has grown to the number of ranges in flight.
type LossDetector struct {
	cfg     Config
	gen     DelayGenerator // cfg.Generator; nil means uniform
	uniform UniformDelay

	entries []entry // sorted by from, disjoint, none empty
	pending uint64  // messages in entries that are not doomed
	doomed  uint64  // messages in doomed entries
	maxReq  uint64  // the largest request (SetMaxRequest), <= cfg.MaxRequest
	// retryFloor is the least wait after a NAK (SetRetryFloor): a retry
	// before the answer can be back only doubles the work of a slow path.
	retryFloor time.Duration

	// due is a lower bound of the earliest entry time (see at) whenever
	// entries is not empty; exact says it is that time.
	due   monotime.Time
	exact bool

	// rtt is the round trip the last OnReceived measured, wait the time
	// its range waited for its NAK; rttOK says it measured them (see
	// LastRTT).
	rtt, wait time.Duration
	rttOK     bool

	st Stats
}

// NewLossDetector returns an empty detector configured by cfg (zero fields
// take their defaults). Check cfg first: a negative field, which Check
// refuses, is taken here as zero.
func NewLossDetector(cfg Config) *LossDetector {
	cfg = cfg.withDefaults()
	d := &LossDetector{cfg: cfg, gen: cfg.Generator, exact: true, maxReq: uint64(cfg.MaxRequest)}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	d.uniform.init(cfg.Delay, seed)
	return d
}

// Config returns the configuration in use, defaults applied.
func (d *LossDetector) Config() Config { return d.cfg }

// at is when e next needs Poll: its next NAK or its deadline, whichever is
// first; at once for a doomed entry.
func (d *LossDetector) at(e *entry) monotime.Time {
	switch {
	case e.doomed:
		return e.firstSeen
	case e.naks == 0 && e.waited:
		return e.next
	}
	return min(e.next, e.clock.Add(d.cfg.Deadline))
}

// search returns the index of the first entry that ends after s.
func (d *LossDetector) search(s wire.Seq) int {
	lo, hi := 0, len(d.entries)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if d.entries[m].to <= s {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// delay draws the delay before a new gap's first NAK.
func (d *LossDetector) delay() time.Duration {
	var v time.Duration
	if d.gen != nil {
		v = d.gen.Delay()
	} else {
		v = d.uniform.Delay()
	}
	return min(max(v, 0), maxDuration)
}

// OnGap records that the messages of r were found missing at now (a packet
// or heartbeat showed a sequence beyond the next expected one). Parts of r
// already tracked keep their timers; the new parts form one gap with one
// random delay before its first NAK. If the new parts would take Pending
// above MaxPending, they are declared lost at once instead: the next Poll
// returns them as lost and they are never requested. An empty r is ignored.
func (d *LossDetector) OnGap(now monotime.Time, r Range) {
	if r.From >= r.To {
		return
	}
	i := d.search(r.From)
	// Count the messages of r not tracked yet.
	var n uint64
	cur := r.From
	for j := i; j < len(d.entries) && d.entries[j].from < r.To; j++ {
		if e := &d.entries[j]; e.from > cur {
			n += uint64(e.from - cur)
		}
		cur = d.entries[j].to
	}
	if cur < r.To {
		n += uint64(r.To - cur)
	}
	if n == 0 {
		return
	}
	d.st.Gaps++
	d.st.GapMessages += n
	e := entry{firstSeen: now, clock: now}
	if n > d.cfg.MaxPending-d.pending { // pending <= MaxPending always
		e.doomed = true
		e.next = now
		d.doomed += n
		d.st.Overflows++
		d.st.OverflowMessages += n
	} else {
		e.next = now.Add(d.delay())
		d.pending += n
	}
	if t := d.at(&e); len(d.entries) == 0 {
		d.due, d.exact = t, true
	} else if t < d.due {
		d.due = t
	}
	// Insert the new pieces between the tracked entries.
	cur = r.From
	j := i
	for j < len(d.entries) && d.entries[j].from < r.To {
		if d.entries[j].from > cur {
			e.from, e.to = cur, d.entries[j].from
			d.entries = slices.Insert(d.entries, j, e)
			j++
		}
		cur = d.entries[j].to
		j++
	}
	if cur < r.To {
		e.from, e.to = cur, r.To
		d.entries = slices.Insert(d.entries, j, e)
	}
}

// fill accounts for n messages of e arriving.
func (d *LossDetector) fill(e *entry, n uint64) {
	d.st.Filled += n
	if e.doomed {
		d.doomed -= n
		return
	}
	d.pending -= n
	if e.naks == 0 {
		d.st.Suppressed += n
	}
}

// OnReceived records that the messages of r arrived at now, as originals or
// repairs: they stop being tracked, so no NAK asks for them again. Pieces
// of a range left on either side keep its timers, but when r filled
// messages already asked for (and does not lie strictly inside one range:
// an answer starts where its request starts), what was asked for right
// after it is the rest of a partial answer: the ranges already asked for
// that follow r without a break, up to MaxRequest messages, are asked for
// again together Continue after the last such fill (see Config.Continue),
// since servers answer long requests one packet at a time. It returns how many
// tracked-missing messages r filled and the age (now minus first seen) of
// the oldest gap among them, for a recovery-time histogram; (0, 0) when r
// filled nothing. Duplicates and untracked messages are ignored.
func (d *LossDetector) OnReceived(now monotime.Time, r Range) (filled uint64, age time.Duration) {
	d.rttOK = false
	if r.From >= r.To {
		return 0, 0
	}
	i := d.search(r.From)
	if i == len(d.entries) || d.entries[i].from >= r.To {
		return 0, 0
	}
	if e := &d.entries[i]; e.naks == 1 && !e.held && !e.doomed && e.from <= r.From {
		// Asked once, answered: an unambiguous round trip (Karn's rule).
		d.rtt, d.rttOK = max(now.Sub(e.asked), 0), true
		d.wait = max(e.asked.Sub(e.firstSeen), 0)
	}
	if e := &d.entries[i]; e.from < r.From && e.to > r.To {
		// r lies strictly inside e: split it in two.
		n := uint64(r.To - r.From)
		d.fill(e, n)
		right := *e
		right.from, right.start = r.To, false
		e.to = r.From
		age = now.Sub(e.firstSeen)
		d.entries = slices.Insert(d.entries, i+1, right)
		return n, max(age, 0)
	}
	oldest := monotime.Time(math.MaxInt64)
	answer := false // r filled messages already asked for
	out, j := i, i
	for ; j < len(d.entries) && d.entries[j].from < r.To; j++ {
		e := d.entries[j]
		n := uint64(min(e.to, r.To) - max(e.from, r.From))
		d.fill(&e, n)
		filled += n
		oldest = min(oldest, e.firstSeen)
		answer = answer || e.naks > 0 && !e.doomed
		switch {
		case e.from < r.From: // left part stays (first entry only)
			e.to = r.From
		case e.to > r.To: // right part stays (last entry only)
			e.from, e.start = r.To, false
		default: // covered: removed
			if d.at(&e) <= d.due {
				d.exact = false
			}
			continue
		}
		d.entries[out] = e
		out++
	}
	d.entries = slices.Delete(d.entries, out, j)
	if answer {
		d.hurry(now, d.search(r.To), r.To)
	}
	return filled, max(now.Sub(oldest), 0)
}

// LastRTT returns the repair round trip the last OnReceived measured: the
// time from the only NAK of the range it filled first to its arrival. It
// reports false when that call measured none (the range was asked more
// than once, which makes the sample ambiguous; not asked yet; or held
// back by the server, see OnConfirm).
func (d *LossDetector) LastRTT() (time.Duration, bool) { return d.rtt, d.rttOK }

// LastWait returns, when LastRTT reports a round trip, how long the range
// it measured waited from being reported missing to its NAK (the back-off,
// the NAK delay and the time the NAK took to leave); false otherwise. The
// two split a recovery time into the subscriber's part and the
// retransmitter's and network's.
func (d *LossDetector) LastWait() (time.Duration, bool) { return d.wait, d.rttOK }

// hurry handles a partial answer that ended at from: the entries already
// asked for that follow from without a break, up to MaxRequest messages,
// are the rest of what was asked (a request joins adjacent ranges, and the
// server answered one packet of it). They are asked for again together,
// once the answer is over, after one random delay as for a new gap, so
// that they form one request again and the receivers of a multicast
// repair do not all ask at once. The server answered: their backoff
// starts again. k is the index of the first entry that ends after from.
func (d *LossDetector) hurry(now monotime.Time, k int, from wire.Seq) {
	var t monotime.Time
	for n := uint64(0); k < len(d.entries) && n < d.maxReq; k++ {
		e := &d.entries[k]
		if e.from != from || e.naks == 0 || e.doomed || e.start {
			// Not the rest of the request the answer began: a request
			// of its own, asked for apart, is not a partial answer.
			return
		}
		if n == 0 {
			t = now.Add(d.cfg.Continue + d.delay())
		}
		n += e.len()
		from = e.to
		e.interval = 0
		if t < e.next {
			e.next = t
			if t := d.at(e); t < d.due {
				d.due = t
			}
		}
	}
}

// Poll does the work due at now. It appends to reqs the ranges to ask for
// now, in sequence order, each at most MaxRequest (<= wire.MaxCount) long so
// that it fits one wire.Request (adjacent ranges due together are joined),
// and to lost the ranges given up now
// (deadline passed, or declared lost by the MaxPending rule), which it
// stops tracking. It returns the extended slices; with enough capacity it
// does not allocate. The caller sends the requests and reports the losses.
func (d *LossDetector) Poll(now monotime.Time, reqs, lost []Range) ([]Range, []Range) {
	if len(d.entries) == 0 || now < d.due {
		return reqs, lost
	}
	reqStart, lostStart := len(reqs), len(lost)
	due := monotime.Time(math.MaxInt64)
	// The window: messages already asked for and not yet filled count
	// against it, and a first NAK is sent only for what fits.
	window := uint64(d.cfg.Window) * d.maxReq
	var inflight uint64
	for i := range d.entries {
		if e := &d.entries[i]; e.naks > 0 && !e.doomed {
			inflight += e.len()
		}
	}
	out := 0
	for i := 0; i < len(d.entries); i++ {
		e := &d.entries[i]
		if e.doomed || !(e.naks == 0 && e.waited) && now >= e.clock.Add(d.cfg.Deadline) {
			lost = appendJoined(lost, lostStart, e.from, e.to, math.MaxUint64)
			if e.doomed {
				d.doomed -= e.len()
			} else {
				d.pending -= e.len()
			}
			d.st.LostMessages += e.len()
			continue
		}
		if now >= e.next && e.naks == 0 && inflight >= window {
			// The window is full: look again after Continue, when
			// answers may have made room.
			e.next, e.waited = now.Add(d.cfg.Continue), true
		} else if now >= e.next {
			if e.naks == 0 {
				if room := window - inflight; e.len() > room {
					// Ask for what fits; the rest waits its turn.
					rest := *e
					rest.from = e.from + wire.Seq(room)
					rest.next, rest.waited = now.Add(d.cfg.Continue), true
					e.to = rest.from
					d.entries = slices.Insert(d.entries, i+1, rest)
					e = &d.entries[i]
				}
				inflight += e.len()
				if e.waited {
					e.clock = now // its deadline starts with its first NAK
				}
			}
			e.asked = now
			e.naks++
			d.st.NAKs++
			if e.naks > 1 {
				d.st.Retries++
			}
			if e.interval == 0 {
				e.interval = d.retry()
			} else {
				e.interval = max(min(2*e.interval, d.cfg.MaxRetry), d.retry())
			}
			e.next = now.Add(e.interval)
			// One entry per request, so that an answer that fills a
			// whole request is told from a partial one (see hurry): a
			// range longer than a request is cut into pieces that keep
			// its timers.
			for e.len() > d.maxReq {
				rest := *e
				rest.from = e.from + wire.Seq(d.maxReq)
				e.to = rest.from
				reqs = d.appendRequest(reqs, reqStart, e)
				due = min(due, d.at(e))
				d.entries[out] = *e
				out++
				d.entries = slices.Insert(d.entries, i+1, rest)
				i++
				e = &d.entries[i]
			}
			reqs = d.appendRequest(reqs, reqStart, e)
		}
		due = min(due, d.at(e))
		if out != i {
			d.entries[out] = *e
		}
		out++
	}
	d.entries = d.entries[:out]
	d.due, d.exact = due, true
	d.st.Requests += uint64(len(reqs) - reqStart)
	for _, r := range reqs[reqStart:] {
		d.st.Requested += r.Len()
	}
	d.st.LostRanges += uint64(len(lost) - lostStart)
	return reqs, lost
}

// appendRequest appends e's range to reqs, joined to the last request
// appended in this Poll (index >= start) when it ends at e.from and has
// room, and notes in e whether it began a request. e is at most maxReq
// long.
func (d *LossDetector) appendRequest(reqs []Range, start int, e *entry) []Range {
	if k := len(reqs) - 1; k >= start && reqs[k].To == e.from && reqs[k].Len()+e.len() <= d.maxReq {
		reqs[k].To = e.to
		e.start = false
		return reqs
	}
	e.start = true
	return append(reqs, Range{e.from, e.to})
}

// appendJoined appends [from, to) to rs in pieces of at most limit
// messages, first extending the last range when it was appended in this
// call (index >= start) and ends at from.
func appendJoined(rs []Range, start int, from, to wire.Seq, limit uint64) []Range {
	for from < to {
		if k := len(rs) - 1; k >= start && rs[k].To == from && rs[k].Len() < limit {
			n := min(limit-rs[k].Len(), uint64(to-from))
			rs[k].To += wire.Seq(n)
			from += wire.Seq(n)
			continue
		}
		n := min(limit, uint64(to-from))
		rs = append(rs, Range{from, from + wire.Seq(n)})
		from += wire.Seq(n)
	}
	return rs
}

// SetMaxRequest sets the largest re-request Poll returns, in messages,
// from 1 to Config.MaxRequest (values outside are clamped). A subscriber
// sets it to the messages that fit one answer packet: a MoldUDP64 server
// answers a request with one packet, so a request for exactly that much
// is answered whole, and a long gap becomes several such requests in
// flight (up to Config.Window of them) instead of one request answered
// a packet at a time.
func (d *LossDetector) SetMaxRequest(n int) {
	d.maxReq = uint64(min(max(n, 1), d.cfg.MaxRequest))
}

// SetRetryFloor sets the least wait after a NAK before the same range is
// asked again: the first retry waits max(Retry, floor), and the doubled
// intervals never drop below it (they may pass MaxRetry when the floor
// does). A subscriber sets it to twice the repair round trip it measures,
// as TCP's retransmission timeout follows its round trip: on a slow path
// (a loaded host, the race detector) a fixed 10 ms retry fires before
// every answer and doubles the requests. Zero or negative: none.
func (d *LossDetector) SetRetryFloor(f time.Duration) { d.retryFloor = min(max(f, 0), maxDuration) }

// retry is the first wait after a NAK: Retry, or the floor when larger.
func (d *LossDetector) retry() time.Duration { return max(d.cfg.Retry, d.retryFloor) }

// MaxRequest is the largest re-request Poll returns now.
func (d *LossDetector) MaxRequest() int { return int(d.maxReq) }

// OnConfirm records that the retransmitter confirmed at now that it is
// answering r (after = 0) or will within after (wire.ConfirmLater),
// whoever asked. The tracked pieces of r (split off at its bounds) count
// as asked: a first NAK not sent yet is not sent (Stats.Confirmed counts
// its messages), and the next NAK of each piece waits its retry interval
// (at least Retry) plus after. It returns the time since this detector's
// own last NAK of the first such piece it had asked for, a repair round
// trip sample, and true; or false when it had asked for none of r.
func (d *LossDetector) OnConfirm(now monotime.Time, r Range, after time.Duration) (rtt time.Duration, ok bool) {
	if r.From >= r.To || len(d.entries) == 0 {
		return 0, false
	}
	d.split(r.From)
	d.split(r.To)
	after = min(max(after, 0), maxDuration)
	for i := d.search(r.From); i < len(d.entries) && d.entries[i].from < r.To; i++ {
		e := &d.entries[i]
		if e.doomed {
			continue
		}
		if e.naks > 0 {
			if !ok {
				rtt, ok = max(now.Sub(e.asked), 0), true
			}
		} else {
			d.st.Confirmed += e.len()
		}
		e.interval = max(e.interval, d.retry())
		e.held = e.held || after > 0
		if t := now.Add(after + e.interval); t > e.next {
			e.next = t
		}
	}
	d.exact = false
	return rtt, ok
}

// Overlaps reports whether any message of r is tracked missing.
func (d *LossDetector) Overlaps(r Range) bool {
	i := d.search(r.From)
	return r.From < r.To && i < len(d.entries) && d.entries[i].from < r.To
}

// split cuts the entry that holds s strictly inside it in two at s, both
// pieces keeping its timers.
func (d *LossDetector) split(s wire.Seq) {
	i := d.search(s)
	if i == len(d.entries) || d.entries[i].from >= s {
		return
	}
	right := d.entries[i]
	right.from, right.start = s, true
	d.entries[i].to = s
	d.entries = slices.Insert(d.entries, i+1, right)
}

// Next returns the earliest time at which Poll has work, and false when
// nothing is tracked. Poll before that time does nothing.
func (d *LossDetector) Next() (monotime.Time, bool) {
	if len(d.entries) == 0 {
		return 0, false
	}
	if !d.exact {
		due := monotime.Time(math.MaxInt64)
		for i := range d.entries {
			due = min(due, d.at(&d.entries[i]))
		}
		d.due, d.exact = due, true
	}
	return d.due, true
}

// Pending is the number of messages tracked missing and still to be
// repaired. It never exceeds MaxPending. Ranges declared lost by the
// MaxPending rule but not yet returned by Poll are not counted.
func (d *LossDetector) Pending() uint64 { return d.pending }

// AppendMissing appends to dst the ranges tracked missing and still to be
// repaired (those counted by Pending), in sequence order, and returns the
// extended slice. Adjacent ranges with different timers are listed apart.
func (d *LossDetector) AppendMissing(dst []Range) []Range {
	for i := range d.entries {
		if e := &d.entries[i]; !e.doomed {
			dst = append(dst, Range{e.from, e.to})
		}
	}
	return dst
}

// GiveUp stops tracking everything, appends every tracked range to lost
// (adjacent ranges joined) and returns the extended slice; the ranges count
// as lost in Stats. Use it when the session ends or is judged suspect and
// no repair can come.
func (d *LossDetector) GiveUp(lost []Range) []Range {
	start := len(lost)
	for i := range d.entries {
		e := &d.entries[i]
		lost = appendJoined(lost, start, e.from, e.to, math.MaxUint64)
		d.st.LostMessages += e.len()
	}
	d.st.LostRanges += uint64(len(lost) - start)
	d.entries = d.entries[:0]
	d.pending, d.doomed = 0, 0
	d.due, d.exact = 0, true
	return lost
}

// GiveUpBelow stops tracking what lies below seq (a range that crosses
// seq is cut there and keeps its timers above it), appends it to lost as
// GiveUp does, counts it lost in Stats and returns the extended slice.
// Use it when the stream moves past ranges that can no longer be
// repaired while later ones still can (a resync past held packets).
func (d *LossDetector) GiveUpBelow(seq wire.Seq, lost []Range) []Range {
	start := len(lost)
	i := 0
	for i < len(d.entries) && d.entries[i].from < seq {
		e := &d.entries[i]
		to := min(e.to, seq)
		lost = appendJoined(lost, start, e.from, to, math.MaxUint64)
		n := uint64(to - e.from)
		d.st.LostMessages += n
		if e.doomed {
			d.doomed -= n
		} else {
			d.pending -= n
		}
		if e.to > seq {
			e.from, e.start = seq, false
			break
		}
		i++
	}
	d.st.LostRanges += uint64(len(lost) - start)
	d.entries = slices.Delete(d.entries, 0, i)
	d.exact = false // due stays a lower bound: entries only went
	return lost
}

// Rearm restarts the timing of every tracked range as if it had been
// reported at now: its first NAK after a fresh delay, its deadline
// counted from now. A subscriber rearms a stream that could not ask for
// anything until now (a new incarnation waiting for the previous one to
// go quiet), so that the wait is not counted against its deadline.
// Ranges already declared lost stay so.
func (d *LossDetector) Rearm(now monotime.Time) {
	for i := range d.entries {
		if e := &d.entries[i]; !e.doomed {
			e.firstSeen, e.clock, e.next, e.interval, e.naks = now, now, now.Add(d.delay()), 0, 0
		}
	}
	d.exact = false
}

// Stats returns the counters since the detector was made or last Reset.
func (d *LossDetector) Stats() Stats { return d.st }

// Reset empties the detector and zeroes its Stats, keeping its
// configuration, its generator state and its memory, so that it can serve a
// new stream or session.
func (d *LossDetector) Reset() {
	d.entries = d.entries[:0]
	d.pending, d.doomed = 0, 0
	d.due, d.exact = 0, true
	d.st = Stats{}
}
