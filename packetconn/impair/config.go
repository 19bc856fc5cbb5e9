package impair

import (
	"errors"
	"fmt"
	"math"
	"net"
	"time"
)

// Defaults applied to zero Config fields.
const (
	// DefaultReorderDepth is how many later datagrams overtake a
	// reordered one.
	DefaultReorderDepth = 3
	// DefaultReorderWait is the longest a reordered datagram is held when
	// fewer than ReorderDepth datagrams follow it (tail, idle feed).
	DefaultReorderWait = 10 * time.Millisecond
	// DefaultMaxHeld is how many datagrams one wrapper holds at most
	// (reordered and delayed together).
	DefaultMaxHeld = 1024
)

// Limits checked by Validate.
const (
	// MaxDelay bounds Delay+Jitter and ReorderWait: nothing is held
	// longer than this.
	MaxDelay = time.Minute
	// MaxReorderDepth bounds ReorderDepth.
	MaxReorderDepth = 1 << 16
	// MaxMaxHeld bounds MaxHeld.
	MaxMaxHeld = 1 << 20
)

var (
	// ErrInvalidConfig matches every error of Config.Validate and
	// tools/impair.RelayConfig validation.
	ErrInvalidConfig = errors.New("impair: invalid config")
	// ErrClosed is returned by calls on a closed Conn and by a second
	// Close. It wraps net.ErrClosed, so errors.Is(err, net.ErrClosed)
	// holds too, as it does for a closed socket.
	ErrClosed = fmt.Errorf("impair: %w", net.ErrClosed)
)

// Config describes the impairment of one direction of a connection. The
// zero value impairs nothing: every datagram passes unchanged, in order.
// Probabilities are per datagram, in [0,1].
//
// One rule for the values of every field: the zero value means the
// default (no impairment of that kind, or the Default constant its doc
// names). No field has a "none": a negative value is invalid, and
// Validate, NewReceiver and NewSender return an error wrapping
// ErrInvalidConfig that names it (Receiver and Sender panic with it).
type Config struct {
	// Loss is the probability that a datagram is dropped.
	Loss float64
	// Duplicate is the probability that a datagram that was not dropped
	// is delivered twice. The copy follows the original and takes its own
	// reorder and delay decisions.
	Duplicate float64
	// Reorder is the probability that a datagram (or copy) is held back
	// and overtaken by later ones.
	Reorder float64
	// ReorderDepth is how many later datagrams enter the layer before a
	// reordered one is released right after the last of them. 0 means
	// DefaultReorderDepth.
	ReorderDepth int
	// ReorderWait bounds how long a reordered datagram waits for those
	// later datagrams, so tail datagrams are never held forever. 0 means
	// DefaultReorderWait.
	ReorderWait time.Duration
	// Delay is latency added to every datagram that is not dropped; Jitter
	// adds a further uniform random latency in [0, Jitter). Datagrams
	// leave in order of their release time, so a Jitter larger than the
	// gap between datagrams also reorders them, as a real network does.
	// Zero for both means no delay stage at all.
	Delay, Jitter time.Duration
	// Seed and Stream seed the math/rand/v2 PCG generator. The same
	// Seed, Stream and sequence of datagrams give the same decisions.
	// The n-th connection wrapped by one Receiver or Sender function (n
	// from 0) uses Stream+n, so two subscribers sharing a Receiver lose
	// independently yet reproducibly.
	Seed, Stream uint64
	// Drop, when set, is evaluated first on every datagram, including
	// ones OnlyData exempts; the datagram is dropped when it returns true
	// (counted in Stats.RuleDropped). See DropSeqs, DropRange and
	// DropHeartbeats. It must not keep or modify pkt, and with Sender it
	// is called under the wrapper's lock.
	Drop func(pkt []byte) bool
	// OnlyData exempts from the random impairments every datagram that is
	// not a MoldUDP64 data packet (heartbeats, end of session,
	// re-requests, anything unparsable): they pass at once, untouched, and
	// consume no random draws, so decisions on data packets do not depend
	// on heartbeat timing. Default false: every datagram is impaired, as a
	// network would, which is what tail-loss recovery by heartbeats must
	// survive.
	OnlyData bool
	// MaxHeld bounds the datagrams held at once (reordered plus delayed).
	// When a datagram must be held and MaxHeld are, the held one due
	// soonest is released at once (Stats.Forced) instead of allocating.
	// 0 means DefaultMaxHeld.
	MaxHeld int
	// OnWrap, when set, is called with each Conn a Receiver or Sender
	// function makes, so a test can read Stats of a connection it handed
	// to a publisher or subscriber. It runs on the goroutine that wraps.
	OnWrap func(*Conn)
}

// Validate reports every invalid field, each error matching
// ErrInvalidConfig.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"Loss", c.Loss}, {"Duplicate", c.Duplicate}, {"Reorder", c.Reorder}} {
		if math.IsNaN(p.v) || p.v < 0 || p.v > 1 {
			bad("%s %v is not a probability in [0,1]", p.name, p.v)
		}
	}
	if c.ReorderDepth < 0 || c.ReorderDepth > MaxReorderDepth {
		bad("ReorderDepth %d not in [0,%d]", c.ReorderDepth, MaxReorderDepth)
	}
	if c.ReorderWait < 0 || c.ReorderWait > MaxDelay {
		bad("ReorderWait %v not in [0,%v]", c.ReorderWait, MaxDelay)
	}
	if c.Delay < 0 {
		bad("Delay %v is negative", c.Delay)
	}
	if c.Jitter < 0 {
		bad("Jitter %v is negative", c.Jitter)
	}
	if c.Delay >= 0 && c.Jitter >= 0 && c.Delay+c.Jitter > MaxDelay {
		bad("Delay+Jitter %v exceeds %v", c.Delay+c.Jitter, MaxDelay)
	}
	if c.MaxHeld < 0 || c.MaxHeld > MaxMaxHeld {
		bad("MaxHeld %d not in [0,%d]", c.MaxHeld, MaxMaxHeld)
	}
	return errors.Join(errs...)
}

// settings is a validated Config with defaults applied.
type settings struct {
	Config
	holds bool // some datagram may be held (reorder or delay)
}

func (c Config) withDefaults() (settings, error) {
	if err := c.Validate(); err != nil {
		return settings{}, err
	}
	if c.ReorderDepth == 0 {
		c.ReorderDepth = DefaultReorderDepth
	}
	if c.ReorderWait == 0 {
		c.ReorderWait = DefaultReorderWait
	}
	if c.MaxHeld == 0 {
		c.MaxHeld = DefaultMaxHeld
	}
	return settings{Config: c, holds: c.Reorder > 0 || c.Delay > 0 || c.Jitter > 0}, nil
}

// Stats counts what a wrapper did. Counts are per datagram copy where a
// duplicate makes two.
type Stats struct {
	// Seen counts datagrams that entered the layer: read from the inner
	// conn (Receiver) or handed to WriteBatch/WriteTo (Sender).
	Seen uint64
	// Dropped counts datagrams lost to the Loss probability.
	Dropped uint64
	// RuleDropped counts datagrams dropped by Config.Drop.
	RuleDropped uint64
	// Duplicated counts extra copies made.
	Duplicated uint64
	// Reordered counts copies held back for reordering.
	Reordered uint64
	// Delayed counts copies given added latency.
	Delayed uint64
	// Forced counts held copies released early: MaxHeld was reached, or
	// (Sender) Close flushed them.
	Forced uint64
	// Exempt counts datagrams OnlyData let through untouched.
	Exempt uint64
	// Out counts datagrams delivered to the caller (Receiver) or sent
	// (Sender), duplicates included.
	Out uint64
	// Held is the number of datagrams held right now.
	Held uint64
	// SendErrors counts failed writes of held datagrams by the Sender's
	// background goroutine (the first error is returned by Close).
	SendErrors uint64
}
