package nak

import (
	"math"
	"math/rand/v2"
	"time"
)

// GroupBackoff draws the delay before a gap's first NAK from the
// truncated exponential distribution of NORM (RFC 5740, section 5.5.3
// and its building block, RFC 5401): over a window T, with density
// rising towards T, so that of G receivers that miss the same packet
// about one draws an early delay and asks, and the others hear the
// retransmitter's confirm or its multicast repair before their own
// timers run out. It sizes both by what it learns at run time, not by a
// fixed number:
//
//   - G, the group size: the retransmitter counts the distinct
//     requesters it heard in the last 10 s and sends the count in its
//     confirms (wire.Confirm.Group); SetGroup takes it. With G <= 1 there
//     is nobody to suppress and the delay is 0: a lone subscriber asks
//     at once.
//   - R, the repair round trip: from a NAK to the retransmitter's
//     confirm or repair of it, for ranges asked once (ObserveRTT),
//     smoothed so that it rises at once and falls slowly, as NORM's GRTT
//     is the group's largest.
//
// With λ = ln(G)+1, the window is T = Factor·λ·R and a delay is
// t = (T/λ)·ln(1 + u·(e^λ − 1)) for u uniform in [0, 1). A receiver that
// hears the first NAK's confirm s after it left sends its own only if its
// delay fell within s of the earliest; the expected number of NAKs per
// loss is then about e^(λ·s/T) = e^(s/(Factor·R)): 1.13 for s ≈ R with
// the default Factor 8, 1.28 when a loaded host takes twice the measured
// round trip to hear the confirm, at any G. The price is latency: the
// earliest of G draws lands near T·1.3/λ, about 10·R whatever G (5 ms at
// G = 32 and R = 0.5 ms), and nothing for a lone subscriber. The window
// is capped at 150 ms, well inside the NAK deadline: on a loaded host the
// measured round trip grows, and a window cut short of it lets more
// receivers ask.
//
// A GroupBackoff is not safe for concurrent use: a subscriber shares one
// among its streams' detectors, all called under the subscriber's lock.
type GroupBackoff struct {
	factor    float64
	maxWindow time.Duration
	rtt       time.Duration
	group     int
	mine      float64 // smoothed share of group repairs that filled a range this receiver was missing
	pcg       rand.PCG
}

// GroupBackoff defaults.
const (
	// DefaultBackoffFactor is the window in repair round trips per unit
	// of λ (see GroupBackoff).
	DefaultBackoffFactor = 8
	// DefaultMaxWindow caps the back-off window.
	DefaultMaxWindow = 150 * time.Millisecond
	// InitialRTT is the round trip assumed before the first sample.
	InitialRTT = time.Millisecond
	minRTT     = 20 * time.Microsecond
	maxRTT     = 100 * time.Millisecond
)

// NewGroupBackoff returns a back-off with the defaults (factor 8, window
// at most 150 ms, round trip 1 ms until measured, group 1 until told),
// seeded with seed (0: random).
func NewGroupBackoff(seed uint64) *GroupBackoff {
	if seed == 0 {
		seed = rand.Uint64()
	}
	g := &GroupBackoff{factor: DefaultBackoffFactor, maxWindow: DefaultMaxWindow, rtt: InitialRTT, group: 1, mine: 1}
	g.pcg.Seed(seed, seed^0x9e3779b97f4a7c15)
	return g
}

// SetGroup sets the group size estimate (values below 1 count as 1).
func (g *GroupBackoff) SetGroup(n int) { g.group = max(n, 1) }

// Group is the group size estimate.
func (g *GroupBackoff) Group() int { return g.group }

// ObserveRTT takes one repair round trip sample: the estimate rises
// halfway to a larger sample at once and moves 1/16 of the way to a
// smaller one.
func (g *GroupBackoff) ObserveRTT(d time.Duration) {
	d = min(max(d, minRTT), maxRTT)
	if d > g.rtt {
		g.rtt += (d - g.rtt) / 2
	} else {
		g.rtt -= (g.rtt - d) / 16
	}
}

// RTT is the repair round trip estimate.
func (g *GroupBackoff) RTT() time.Duration { return g.rtt }

// ObserveRepair takes one repair heard on the repair group: mine says
// whether it filled a range this receiver was missing too. Of the repairs
// a receiver hears, the share that fill its own losses tells whether the
// group's losses are shared: about 1/G when each receiver loses packets
// of its own (every repair answers one receiver), 1 when all lose the
// same ones. Only shared losses need the back-off, so the group size it
// is sized by is scaled down to what the losses share (see Shared).
func (g *GroupBackoff) ObserveRepair(mine bool) {
	v := 0.0
	if mine {
		v = 1
	}
	g.mine += (v - g.mine) / confirmSmoothing
}

// confirmSmoothing: the share follows about the last 32 repairs.
const confirmSmoothing = 32

// Shared estimates the fraction of the group that loses what this
// receiver loses, from 0 (losses are each receiver's own) to 1 (the
// whole group loses the same packets): (share·G − 1)/(G − 1).
func (g *GroupBackoff) Shared() float64 {
	if g.group <= 1 {
		return 0
	}
	n := float64(g.group)
	return min(max((g.mine*n-1)/(n-1), 0), 1)
}

// effective is the number of receivers expected to miss what this one
// misses: 1 + (G−1)·Shared.
func (g *GroupBackoff) effective() float64 {
	return 1 + float64(g.group-1)*g.Shared()
}

// lambda is NORM's λ = ln(G)+1, for the receivers sharing a loss.
func (g *GroupBackoff) lambda() float64 { return math.Log(g.effective()) + 1 }

// Window is the back-off window T: 0 when nobody else is expected to
// miss the same packet (a group of one, or losses of one's own), where
// waiting would only delay the repair.
func (g *GroupBackoff) Window() time.Duration {
	if g.effective() < minShared {
		return 0
	}
	return min(time.Duration(g.factor*g.lambda()*float64(g.rtt)), g.maxWindow)
}

// minShared: below this many receivers expected per loss, asking at once
// costs at most a duplicate request now and then.
const minShared = 1.5

// Delay draws the delay before a gap's first NAK. It does not allocate.
func (g *GroupBackoff) Delay() time.Duration {
	t := g.Window()
	if t <= 0 {
		return 0
	}
	l := g.lambda()
	u := float64(g.pcg.Uint64()>>11) / (1 << 53)
	return time.Duration(float64(t) / l * math.Log1p(u*math.Expm1(l)))
}
