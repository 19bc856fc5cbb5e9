package replay

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
)

// DefaultSpin is Config.Spin when zero.
const DefaultSpin = 200 * time.Microsecond

// Config chooses the pace. The zero value replays at the recorded pace.
type Config struct {
	// Speed scales the recorded pace: 2 replays twice as fast, 0.5 at
	// half speed. Default 1; must not be negative.
	Speed float64
	// Rate, when positive, replaces the recorded pace by a fixed rate in
	// messages per second.
	Rate float64
	// Max replays as fast as possible (Speed and Rate are ignored).
	Max bool
	// Spin is how long before a target time the pacer stops sleeping and
	// spins; default DefaultSpin, negative never spins.
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
		return c, fmt.Errorf("%w: speed %v: want a positive factor like 0.5, 1 or 10", ErrConfig, c.Speed)
	case c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0):
		return c, fmt.Errorf("%w: rate %v: want a positive number of messages per second", ErrConfig, c.Rate)
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

// Clock is the pacer's time source.
type Clock interface {
	// Now returns monotonic nanoseconds.
	Now() int64
	// Sleep blocks for about d or until ctx ends (returning its error).
	Sleep(ctx context.Context, d time.Duration) error
	// Yield gives up the processor briefly while spinning.
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

func (realClock) Yield() { runtime.Gosched() }

// Pacer decides when each message is due. Not safe for concurrent use.
type Pacer struct {
	cfg      Config
	anchored bool
	start    int64 // clock time of the first message
	ts0      int64 // its recorded timestamp
	n        uint64
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
func (p *Pacer) Target(ts int64) int64 {
	if !p.anchored {
		p.anchored, p.start, p.ts0 = true, p.cfg.Clock.Now(), ts
	}
	var due int64
	switch {
	case p.cfg.Max:
		due = p.start
	case p.cfg.Rate > 0:
		due = p.start + int64(float64(p.n)*1e9/p.cfg.Rate)
	default:
		due = p.start + int64(float64(ts-p.ts0)/p.cfg.Speed)
	}
	p.n++
	return due
}

// Wait blocks until the message stamped ts is due (see Target). A
// message whose timestamp is before the previous one's is due at once
// after it: recorded order wins over a stepped clock.
func (p *Pacer) Wait(ctx context.Context, ts int64) error {
	due := p.Target(ts)
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
		c.Yield()
	}
}

// Reset forgets the anchor: the next message starts a new timeline (a
// new pass of a loop).
func (p *Pacer) Reset() { p.anchored, p.n = false, 0 }

// Start is the clock time the timeline was anchored at (0 before the
// first message).
func (p *Pacer) Start() int64 { return p.start }

// Elapsed is the recorded time from the first message of the timeline to
// ts, scaled by the speed: the offset at which ts is due.
func (p *Pacer) Elapsed(ts int64) time.Duration {
	if !p.anchored || p.cfg.Max || p.cfg.Rate > 0 {
		return 0
	}
	return time.Duration(float64(ts-p.ts0) / p.cfg.Speed)
}
