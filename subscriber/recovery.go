package subscriber

import (
	"cmp"
	"net/netip"
	"slices"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/mdbus/mdbus/internal/alarm"
	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/wire"
)

// Loss is a range of a stream declared lost: the sequences [From, To)
// will never be delivered.
type Loss struct {
	Stream   StreamID
	From, To wire.Seq
}

// Len is the number of messages lost.
func (l Loss) Len() uint64 { return uint64(l.To - l.From) }

// maxTime is "never" for the timer.
const maxTime = alarm.Never

// Recovery-time histograms count microseconds from 1 µs to 60 s with 3
// significant digits (about 136 KiB each). Longer recoveries are recorded
// as 60 s and counted in Stats.RecoveryClamped.
const (
	recoveryLowest  = 1
	recoveryHighest = 60_000_000
	recoveryDigits  = 3
)

func newRecoveryHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(recoveryLowest, recoveryHighest, recoveryDigits)
}

// seedFor derives stream index's detector seed from the configured one, so
// that streams draw different delays and a test replays exactly. A zero
// seed stays zero (nak then draws a random one).
func seedFor(seed, index uint64) uint64 {
	if seed == 0 {
		return 0
	}
	if x := seed + index*0x9e3779b97f4a7c15; x != 0 {
		return x
	}
	return 1
}

// detector returns the loss detector of s, making it on the first gap.
func (c *core) detector(s *stream) *nak.LossDetector {
	if s.nak == nil {
		cfg := c.cfg.nak
		cfg.Seed = seedFor(cfg.Seed, s.index)
		if c.backoff != nil {
			cfg.Generator = c.backoff
		}
		s.nak = nak.NewLossDetector(cfg)
	}
	return s.nak
}

// msgWindow is how many recent messages the size estimate follows.
const msgWindow = 1 << 16

// chunk is the messages of s that fit one answer packet: the size of a
// re-request that a MoldUDP64 server answers whole (it answers a request
// with one packet). Until s has seen a message it is the detector's
// largest request.
func (c *core) chunk(s *stream) int {
	if s.msgs == 0 || c.cfg.payload == 0 {
		return nak.DefaultMaxRequest
	}
	// Rounded to the nearest byte: with messages of one size the
	// estimate is exact; with mixed sizes a request may ask for more than
	// one packet holds, and the rest of it is asked for at once after
	// the partial answer (nak's Continue).
	avg := (s.msgBytes + s.msgs/2) / s.msgs
	return max(1, (c.cfg.payload-wire.HeaderLen)/int(avg+wire.MsgLenLen))
}

// handleConfirm takes a retransmitter's confirm (wire.Confirm) that
// arrived as a, already trusted as a repair would be: the confirmed range
// is not asked for again until its answer is overdue, the group size it
// carries sizes the back-off, and a confirm of this subscriber's own
// request gives a repair round trip sample. c.mu must be held.
func (c *core) handleConfirm(a arrival, b []byte) {
	cf, err := wire.ParseConfirm(b)
	if err != nil {
		c.drop(dropReasonOf(err))
		return
	}
	c.st.Confirms++
	if c.backoff != nil {
		c.backoff.SetGroup(int(cf.Group))
	}
	s := c.bySession[cf.Session]
	if s == nil {
		return
	}
	r := nak.Range{From: cf.Seq, To: cf.Seq + wire.Seq(cf.Count)}
	if s.nak == nil {
		return
	}
	var after time.Duration
	if cf.Kind == wire.ConfirmLater {
		// Waited at most one backoff cap: a confirm cannot hold a
		// request back long enough to run out its deadline.
		after = min(time.Duration(cf.After)*time.Microsecond, s.nak.Config().MaxRetry)
		c.st.ConfirmsLater++
	}
	rtt, ok := s.nak.OnConfirm(a.now, r, after)
	if ok && c.backoff != nil {
		c.backoff.ObserveRTT(rtt)
	}
}

// gapFound hands a gap [from, to) of s, newly reported at now, to its
// detector and wakes the timer goroutine when the gap falls due before it
// would wake anyway. It does not allocate once the detector has grown.
func (c *core) gapFound(s *stream, from, to wire.Seq, now monotime.Time) {
	d := c.detector(s)
	d.SetMaxRequest(c.chunk(s))
	if c.backoff != nil {
		d.SetRetryFloor(2 * c.backoff.RTT())
	}
	d.OnGap(now, nak.Range{From: from, To: to})
	c.rearm(d)
}

// rearm sets the timer goroutine's alarm to d's next deadline when that
// is earlier than the one it sleeps towards.
func (c *core) rearm(d *nak.LossDetector) {
	if t, ok := d.Next(); ok && t < c.timerAt {
		c.timerAt = t
		if c.alarm != nil {
			c.alarm.Set(t)
		}
	}
}

// received tells the detector of s that the messages [from, to) arrived
// (delivered or held) as a, cancelling their NAKs, and accounts for what
// they recovered.
func (c *core) received(s *stream, from, to wire.Seq, a arrival) {
	if s.nak == nil {
		return
	}
	filled, age := s.nak.OnReceived(a.now, nak.Range{From: from, To: to})
	if filled == 0 {
		return
	}
	if rtt, ok := s.nak.LastRTT(); ok && a.repair {
		if c.backoff != nil {
			c.backoff.ObserveRTT(rtt)
		}
		wait, _ := s.nak.LastWait()
		c.recordSplit(wait, rtt)
	}
	// A repair that fills the front of a requested range makes the
	// detector ask for the rest sooner (nak.Config.Continue) than the
	// retry the timer sleeps towards.
	c.rearm(s.nak)
	s.recovered += filled
	c.st.Recovered += filled
	if a.repair {
		s.repairs++
		c.st.Repairs++
	}
	c.record(s, age)
}

// record adds one recovery time to the stream's and the total histogram.
func (c *core) record(s *stream, age time.Duration) {
	if age.Microseconds() > recoveryHighest {
		c.st.RecoveryClamped++
	}
	v := clampRecovery(age)
	if s.hist == nil {
		s.hist = newRecoveryHistogram()
	}
	if c.hist == nil {
		c.hist = newRecoveryHistogram()
	}
	_ = s.hist.RecordValue(v) // in range: clamped above
	_ = c.hist.RecordValue(v)
}

// recordSplit adds the two parts of one recovery, a range asked once and
// repaired, to the split histograms (Stats.AskedP50 and AnsweredP50):
// wait, from finding the gap to its NAK, and rtt, from the NAK to the
// repair.
func (c *core) recordSplit(wait, rtt time.Duration) {
	if c.askedHist == nil {
		c.askedHist, c.answeredHist = newRecoveryHistogram(), newRecoveryHistogram()
	}
	_ = c.askedHist.RecordValue(clampRecovery(wait))
	_ = c.answeredHist.RecordValue(clampRecovery(rtt))
}

// clampRecovery is d in µs within the recovery histograms' range.
func clampRecovery(d time.Duration) int64 {
	return min(max(d.Microseconds(), recoveryLowest), recoveryHighest)
}

// addLost records that r of s was given up. next has not passed it: the
// detector only tracks sequences at or after next.
func addLost(s *stream, r nak.Range) {
	if n := len(s.lost); n == 0 || s.lost[n-1].From < r.From {
		s.lost = append(s.lost, r)
		return
	}
	i, _ := slices.BinarySearchFunc(s.lost, r.From, func(l nak.Range, from wire.Seq) int { return cmp.Compare(l.From, from) })
	s.lost = slices.Insert(s.lost, i, r)
}

// advance delivers the held packets that are in order and skips the lost
// ranges next has reached, reporting each, until neither applies. A lost
// range part of which arrived after it was given up is reported without
// that part, which is delivered: a Loss names only sequences that are
// never delivered.
func (c *core) advance(s *stream) {
	c.drain(s)
	for len(s.lost) > 0 && !s.stopped {
		r := s.lost[0]
		if r.To <= s.next {
			s.lost = slices.Delete(s.lost, 0, 1)
			continue
		}
		if r.From > s.next {
			return
		}
		to := r.To
		if s.end != wire.InvalidSeq {
			to = min(to, s.end)
		}
		if len(s.held) > 0 {
			to = min(to, s.held[0].seq)
		}
		if to <= s.next { // at the end of session: nothing follows
			s.lost = s.lost[:0]
			return
		}
		c.lose(s, s.next, to)
		if s.stopped {
			return
		}
		s.next = to
		s.horizon = max(s.horizon, to)
		c.drain(s)
	}
}

// lose reports [from, to) of s lost (from is s.next) and applies the loss
// policy.
func (c *core) lose(s *stream, from, to wire.Seq) {
	n := uint64(to - from)
	s.lostN++
	s.lostMsgs += n
	c.st.LostRanges++
	c.st.LostMessages += n
	if c.cfg.onLoss != nil {
		c.cfg.onLoss(Loss{Stream: s.id, From: from, To: to})
	}
	if c.cfg.lossPolicy == LossStop {
		c.stop(s)
	}
}

// stop stops s (LossStop): it delivers nothing more.
func (c *core) stop(s *stream) {
	s.stopped = true
	c.release(s, 0)
	c.abandon(s)
	c.st.StreamsStopped++
}

// abandon stops recovering s (it ended or stopped): its detector forgets
// every gap and its given-up ranges are dropped, unreported.
func (c *core) abandon(s *stream) {
	if s.nak != nil {
		c.nlost = s.nak.GiveUp(c.nlost[:0])
	}
	s.lost = s.lost[:0]
}

// retire keeps the counters of s that are read from its detector before s
// is forgotten.
func (c *core) retire(s *stream) {
	if s.nak != nil {
		ns := s.nak.Stats()
		c.retired.Suppressed += ns.Suppressed
		c.retired.Confirmed += ns.Confirmed
		c.retired.Retries += ns.Retries
	}
}

// poll does the recovery work due at now for every stream: it appends the
// re-requests due to reqs (only with a Retransmitter), hands the ranges
// given up to their streams (reporting, in order with deliveries, those
// next has reached), and returns reqs and the earliest time poll has work
// again (false: none). It stores that time in c.timerAt. It does not
// allocate once its scratch slices and reqs have grown. c.mu must be held.
func (c *core) poll(now monotime.Time, reqs []wire.Request) ([]wire.Request, monotime.Time, bool) {
	c.reqTo = c.reqTo[:0]
	next := maxTime
	for _, s := range c.list {
		d := s.nak
		if d == nil {
			continue
		}
		if t, ok := c.due(s); ok && t <= now {
			pnow := now
			if c.cfg.sendNAKs && !s.current {
				pnow = now.Add(-replaceQuiet) // see due
			}
			c.nreqs, c.nlost = d.Poll(pnow, c.nreqs[:0], c.nlost[:0])
			// Only the current incarnation of a session asks: the answers
			// name the session alone and go to it.
			if c.cfg.sendNAKs && s.current {
				for _, r := range c.nreqs {
					n := r.Len() // <= MaxRequest <= wire.MaxCount
					reqs = append(reqs, wire.Request{Session: s.id.Session, Seq: r.From, Count: uint16(n)})
					if c.cfg.retrPort != 0 {
						c.reqTo = append(c.reqTo, netip.AddrPortFrom(s.key.source.Addr(), c.cfg.retrPort))
					}
					s.naks++
					s.nakMsgs += n
					c.st.NAKs++
					c.st.NAKMessages += n
				}
			}
			if len(c.nlost) > 0 {
				for _, r := range c.nlost {
					addLost(s, r)
				}
				c.advance(s)
				c.finish(s)
			}
		}
		if t, ok := c.due(s); ok {
			next = min(next, t)
		}
	}
	c.timerAt = next
	return reqs, next, next != maxTime
}

// percentiles reads the median, 99th percentile and maximum of a
// recovery histogram (µs); zero when h is nil or empty.
func percentiles(h *hdrhistogram.Histogram) (p50, p99, maxd time.Duration) {
	if h == nil || h.TotalCount() == 0 {
		return 0, 0, 0
	}
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	return us(h.ValueAtPercentile(50)), us(h.ValueAtPercentile(99)), us(h.Max())
}

// recoveryHistogram returns a copy of the total recovery histogram.
// c.mu must be held.
func (c *core) recoveryHistogram() *hdrhistogram.Histogram {
	if c.hist == nil {
		return newRecoveryHistogram()
	}
	return c.hist.Clone()
}

// due is when the detector of s has work. A stream that is not its
// session's current incarnation cannot ask for anything until it is (it
// then rearms, see makeCurrent), so its detector runs replaceQuiet behind
// the clock and its gaps wait that much longer before they are declared
// lost: a new incarnation that waits for the previous one to go quiet
// does not lose what it would have repaired.
func (c *core) due(s *stream) (monotime.Time, bool) {
	t, ok := s.nak.Next()
	if ok && c.cfg.sendNAKs && !s.current {
		t = t.Add(replaceQuiet)
	}
	if ok && c.cfg.sendNAKs && s.graced && t < s.askFrom {
		t = s.askFrom // a restart's grace: see restartGrace
	}
	return t, ok
}

// awaitsRepair reports whether a stream holds packets behind a gap or has
// recovery work pending (a gap asked for or waiting for its deadline): a
// repair may then be queued on a repair socket (see reader.pollRepairs).
// c.mu must be held.
func (c *core) awaitsRepair() bool {
	return c.st.Held > 0 || c.timerAt != maxTime
}
