package replay

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
)

// DefaultSpin is Config.Spin when zero: more than a timer's usual
// lateness. A Go timer asked for anything from 100 to 800 µs wakes after
// about 1.1 ms on Linux (the runtime's timer resolution plus the
// scheduler's wake-up), so a pacer that slept whenever more than a few
// hundred µs were left was late by up to that much; sleeping only until
// 1.5 ms before the target and spinning the rest is late by one spin step.
const DefaultSpin = 1500 * time.Microsecond

// Config chooses the pace. The zero value replays at the recorded pace.
// At most one of Rate, PPS, Mbps and Max may be set, and none of them with
// a Speed other than 1.
//
// One rule for the values of every field: the zero value means the
// default. A negative value means "none" or "off" only for the fields
// whose doc says "negative:" (Spin); for every other field a negative
// value is invalid and NewPacer returns an error wrapping ErrConfig that
// names it.
type Config struct {
	// Speed scales the recorded pace: 2 replays twice as fast, 0.5 at
	// half speed. Default 1; must not be negative.
	Speed float64
	// Rate, when positive, replaces the recorded pace by a fixed rate in
	// messages per second.
	Rate float64
	// PPS, when positive, replaces the recorded pace by a fixed rate in
	// packets per second (WaitPacket; Wait counts each message as a
	// packet).
	PPS float64
	// Mbps, when positive, replaces the recorded pace by a fixed bit rate
	// in megabits (10^6) per second of MoldUDP64 packet bytes (the UDP
	// payload, as WaitPacket is told them).
	Mbps float64
	// Max replays as fast as possible.
	Max bool
	// Spin is how long before a target time the pacer stops sleeping and
	// spins, yielding the processor between looks at the clock; default
	// DefaultSpin; negative: none, never spins. The spin costs up to Spin of one
	// core's time per message (or packet): a feed whose messages are
	// closer together than Spin keeps one core busy while it replays.
	Spin time.Duration
	// Clock is the time source; default the monotonic clock. Tests use a
	// fake one.
	Clock Clock
}

// ErrConfig wraps every invalid Config.
var ErrConfig = fmt.Errorf("replay: invalid config")

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Speed < 0 || math.IsNaN(c.Speed) || math.IsInf(c.Speed, 0):
		return c, fmt.Errorf("%w: Speed %v: want a positive factor like 0.5, 1 or 10", ErrConfig, c.Speed)
	case c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0):
		return c, fmt.Errorf("%w: Rate %v: want a positive number of messages per second", ErrConfig, c.Rate)
	case c.PPS < 0 || math.IsNaN(c.PPS) || math.IsInf(c.PPS, 0):
		return c, fmt.Errorf("%w: PPS %v: want a positive number of packets per second", ErrConfig, c.PPS)
	case c.Mbps < 0 || math.IsNaN(c.Mbps) || math.IsInf(c.Mbps, 0):
		return c, fmt.Errorf("%w: Mbps %v: want a positive number of megabits per second", ErrConfig, c.Mbps)
	}
	if n := c.paces(); n > 1 {
		return c, fmt.Errorf("%w: give one pace: %s", ErrConfig, c.paceNames())
	}
	if c.Speed == 0 {
		c.Speed = 1
	}
	if c.Spin == 0 {
		c.Spin = DefaultSpin
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	return c, nil
}

// paces counts the paces chosen (a Speed other than 1 counts).
func (c Config) paces() int {
	n := 0
	for _, on := range []bool{c.Speed != 0 && c.Speed != 1, c.Rate > 0, c.PPS > 0, c.Mbps > 0, c.Max} {
		if on {
			n++
		}
	}
	return n
}

func (c Config) paceNames() string {
	var s []string
	if c.Speed != 0 && c.Speed != 1 {
		s = append(s, fmt.Sprintf("speed %v", c.Speed))
	}
	if c.Rate > 0 {
		s = append(s, fmt.Sprintf("rate %v", c.Rate))
	}
	if c.PPS > 0 {
		s = append(s, fmt.Sprintf("pps %v", c.PPS))
	}
	if c.Mbps > 0 {
		s = append(s, fmt.Sprintf("mbps %v", c.Mbps))
	}
	if c.Max {
		s = append(s, "max")
	}
	return strings.Join(s, ", ") + " were given"
}

// Clock is the pacer's time source.
type Clock interface {
	// Now returns monotonic nanoseconds.
	Now() int64
	// Sleep blocks for about d or until ctx ends (returning its error).
	Sleep(ctx context.Context, d time.Duration) error
	// Yield is called between looks at the clock while spinning; the
	// real clock gives up the processor there only where it cannot sleep
	// precisely (it spins at most FineSpin on Linux, Spin elsewhere).
	Yield()
}

type realClock struct{}

func (realClock) Now() int64 { return int64(monotime.Now()) }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Pacer decides when each message is due. Not safe for concurrent use.
type Pacer struct {
	cfg      Config
	anchored bool
	start    int64  // clock time of the first message
	ts0      int64  // its recorded timestamp
	n        uint64 // messages before the next
	pkts     uint64 // packets before the next
	bits     uint64 // packet bits before the next
}

// NewPacer returns a pacer for cfg.
func NewPacer(cfg Config) (*Pacer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Pacer{cfg: cfg}, nil
}

// Target returns the clock time at which the message stamped ts (the
// next in order) is due, anchoring the timeline at the first call. It
// does not wait.
func (p *Pacer) Target(ts int64) int64 { return p.TargetPacket(ts, 1, 0) }

// TargetPacket returns the clock time at which the next packet, of msgs
// messages and size bytes, whose first message is stamped ts, is due. A
// packet's messages leave together: with Rate the packet is due when its
// first message is.
func (p *Pacer) TargetPacket(ts int64, msgs, size int) int64 {
	if !p.anchored {
		p.anchored, p.start, p.ts0 = true, p.cfg.Clock.Now(), ts
	}
	var due int64
	switch {
	case p.cfg.Max:
		due = p.start
	case p.cfg.Rate > 0:
		due = p.start + int64(float64(p.n)*1e9/p.cfg.Rate)
	case p.cfg.PPS > 0:
		due = p.start + int64(float64(p.pkts)*1e9/p.cfg.PPS)
	case p.cfg.Mbps > 0:
		due = p.start + int64(float64(p.bits)*1e3/p.cfg.Mbps)
	default:
		due = p.start + int64(float64(ts-p.ts0)/p.cfg.Speed)
	}
	p.n += uint64(msgs)
	p.pkts++
	p.bits += 8 * uint64(size)
	return due
}

// Wait blocks until the message stamped ts is due (see Target). A
// message whose timestamp is before the previous one's is due at once
// after it: recorded order wins over a stepped clock.
func (p *Pacer) Wait(ctx context.Context, ts int64) error {
	return p.WaitPacket(ctx, ts, 1, 0)
}

// WaitPacket blocks until the packet described as for TargetPacket is
// due: it sleeps until Spin before the target, then spins.
func (p *Pacer) WaitPacket(ctx context.Context, ts int64, msgs, size int) error {
	due := p.TargetPacket(ts, msgs, size)
	if p.cfg.Max {
		return ctx.Err()
	}
	c := p.cfg.Clock
	for {
		left := time.Duration(due - c.Now())
		if left <= 0 {
			return nil
		}
		if left > p.cfg.Spin {
			if err := c.Sleep(ctx, left-max(p.cfg.Spin, 0)); err != nil {
				return err
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if ps, ok := c.(preciseSleeper); ok && left > FineSpin && p.cfg.Spin > 0 {
			ps.SleepPrecise(left - FineSpin)
			continue
		}
		c.Yield()
	}
}

// FineSpin is how long before a target the pacer spins when its clock
// can sleep precisely (nanosleep on Linux wakes 50-100 µs late where a Go
// timer wakes ~1 ms late): between Spin and FineSpin before the target it
// sleeps that way, so the spin costs about FineSpin of CPU per message,
// not Spin.
const FineSpin = 200 * time.Microsecond

// preciseSleeper is a Clock that can sleep short times precisely,
// blocking its thread (it need not watch a context: it sleeps at most
// Spin).
type preciseSleeper interface {
	SleepPrecise(d time.Duration)
}

// recordedPace reports whether the pace follows the recorded timestamps
// (at a speed factor).
func (p *Pacer) recordedPace() bool {
	return !p.cfg.Max && p.cfg.Rate <= 0 && p.cfg.PPS <= 0 && p.cfg.Mbps <= 0
}

// Reset starts a new pass of a loop. At the recorded pace (or a speed
// factor) the next message starts a new timeline, due at once; at a fixed
// rate (Rate, PPS, Mbps) the rate goes on across the passes, as if they
// were one range.
func (p *Pacer) Reset() {
	if p.recordedPace() {
		p.anchored, p.n, p.pkts, p.bits = false, 0, 0, 0
	}
}

// Start is the clock time the timeline was anchored at (0 before the
// first message).
func (p *Pacer) Start() int64 { return p.start }

// Elapsed is the recorded time from the first message of the timeline to
// ts, scaled by the speed: the offset at which ts is due.
func (p *Pacer) Elapsed(ts int64) time.Duration {
	if !p.anchored || !p.recordedPace() {
		return 0
	}
	return time.Duration(float64(ts-p.ts0) / p.cfg.Speed)
}
