package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Defaults of a capacity search.
const (
	DefaultProbeDuration = 3 * time.Second
	DefaultResolution    = 0.05
	DefaultMaxProbes     = 10
	// DefaultRampFactor is the ramp's step from the first probe, which the
	// free-running probe puts close to the answer.
	DefaultRampFactor = 1.25
	// DefaultCapacityBudget bounds one cell's search, probes and set-up.
	DefaultCapacityBudget = 90 * time.Second
	// capacityStart is the first probe's share of what the free-running
	// probe delivered: a receiver overrun by a free-running sender
	// delivers about what it can keep up with, a little less with the
	// losses to handle, so the first fixed rate starts just below.
	capacityStart = 0.9
)

// Why a capacity search stopped.
const (
	// LimitConverged: a lossless and a lossy rate within the resolution.
	LimitConverged = "converged"
	// LimitSender: every probe up to the sender's own top rate was
	// lossless, or the lowest failing probe failed because the sender
	// could not offer its rate: the receivers may take more.
	LimitSender = "sender"
	// LimitNone: no probe down to the lowest rate was lossless.
	LimitNone = "none lossless"
	// LimitProbes: the probe budget ran out first.
	LimitProbes = "probe limit"
	// LimitTime: the time budget ran out first.
	LimitTime = "time limit"
	// LimitError: a probe failed to run (Error says why).
	LimitError = "error"
)

// SearchConfig bounds the search for the highest rate that passes. Zero
// and negative values follow Config's rule.
type SearchConfig struct {
	// Start is the first rate probed (messages/s, > 0).
	Start float64
	// Min and Max bound the rates probed: below Min the search gives up
	// (LimitNone), at Max it stops (LimitSender). Default 1 and MaxRate.
	Min, Max float64
	// Factor is the ramp's step: up from Start while probes pass, down
	// while they fail, until one of each brackets the answer, which is
	// then bisected. Default 2; above 1.
	Factor float64
	// Resolution: the search stops when the lowest failing rate is within
	// this fraction above the highest passing one; default 5%.
	Resolution float64
	// MaxProbes bounds the probes; default DefaultMaxProbes.
	MaxProbes int
	// Budget bounds the search's wall time (no probe starts after it);
	// 0: no limit beyond MaxProbes.
	Budget time.Duration
}

func (c SearchConfig) withDefaults() (SearchConfig, error) {
	if c.Min == 0 {
		c.Min = 1
	}
	if c.Max == 0 {
		c.Max = MaxRate
	}
	if c.Factor == 0 {
		c.Factor = 2
	}
	if c.Resolution == 0 {
		c.Resolution = DefaultResolution
	}
	if c.MaxProbes == 0 {
		c.MaxProbes = DefaultMaxProbes
	}
	switch {
	case !(c.Start > 0) || c.Start > MaxRate:
		return c, fmt.Errorf("%w: search Start %g is outside (0, %g]", ErrConfig, c.Start, MaxRate)
	case !(c.Min > 0):
		return c, fmt.Errorf("%w: search Min %g: want a positive rate", ErrConfig, c.Min)
	case !(c.Max >= c.Min) || c.Max > MaxRate:
		return c, fmt.Errorf("%w: search Max %g: want Min (%g) to %g", ErrConfig, c.Max, c.Min, MaxRate)
	case !(c.Factor > 1) || c.Factor > 100:
		return c, fmt.Errorf("%w: search Factor %g is outside (1, 100]", ErrConfig, c.Factor)
	case !(c.Resolution > 0) || c.Resolution >= 1:
		return c, fmt.Errorf("%w: search Resolution %g is outside (0, 1)", ErrConfig, c.Resolution)
	case c.MaxProbes < 1 || c.MaxProbes > 100:
		return c, fmt.Errorf("%w: search MaxProbes %d is outside 1..100", ErrConfig, c.MaxProbes)
	case c.Budget < 0:
		return c, fmt.Errorf("%w: search Budget %v is negative", ErrConfig, c.Budget)
	}
	return c, nil
}

// Probe is one fixed-rate run of a capacity search.
type Probe struct {
	// Rate is the offered rate, messages/s; 0 for the free-running probe
	// that seeds the search.
	Rate float64 `json:"offered_rate"`
	Pass bool    `json:"pass"`
	// Sent is what the sender achieved, Delivered the slowest
	// subscriber's rate (messages/s).
	Sent      float64 `json:"sent_msgs_per_s"`
	Delivered float64 `json:"delivered_msgs_per_s"`
	// KernelDrops and Lost sum over the subscribers.
	KernelDrops uint64  `json:"kernel_drops"`
	Lost        uint64  `json:"lost"`
	Seconds     float64 `json:"seconds"`
	// Why says what failed: "kernel drops", "lost", "sender behind",
	// "incomplete"; empty for a pass.
	Why   string `json:"why,omitempty"`
	Error string `json:"error,omitempty"`
	// GSOShare is the fraction of the mdbus publisher's packets that left
	// in UDP GSO trains.
	GSOShare float64 `json:"gso_share,omitempty"`
}

// searchResult is what search found.
type searchResult struct {
	capacity float64 // highest passing rate; 0: none
	failed   float64 // lowest failing rate; 0: none
	limit    string
	probes   []Probe
	err      error
}

// probeFunc runs one probe at rate.
type probeFunc func(ctx context.Context, rate float64) (Probe, error)

// search finds the highest rate at which probe passes, to within
// cfg.Resolution: an exponential ramp from cfg.Start (up while probes pass,
// down while they fail) until a passing and a failing rate bracket the
// answer, then bisection. Every probe lies strictly between the highest
// pass and the lowest failure so far, so a noisy probe narrows the
// bracket without ever inverting it. It stops at cfg.MaxProbes, after
// cfg.Budget by clock (nanoseconds), at the first probe error (which it
// returns with what was found) and when ctx ends.
func search(ctx context.Context, cfg SearchConfig, clock func() int64, probe probeFunc) searchResult {
	var res searchResult
	cfg, err := cfg.withDefaults()
	if err != nil {
		res.limit, res.err = LimitError, err
		return res
	}
	start := clock()
	rate := min(max(cfg.Start, cfg.Min), cfg.Max)
	for {
		if len(res.probes) >= cfg.MaxProbes {
			res.limit = LimitProbes
			return res
		}
		if cfg.Budget > 0 && clock()-start >= int64(cfg.Budget) {
			res.limit = LimitTime
			return res
		}
		if err := ctx.Err(); err != nil {
			res.limit, res.err = LimitError, err
			return res
		}
		p, err := probe(ctx, rate)
		p.Rate = rate
		res.probes = append(res.probes, p)
		if err != nil {
			res.limit, res.err = LimitError, err
			return res
		}
		if p.Pass {
			res.capacity = rate
		} else {
			res.failed = rate
		}
		switch {
		case res.failed == 0: // all passed: ramp up
			if rate >= cfg.Max {
				res.limit = LimitSender
				return res
			}
			rate = roundRate(min(rate*cfg.Factor, cfg.Max), rate, cfg.Max*(1+1e-9))
		case res.capacity == 0: // all failed: ramp down
			if rate <= cfg.Min {
				res.limit = LimitNone
				return res
			}
			rate = roundRate(max(rate/cfg.Factor, cfg.Min), cfg.Min*(1-1e-9), rate)
		default:
			if res.failed <= res.capacity*(1+cfg.Resolution) {
				res.limit = LimitConverged
				return res
			}
			rate = roundRate((res.capacity+res.failed)/2, res.capacity, res.failed)
		}
	}
}

// roundRate rounds r to three significant digits when that keeps it
// strictly between lo and hi (else returns r), so probes have readable
// names.
func roundRate(r, lo, hi float64) float64 {
	scale := math.Pow(10, math.Floor(math.Log10(r))-2)
	if q := math.Round(r/scale) * scale; q > lo && q < hi {
		return q
	}
	return r
}

// CapacityCase is one cell of a capacity search: the highest offered rate
// that every subscriber receives whole.
type CapacityCase struct {
	System System
	// Sizes of the messages; the zero value is 64 bytes.
	Sizes Sizes
	// PayloadSize overrides Config.PayloadSize when positive (mdbus).
	PayloadSize int
	// Subscribers, in goroutines or (Processes) in processes; default 1.
	Subscribers int
	Processes   bool
	// Loss drops this fraction of the datagrams each subscriber receives
	// (mdbus only, with its retransmitter): the capacity is then the
	// highest rate recovery keeps whole.
	Loss float64
	// Search bounds the search; Start, when 0, comes from a first probe
	// that sends as fast as it can (its sender's rate also caps Max).
	// Factor defaults to DefaultRampFactor then.
	Search SearchConfig
	// Probe is how long each probe sends; default DefaultProbeDuration.
	Probe time.Duration
}

// CapacityResult is a capacity search's outcome.
type CapacityResult struct {
	Name        string  `json:"name"`
	System      System  `json:"system"`
	PayloadSize int     `json:"payload_size"` // mdbus packet payload; raw: 0 (one datagram per message)
	Size        string  `json:"size"`
	MeanSize    float64 `json:"mean_size"`
	Subscribers int     `json:"subscribers"`
	Processes   bool    `json:"processes"`
	Loss        float64 `json:"loss,omitempty"` // fraction dropped at each subscriber (CapacityCase.Loss)
	// Interleaved reports that the cell was searched together with the
	// other cells of its shape, their probes alternating
	// (CapacityInterleaved).
	Interleaved bool `json:"interleaved,omitempty"`
	// Capacity is the highest offered rate (messages/s) that every
	// subscriber received whole for the probe's duration: zero kernel
	// drops, zero lost, every message delivered. 0: none found.
	Capacity float64 `json:"capacity_msgs_per_s"`
	// BytesPerSec is Capacity in message bytes.
	BytesPerSec float64 `json:"capacity_bytes_per_s"`
	// Failed is the lowest rate that did not pass (0: none failed).
	Failed float64 `json:"failed_msgs_per_s"`
	// Limit says why the search stopped (LimitConverged, ...).
	Limit      string  `json:"limit"`
	Resolution float64 `json:"resolution"`
	Probe      float64 `json:"probe_s"`
	Probes     []Probe `json:"probes"`
	Seconds    float64 `json:"seconds"`
	Error      string  `json:"error,omitempty"`
}

// whySender is a probe's failure when its sender fell behind the offered
// rate (and nothing was lost).
const whySender = "sender behind"

// senderSlack is how far below the offered rate a probe's sender may end:
// a fixed-rate sender sends what fell due each millisecond or so (see
// loopParams.quantum), so the last burst or two of a short probe may miss
// the end of its window.
const senderSlack = 0.02

// lossless judges a probe: every subscriber got every message sent, with
// no kernel drop and no loss, and the sender offered the rate (within
// senderSlack) for the whole probe of secs seconds.
func lossless(r ThroughputRun, secs float64) Probe {
	p := Probe{Rate: r.Rate, Sent: r.Sent.MsgsPerSec, Delivered: r.MinMsgsPerSec, Seconds: r.Sent.Seconds, Error: r.Error}
	if r.Sent.Packets > 0 {
		p.GSOShare = float64(r.GSOPackets) / float64(r.Sent.Packets)
	}
	for _, s := range r.Subs {
		p.KernelDrops += s.KernelDrops
		p.Lost += max(s.Lost, s.Missing)
	}
	switch {
	case len(r.Subs) == 0:
		p.Why = "no subscribers"
	case p.KernelDrops > 0:
		p.Why = "kernel drops"
	case p.Lost > 0:
		p.Why = "lost"
	case r.Rate > 0 && (r.Sent.MsgsPerSec < (1-senderSlack)*r.Rate || float64(r.Sent.Messages) < (1-senderSlack)*r.Rate*secs):
		p.Why = whySender
	case !r.Complete:
		p.Why = "incomplete"
	}
	p.Pass = p.Why == ""
	return p
}

// Capacity searches the capacity of c and adds the result to the report.
// The probes are ordinary throughput runs (without latency sampling),
// listed in the result rather than among the report's throughput runs.
func (b *Bench) Capacity(ctx context.Context, c CapacityCase) (CapacityResult, error) {
	res, err := b.capacity(ctx, c, nil, 0)
	b.rep.Capacity = append(b.rep.Capacity, res)
	return res, err
}

// capacity is Capacity without adding to the report. With t, each probe
// waits for turn i of t (see CapacityInterleaved).
func (b *Bench) capacity(ctx context.Context, c CapacityCase, t *turns, i int) (CapacityResult, error) {
	if t != nil {
		defer t.leave(i)
	}
	if c.Subscribers == 0 {
		c.Subscribers = 1
	}
	if c.Probe == 0 {
		c.Probe = DefaultProbeDuration
	}
	if c.PayloadSize == 0 {
		c.PayloadSize = b.s.PayloadSize
	}
	if c.Probe < 0 || c.Probe > MaxDuration {
		return CapacityResult{}, fmt.Errorf("%w: Probe %v is outside 0..%v", ErrConfig, c.Probe, MaxDuration)
	}
	if err := b.checkCase(c.System, c.Sizes, 0, c.Subscribers, c.Loss, c.Probe, 0, c.PayloadSize); err != nil {
		return CapacityResult{}, err
	}
	where := "goroutine"
	if c.Processes {
		where = "processes"
	} else if c.Subscribers > 1 {
		where = "goroutines"
	}
	res := CapacityResult{
		Name:   fmt.Sprintf("%s %sB 1->%d %s", c.System, c.Sizes, c.Subscribers, where),
		System: c.System, Size: c.Sizes.String(), Subscribers: c.Subscribers, Processes: c.Processes,
		MeanSize: newRing(c.Sizes, 1, b.s.Seed).meanSize(), Probe: c.Probe.Seconds(),
	}
	if c.System == Mdbus {
		res.PayloadSize = c.PayloadSize
		res.Name = fmt.Sprintf("mdbus %sB in %dB packets 1->%d %s", c.Sizes, c.PayloadSize, c.Subscribers, where)
		if c.Loss > 0 {
			res.Name += fmt.Sprintf(" loss %g%%", 100*c.Loss)
			res.Loss = c.Loss
		}
	}
	if c.System == RawGSO {
		res.PayloadSize = c.PayloadSize
		res.Name = fmt.Sprintf("raw-gso %sB in %dB packets 1->%d %s", c.Sizes, c.PayloadSize, c.Subscribers, where)
	}
	res.Name += pathName(b.s.Path)
	t0 := Now()
	tc := ThroughputCase{
		System: c.System, Sizes: c.Sizes, PayloadSize: c.PayloadSize, Subscribers: c.Subscribers,
		Processes: c.Processes, Duration: c.Probe, Loss: c.Loss, noLatency: true,
	}
	probe := func(ctx context.Context, rate float64) (Probe, error) {
		if t != nil {
			t.take(i)
			defer t.give(i)
		}
		tc.Rate = rate
		run, err := b.throughput(ctx, tc)
		p := lossless(run, c.Probe.Seconds())
		b.s.Logger.Info("capacity probe", "cell", res.Name, "rate", rateName(rate), "pass", p.Pass, "why", p.Why, "delivered", count(p.Delivered))
		return p, err
	}
	sc := c.Search
	if sc.Start == 0 {
		// Seed: send as fast as the sender goes. Its sender rate caps
		// the search (a fixed-rate sender cannot offer more), and what
		// the slowest subscriber delivered puts the first fixed rate
		// near the answer.
		p, err := probe(ctx, 0)
		res.Probes = append(res.Probes, p)
		if err != nil {
			res.Limit, res.Error = LimitError, err.Error()
			res.Seconds = float64(Now()-t0) / 1e9
			return res, err
		}
		if sc.Max == 0 && p.Sent > 0 {
			sc.Max = math.Ceil(p.Sent)
		}
		sc.Start = capacityStart * p.Delivered
		if p.Pass && p.Sent >= 1 {
			// Lossless as fast as the sender goes: confirm at a fixed
			// rate the sender can offer (pacing costs it a little); the
			// sender is the limit.
			sc.Start = math.Floor((1 - senderSlack) * p.Sent)
			sc.Max = sc.Start
		}
		if sc.Start < 1 {
			sc.Start = 1000
		}
		if sc.Factor == 0 {
			sc.Factor = DefaultRampFactor
		}
		if sc.Budget == 0 {
			sc.Budget = DefaultCapacityBudget
		}
		// MaxProbes counts the free-running probe too.
		if sc.MaxProbes == 0 {
			sc.MaxProbes = DefaultMaxProbes
		}
		sc.MaxProbes = max(sc.MaxProbes-1, 1)
	}
	sr := search(ctx, sc, Now, probe)
	res.Probes = append(res.Probes, sr.probes...)
	res.Capacity, res.Failed, res.Limit = sr.capacity, sr.failed, sr.limit
	for _, p := range sr.probes {
		if p.Rate == sr.failed && p.Why == whySender && sr.limit == LimitConverged {
			res.Limit = LimitSender
		}
	}
	res.BytesPerSec = res.Capacity * res.MeanSize
	res.Resolution = sc.Resolution
	if res.Resolution == 0 {
		res.Resolution = DefaultResolution
	}
	res.Error = errString(sr.err)
	res.Seconds = float64(Now()-t0) / 1e9
	if ctx.Err() != nil {
		return res, errors.Join(context.Canceled, sr.err)
	}
	return res, sr.err
}

// CapacityInterleaved searches the cells cs as Capacity does, but
// together: their probes alternate, one at a time, round robin over the
// searches still going, so that a machine whose speed drifts during the
// run (a shared or virtual one can drift by a third within the hour)
// drifts under all of them alike, and their ratios, a lossy cell against
// the lossless one, compare like with like. The results go to the report
// in the order of cs.
func (b *Bench) CapacityInterleaved(ctx context.Context, cs []CapacityCase) ([]CapacityResult, error) {
	if len(cs) == 1 {
		res, err := b.Capacity(ctx, cs[0])
		return []CapacityResult{res}, err
	}
	t := newTurns(len(cs))
	out := make([]CapacityResult, len(cs))
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { out[i], errs[i] = b.capacity(ctx, c, t, i) })
	}
	wg.Wait()
	for i := range out {
		out[i].Interleaved = true
	}
	b.rep.Capacity = append(b.rep.Capacity, out...)
	return out, errors.Join(errs...)
}

// turns lets several searches take their probes in turn: one probe at a
// time, round robin over the searches that have not left.
type turns struct {
	mu   sync.Mutex
	cond sync.Cond
	next int    // whose turn it is
	gone []bool // searches that left
}

func newTurns(n int) *turns {
	t := &turns{gone: make([]bool, n)}
	t.cond.L = &t.mu
	return t
}

// take waits for i's turn.
func (t *turns) take(i int) {
	t.mu.Lock()
	for t.next != i {
		t.cond.Wait()
	}
	t.mu.Unlock()
}

// give passes the turn from i to the next search still going.
func (t *turns) give(i int) {
	t.mu.Lock()
	t.advanceLocked(i)
	t.mu.Unlock()
}

// leave marks i gone (its search ended), passing its turn on if it held it.
func (t *turns) leave(i int) {
	t.mu.Lock()
	t.gone[i] = true
	if t.next == i {
		t.advanceLocked(i)
	}
	t.mu.Unlock()
}

func (t *turns) advanceLocked(i int) {
	n := len(t.gone)
	for k := 1; k <= n; k++ {
		if j := (i + k) % n; !t.gone[j] {
			t.next = j
			break
		}
	}
	t.cond.Broadcast()
}

// CapacityMatrix is the cells `mdbus bench capacity` searches.
type CapacityMatrix struct {
	Systems      []System
	PayloadSizes []int // mdbus packet payloads; default 1472 and 8972
	Sizes        []Sizes
	Subscribers  []int // 1 runs in a goroutine, more in processes; default 1 and 4
	// Processes runs a single subscriber in its own process too.
	Processes bool
	// Losses adds, for every mdbus cell, one searched with each loss
	// (CapacityCase.Loss), beside the lossless one.
	Losses []float64
}

// CapacityCases expands m into cases, raw UDP once per message size and
// subscriber count (one datagram per message: the payload size does not
// apply to it), mdbus and raw-gso for every payload size.
func CapacityCases(m CapacityMatrix) []CapacityCase {
	var out []CapacityCase
	for _, sz := range m.Sizes {
		for _, n := range m.Subscribers {
			for _, sys := range m.Systems {
				pays := m.PayloadSizes
				if sys == Raw {
					pays = []int{0}
				}
				for _, pay := range pays {
					if sys != Raw && sz.Max > MaxMessageFor(sys, pay) {
						continue
					}
					c := CapacityCase{System: sys, Sizes: sz, PayloadSize: pay, Subscribers: n, Processes: n > 1 || m.Processes}
					out = append(out, c)
					if sys != Mdbus {
						continue
					}
					for _, l := range m.Losses {
						c.Loss = l
						out = append(out, c)
					}
				}
			}
		}
	}
	return out
}
