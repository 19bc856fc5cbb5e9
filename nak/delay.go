package nak

import (
	"math/bits"
	"math/rand/v2"
	"time"
)

// DelayGenerator chooses the delay between detecting a gap and sending its
// first NAK, after Aeron's FeedbackDelayGenerator. Implementations need not
// be safe for concurrent use: a LossDetector calls its generator only from
// OnGap.
type DelayGenerator interface {
	Delay() time.Duration
}

// UniformDelay draws delays uniformly from [0, Max) with a PCG generator
// (math/rand/v2), so a given seed replays the same sequence. It is the
// suppression back-off of PGM (RFC 3208, NAK_BO_IVL) and NORM (RFC 5740,
// uniform variant). It is not safe for concurrent use. Delay does not
// allocate.
type UniformDelay struct {
	max time.Duration
	pcg rand.PCG
}

// NewUniformDelay returns a generator of delays uniform in [0, max), seeded
// with seed. A max of zero or less yields zero delays.
func NewUniformDelay(max time.Duration, seed uint64) *UniformDelay {
	u := new(UniformDelay)
	u.init(max, seed)
	return u
}

// init sets max and seeds the generator in place.
func (u *UniformDelay) init(max time.Duration, seed uint64) {
	u.max = max
	// The second PCG word is derived from the first so one uint64 seeds it;
	// the constant is an arbitrary odd number (golden ratio).
	u.pcg.Seed(seed, seed^0x9e3779b97f4a7c15)
}

// Max is the exclusive upper bound of the delays.
func (u *UniformDelay) Max() time.Duration { return u.max }

// Delay returns the next delay, in [0, Max).
func (u *UniformDelay) Delay() time.Duration {
	if u.max <= 0 {
		return 0
	}
	// Multiply-shift maps a uniform 64-bit value onto [0, max); the bias is
	// below max/2^64, far under a nanosecond's worth for any sane max.
	hi, _ := bits.Mul64(u.pcg.Uint64(), uint64(u.max))
	return time.Duration(hi)
}

// FixedDelay is a DelayGenerator that always returns its own value, as
// Aeron's StaticDelayGenerator does for unicast: with a single receiver
// there is nobody to suppress, so a zero or tiny delay is best.
// FixedDelay(0) sends the first NAK at once.
type FixedDelay time.Duration

// Delay returns time.Duration(f).
func (f FixedDelay) Delay() time.Duration { return time.Duration(f) }
