// Package ratelimit is the token bucket of mdbus, on monotonic time: the
// publisher paces messages with it (publisher.Config.RateMessages and
// RateBytes) and the retransmit server bounds its answers with it, in
// total and per requester.
//
// # Debt rule
//
// Take always spends what it is asked to, so a bucket may go below zero:
// that is a debt, and the bucket pays it back from its refill before it
// has tokens for anything else (Has is false and Wait counts the debt in).
// Whether a user ever goes into debt is the user's rule, not the bucket's:
//
//   - The retransmit server never does: it takes only after Has said the
//     tokens are there, so the bytes it sends between t0 and t1 are at most
//     Burst + Rate×(t1−t0).
//   - The publisher admits a message when Wait says its tokens are there,
//     and later takes the cost it learns only then (a packet header, once
//     the message turned out to open a packet), which may leave a debt that
//     delays the next message.
//
// A Bucket is not safe for concurrent use: its owner guards it.
package ratelimit

import (
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
)

// Bucket is a token bucket: it refills at Rate tokens per second up to
// Burst tokens. The zero Bucket (rate 0) never limits: Has is always true,
// Wait always 0, and Take and Refill do nothing.
type Bucket struct {
	tokens float64
	rate   float64 // tokens per second; 0: unlimited
	burst  float64
	last   monotime.Time
}

// New returns a full bucket of rate tokens per second, burst deep, or an
// unlimited one when rate is 0 or less.
func New(now monotime.Time, rate, burst float64) Bucket {
	if rate <= 0 {
		return Bucket{}
	}
	return Bucket{tokens: burst, rate: rate, burst: burst, last: now}
}

// Limited reports whether the bucket limits at all (a rate above 0).
func (b *Bucket) Limited() bool { return b.rate != 0 }

// Rate is the refill rate in tokens per second (0: unlimited).
func (b *Bucket) Rate() float64 { return b.rate }

// Tokens is what the bucket holds as of its last Refill; negative is a
// debt.
func (b *Bucket) Tokens() float64 { return b.tokens }

// SetRate changes the rate and depth from now on. Refill first, so that
// the time before counts at the old rate; tokens above the new depth are
// cut at the next Refill. A rate of 0 or less would make the bucket
// unlimited and is ignored.
func (b *Bucket) SetRate(rate, burst float64) {
	if rate <= 0 {
		return
	}
	b.rate, b.burst = rate, burst
}

// Refill adds the tokens earned since the last Refill, up to the depth.
// Time that goes backwards changes nothing.
func (b *Bucket) Refill(now monotime.Time) {
	if b.rate == 0 || now <= b.last {
		return
	}
	b.tokens = min(b.burst, b.tokens+b.rate*now.Sub(b.last).Seconds())
	b.last = now
}

// Has reports whether cost tokens are there (as of the last Refill).
func (b *Bucket) Has(cost float64) bool { return b.rate == 0 || b.tokens >= cost }

// Wait is how long after the last Refill cost tokens will be there: 0 when
// they are now, else a duration rounded up, so that a caller that sleeps
// it and refills finds them.
func (b *Bucket) Wait(cost float64) time.Duration {
	if b.Has(cost) {
		return 0
	}
	return time.Duration((cost-b.tokens)/b.rate*float64(time.Second)) + 1
}

// Take spends cost tokens, going into debt when there are fewer (see the
// package doc).
func (b *Bucket) Take(cost float64) {
	if b.rate != 0 {
		b.tokens -= cost
	}
}
