package publisher

import (
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
)

// rateBurst is how much of its rate a token bucket may spend at once: the
// bucket holds rate*rateBurst tokens (at least one message's worth), so
// that sleeps coarser than one message's spacing still keep the average.
const rateBurst = 10 * time.Millisecond

// bucket is a token bucket on monotonic time. A zero bucket (rate 0) never
// limits. Not safe for concurrent use; the Publication guards it with pubMu.
type bucket struct {
	rate   float64 // tokens per second; 0 means unlimited
	burst  float64
	tokens float64
	last   monotime.Time
}

// newBucket returns a full bucket of rate tokens per second holding at
// least minBurst tokens, or an unlimited one when rate is 0.
func newBucket(rate, minBurst float64, now monotime.Time) bucket {
	if rate <= 0 {
		return bucket{}
	}
	burst := max(rate*rateBurst.Seconds(), minBurst)
	return bucket{rate: rate, burst: burst, tokens: burst, last: now}
}

func (b *bucket) refill(now monotime.Time) {
	if b.rate == 0 || now <= b.last {
		return
	}
	b.tokens = min(b.burst, b.tokens+b.rate*now.Sub(b.last).Seconds())
	b.last = now
}

// wait is how long until cost tokens are there; 0 when they are now.
func (b *bucket) wait(cost float64) time.Duration {
	if b.rate == 0 || b.tokens >= cost {
		return 0
	}
	return time.Duration((cost-b.tokens)/b.rate*float64(time.Second)) + 1
}

// take spends cost tokens; the bucket may go negative (a debt the next
// wait pays).
func (b *bucket) take(cost float64) {
	if b.rate != 0 {
		b.tokens -= cost
	}
}
