package oneway

import (
	"cmp"
	"context"
	"errors"
	"math"
	"time"

	"github.com/mdbus/mdbus/internal/cfgcheck"
	"github.com/mdbus/mdbus/internal/synth"
)

// ErrConfig marks a FeedConfig that Feed refuses. Match with errors.Is.
var ErrConfig = errors.New("oneway: invalid feed config")

// DefaultFeedRate is FeedConfig.Rate when zero, messages/s.
const DefaultFeedRate = 10_000

// FeedConfig describes a synthetic feed: ITCH-shaped messages from
// synth.New(Seed) at Rate messages/s, for Count messages and/or Duration
// (whichever ends first; both zero: until ctx ends).
//
// One rule for the values of every field: the zero value means the
// default (DefaultFeedRate; no bound for Count and Duration). No field
// has a "none": a negative value is invalid, and Feed returns an error
// wrapping ErrConfig that names it.
type FeedConfig struct {
	Rate     float64
	Count    int
	Duration time.Duration
	Seed     uint64
	// Stamp writes the moment each batch is handed to Publish into its
	// messages' ITCH timestamps, so that a subscriber's one-way latency
	// measures the bus, not the pacing wait.
	Stamp bool
	// OnMessage, when set, sees every message after it is stamped and
	// before it is published (the demo hashes them).
	OnMessage func(msg []byte)
}

// feedBatch is the most messages handed to Publish at once.
const feedBatch = 256

// Feed paces a synthetic feed itself: message n is due n/Rate after the
// first; whatever is due (at most 256 messages) is generated, stamped
// now, and handed to publish in one call. A publisher's own rate limit
// would make the caller wait inside Publish, after the stamp, and the
// wait would show as latency. It returns the messages published; a
// publish error ends it. More than a batch behind at the end of the
// duration, it stops: the machine cannot keep the rate.
func Feed(ctx context.Context, cfg FeedConfig, publish func([][]byte) error) (int, error) {
	if err := cfgcheck.Negative(ErrConfig, cfgcheck.F("Rate", cfg.Rate), cfgcheck.F("Count", cfg.Count), cfgcheck.F("Duration", cfg.Duration)); err != nil {
		return 0, err
	}
	cfg.Rate = cmp.Or(cfg.Rate, DefaultFeedRate)
	g := synth.New(cfg.Seed)
	count := cfg.Count
	if cfg.Duration > 0 {
		if byDur := cfg.Rate * cfg.Duration.Seconds(); count == 0 || byDur < float64(count) {
			count = int(math.Ceil(byDur))
		}
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	bufs := make([][]byte, feedBatch)
	for i := range bufs {
		bufs[i] = make([]byte, 0, 64) // synth messages are at most 50 bytes
	}
	n := 0
	start := time.Now()
	for count == 0 || n < count {
		if ctx.Err() != nil {
			return n, nil
		}
		elapsed := time.Since(start)
		due := int(min(elapsed.Seconds()*cfg.Rate, math.MaxInt32)) + 1 // messages 0..due-1 are due
		if count > 0 {
			due = min(due, count)
		}
		if cfg.Duration > 0 && elapsed >= cfg.Duration && due-n > feedBatch {
			return n, nil
		}
		if due <= n {
			timer.Reset(time.Until(start.Add(time.Duration(float64(n) * float64(time.Second) / cfg.Rate))))
			select {
			case <-ctx.Done():
				return n, nil
			case <-timer.C:
			}
			continue
		}
		k := min(due-n, feedBatch)
		for i := range k {
			bufs[i] = g.Next(bufs[i][:0])
		}
		if cfg.Stamp {
			now := time.Now()
			for i := range k {
				Stamp(bufs[i], now)
			}
		}
		if cfg.OnMessage != nil {
			for i := range k {
				cfg.OnMessage(bufs[i])
			}
		}
		if err := publish(bufs[:k]); err != nil {
			return n, err
		}
		n += k
	}
	return n, nil
}
