package nak

import (
	"errors"
	"fmt"
	"time"

	"github.com/mdbus/mdbus/internal/cfgcheck"
	"github.com/mdbus/mdbus/wire"
)

// ErrConfig marks a Config that Check refuses. Match with errors.Is.
var ErrConfig = errors.New("nak: invalid config")

// Range is the half-open sequence range [From, To). A Range with
// From >= To is empty; the LossDetector ignores empty ranges.
type Range struct{ From, To wire.Seq }

// Len is the number of sequences in r: To-From, or 0 when r is empty.
func (r Range) Len() uint64 {
	if r.From >= r.To {
		return 0
	}
	return uint64(r.To - r.From)
}

// String formats r as "[From,To)".
func (r Range) String() string { return fmt.Sprintf("[%d,%d)", r.From, r.To) }

// Defaults used for the zero fields of Config. The package documentation
// explains why they suit a LAN.
const (
	// DefaultDelay is the upper bound of the random delay before the first
	// NAK of a gap: uniform in [0, 2 ms).
	DefaultDelay = 2 * time.Millisecond
	// DefaultRetry is the wait after the first NAK before the second.
	DefaultRetry = 10 * time.Millisecond
	// DefaultMaxRetry caps the doubling retry interval.
	DefaultMaxRetry = 100 * time.Millisecond
	// DefaultContinue is the quiet time after a partial answer before the
	// rest of the range is asked for.
	DefaultContinue = time.Millisecond
	// DefaultDeadline is how long after a gap was first seen it is given up.
	DefaultDeadline = time.Second
	// DefaultMaxRequest is the largest number of messages in one re-request.
	DefaultMaxRequest = 1024
	// DefaultMaxPending is the largest number of messages tracked missing at
	// once per stream.
	DefaultMaxPending = 1 << 16
	// DefaultWindow is the number of re-requests of MaxRequest messages a
	// stream keeps in flight.
	DefaultWindow = 256
)

// maxDuration caps every configured duration (about 36 years) so that a
// Time plus a duration never overflows for any clock near its origin.
const maxDuration = time.Duration(1 << 60)

// Config tunes a LossDetector. The zero value gives the defaults above.
//
// One rule for the values of every field: the zero value means the
// default. No field has a "none": a negative value is invalid, and Check
// returns an error wrapping ErrConfig that names it (subscriber.New
// refuses such a Config.Recovery.NAK). NewLossDetector, which cannot
// fail, takes a negative field as zero, its default.
type Config struct {
	// Delay bounds the random delay before the first NAK of a gap: the
	// delay is drawn uniformly from [0, Delay). Default DefaultDelay (2 ms),
	// sized for multicast repairs and A/B or reordering slack on a LAN. For a
	// unicast-only session, set Generator to FixedDelay(0) or a small fixed
	// value such as 100 µs instead.
	Delay time.Duration
	// Retry is the wait after the first NAK of a range before asking again
	// while it is still missing; it doubles after every further NAK (backoff).
	// Default DefaultRetry (10 ms).
	Retry time.Duration
	// MaxRetry caps the doubled retry interval. Default DefaultMaxRetry
	// (100 ms); raised to Retry when smaller.
	MaxRetry time.Duration
	// Continue: when repairs fill the front of a range already asked for
	// and leave the rest missing (a MoldUDP64 server answers a request with
	// at most one packet), the rest is asked for once no repair of it has
	// come for Continue plus a delay drawn as for a new gap (so that the
	// receivers of a multicast repair suppress each other's requests for
	// the rest, as for the first NAK), instead of waiting out the retry
	// interval: the answer was partial, not lost. Default DefaultContinue
	// (1 ms), long enough for the packets of a larger answer, sent back to
	// back, to arrive.
	Continue time.Duration
	// Deadline: a range still missing this long after its gap was first seen
	// is given up and returned by Poll as lost; a range that had to wait for
	// room in the Window, this long after its first NAK (the subscriber's
	// own pacing does not count against it). Default DefaultDeadline (1 s).
	Deadline time.Duration
	// MaxRequest is the largest number of messages in one re-request range
	// returned by Poll; longer ranges are split. Default DefaultMaxRequest
	// (1024); capped at wire.MaxCount.
	MaxRequest int
	// MaxPending bounds the messages tracked missing at once. A gap whose
	// new messages would take Pending above MaxPending is declared lost at
	// once, whole, and never requested (see "Bounded gaps" in the package
	// documentation). Default DefaultMaxPending (65536).
	MaxPending uint64
	// Window bounds what a stream has asked for and not yet received, in
	// re-requests of the largest size (MaxRequest, or SetMaxRequest): a
	// first NAK is sent only for the messages that fit, and the rest of a
	// long gap is asked as answers make room (looked at every Continue).
	// It keeps a long gap from becoming a burst of requests the
	// retransmitter must hold back or refuse, while keeping many in
	// flight. Retries are not limited. Default DefaultWindow (256).
	Window int
	// Seed seeds the uniform delay generator (math/rand/v2 PCG) so that a
	// test replays exactly. Zero means a random seed: receivers that share
	// a seed draw the same delays and defeat NAK suppression.
	Seed uint64
	// Generator, when not nil, replaces the uniform generator built from
	// Delay and Seed: it is asked once per new gap for the delay before that
	// gap's first NAK (negative results count as zero). Use FixedDelay for
	// unicast. It is called only from OnGap, on the detector's goroutine.
	Generator DelayGenerator
}

// Check returns an error wrapping ErrConfig that names the first field
// of c holding a negative value, or nil.
func (c Config) Check() error {
	return cfgcheck.Negative(ErrConfig,
		cfgcheck.F("Delay", c.Delay), cfgcheck.F("Retry", c.Retry), cfgcheck.F("MaxRetry", c.MaxRetry),
		cfgcheck.F("Continue", c.Continue), cfgcheck.F("Deadline", c.Deadline),
		cfgcheck.F("MaxRequest", c.MaxRequest), cfgcheck.F("Window", c.Window))
}

// withDefaults returns c with defaults applied and values clamped; a
// negative field (which Check refuses) takes its default.
func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
		*d = min(*d, maxDuration)
	}
	def(&c.Delay, DefaultDelay)
	def(&c.Retry, DefaultRetry)
	def(&c.MaxRetry, DefaultMaxRetry)
	def(&c.Deadline, DefaultDeadline)
	def(&c.Continue, DefaultContinue)
	c.MaxRetry = max(c.MaxRetry, c.Retry)
	if c.MaxRequest <= 0 {
		c.MaxRequest = DefaultMaxRequest
	}
	c.MaxRequest = min(c.MaxRequest, wire.MaxCount)
	if c.MaxPending == 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	return c
}

// Stats counts what a LossDetector did since it was made or last Reset.
// Message counts are sequences, not packets.
type Stats struct {
	// Gaps counts OnGap calls that added at least one message not tracked
	// before; GapMessages counts those messages.
	Gaps, GapMessages uint64
	// NAKs counts times a tracked range was asked for: its first NAK plus
	// every retry. Retries counts the retries alone.
	NAKs, Retries uint64
	// Requests counts the ranges Poll appended to reqs (after splitting by
	// MaxRequest and joining adjacent ranges due together); Requested counts
	// the messages in them, retries included.
	Requests, Requested uint64
	// Filled counts tracked-missing messages that arrived (OnReceived).
	Filled uint64
	// Suppressed counts the messages of Filled that arrived before their
	// range's first NAK, so the NAK was never sent.
	Suppressed uint64
	// Confirmed counts messages whose first NAK was not sent because the
	// retransmitter confirmed another receiver's request for them
	// (OnConfirm).
	Confirmed uint64
	// LostRanges and LostMessages count what Poll and GiveUp returned as
	// lost, including the overflow below.
	LostRanges, LostMessages uint64
	// Overflows counts gaps declared lost at once by the MaxPending rule;
	// OverflowMessages counts their messages.
	Overflows, OverflowMessages uint64
}
