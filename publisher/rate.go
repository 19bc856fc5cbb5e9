package publisher

import (
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/internal/ratelimit"
	"github.com/mdbus/mdbus/wire"
)

// rateBurst is how much of its rate a token bucket may spend at once: the
// bucket holds rate*rateBurst tokens (at least one message's worth), so
// that sleeps coarser than one message's spacing still keep the average.
const rateBurst = 10 * time.Millisecond

// pacer is the rate limit (Config.RateMessages, RateBytes): one bucket of
// messages, one of bytes. Publish and PublishBatch pass every message
// through wait before they append it, and tell opened when it opened a
// packet, whose header the bytes bucket then pays as a debt (see package
// ratelimit): the cost is known only after the append. Off (a zero
// pacer) when neither rate is set. Not safe for concurrent use; the
// Publication guards it with its turn.
type pacer struct {
	msgs, bytes ratelimit.Bucket
	timer       *time.Timer // nil when off
}

func newPacer(msgRate, byteRate, payloadSize float64, now monotime.Time) pacer {
	if msgRate <= 0 && byteRate <= 0 {
		return pacer{}
	}
	bucket := func(rate, minBurst float64) ratelimit.Bucket {
		return ratelimit.New(now, rate, max(rate*rateBurst.Seconds(), minBurst))
	}
	t := time.NewTimer(time.Hour)
	t.Stop()
	return pacer{msgs: bucket(msgRate, 1), bytes: bucket(byteRate, payloadSize), timer: t}
}

// on reports whether a rate is set.
func (r *pacer) on() bool { return r.timer != nil }

// wait sleeps until a message of n bytes is within the rate and takes its
// tokens (its length prefix included). It returns ErrClosed when closing
// is closed first.
func (r *pacer) wait(n int, closing <-chan struct{}, st *counters) error {
	cost := float64(n + wire.MsgLenLen)
	for {
		now := monotime.Now()
		r.msgs.Refill(now)
		r.bytes.Refill(now)
		d := max(r.msgs.Wait(1), r.bytes.Wait(cost))
		if d == 0 {
			r.msgs.Take(1)
			r.bytes.Take(cost)
			return nil
		}
		st.rateWaits.Add(1)
		r.timer.Reset(d)
		select {
		case <-r.timer.C:
		case <-closing:
			r.timer.Stop()
			return ErrClosed
		}
		st.rateWaitNano.Add(uint64(monotime.Since(now)))
	}
}

// opened charges the header of a packet the last message opened.
func (r *pacer) opened() { r.bytes.Take(wire.HeaderLen) }

func (r *pacer) stop() {
	if r.timer != nil {
		r.timer.Stop()
	}
}
