package bench

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// The sender's pacing (sendLoop) runs on a synctest bubble's clock here:
// Now reads the bubble's time, the loop sleeps until a message is due, and
// a fake sender records what each send carried and when, so the schedule
// is checked to the nanosecond on any machine. Only the sleeping wait is
// testable this way (spin 0): a busy wait would hold the bubble's clock.

// pacedSend is one call of the fake sender: when (Now) and the stamps of
// the messages it carried.
type pacedSend struct {
	at    int64
	sched []int64
	seqs  []uint64
}

// fakeSender keeps every send. It never blocks.
type fakeSender struct{ sends []pacedSend }

func (f *fakeSender) send(msgs [][]byte) error {
	s := pacedSend{at: Now()}
	for _, m := range msgs {
		sched, seq, ok := ParseStamp(m)
		if !ok {
			panic("an unstamped message")
		}
		s.sched, s.seqs = append(s.sched, sched), append(s.seqs, seq)
	}
	f.sends = append(f.sends, s)
	return nil
}

func (f *fakeSender) finish(context.Context) error { return nil }
func (f *fakeSender) close() error                 { return nil }
func (f *fakeSender) packets() uint64              { return uint64(len(f.sends)) }

// pace runs sendLoop in a bubble with p and returns the result and what the
// sender saw, as offsets from the run's start.
func pace(t *testing.T, ctx context.Context, p loopParams) (sendResult, []pacedSend) {
	t.Helper()
	Now() // calibrate outside the bubble
	var r sendResult
	f := &fakeSender{}
	synctest.Test(t, func(t *testing.T) {
		if p.batch == 0 {
			p.batch = 64
		}
		p.goTimers = true
		r = sendLoop(ctx, f, newRing(Sizes{}, p.batch, 1), p)
	})
	for i := range f.sends {
		f.sends[i].at -= r.start
		for j := range f.sends[i].sched {
			f.sends[i].sched[j] -= r.start
		}
	}
	return r, f.sends
}

// TestSendLoopPacesOnTime: at 1,000 messages/s for a second, each
// message leaves alone at the millisecond it is due, stamped with that
// time and its sequence, and the run ends at the duration, not later.
func TestSendLoopPacesOnTime(t *testing.T) {
	r, sends := pace(t, context.Background(), loopParams{rate: 1000, duration: time.Second})
	require.EqualValues(t, 1000, r.sent)
	require.Equal(t, int64(time.Second), r.end-r.start, "the run ends at its duration")
	require.False(t, r.interrupted)
	require.Len(t, sends, 1000)
	for k, s := range sends {
		due := int64(k) * int64(time.Millisecond)
		require.Equal(t, due, s.at, "send %d left when due", k)
		require.Equal(t, []int64{due}, s.sched, "send %d stamped with its due time", k)
		require.Equal(t, []uint64{uint64(k + 1)}, s.seqs)
	}
	require.EqualValues(t, 1000, r.measured, "no warm-up: every message measured")
}

// TestSendLoopQuantum: with a quantum of 10 ms at 1,000 messages/s, a
// sender that is ahead sleeps until ten messages are due and sends them
// together, each still stamped with its own due time. At the duration's
// end the messages scheduled before it leave too: rate x duration in all.
func TestSendLoopQuantum(t *testing.T) {
	r, sends := pace(t, context.Background(), loopParams{rate: 1000, duration: 100 * time.Millisecond, quantum: 10 * time.Millisecond})
	require.EqualValues(t, 100, r.sent)
	require.Equal(t, int64(100*time.Millisecond), r.end-r.start)
	ms := int64(time.Millisecond)
	require.Len(t, sends, 11)
	last := sends[10]
	sends = sends[:10]
	require.Equal(t, 100*ms, last.at, "the last batch leaves at the end")
	require.Equal(t, []uint64{92, 93, 94, 95, 96, 97, 98, 99, 100}, last.seqs, "the messages due before the end")
	require.Equal(t, int64(0), sends[0].at)
	require.Len(t, sends[0].seqs, 1, "the first message leaves at once")
	for i, s := range sends[1:] {
		at := int64(i+1) * 10 * ms
		require.Equal(t, at, s.at, "batch %d", i+1)
		require.Len(t, s.seqs, 10, "batch %d: a quantum's worth", i+1)
		for j, sched := range s.sched {
			require.Equal(t, int64(s.seqs[j]-1)*ms, sched, "message %d stamped with its due time", s.seqs[j])
		}
	}
}

// TestSendLoopWarmupAndCount: with a 200 ms warm-up and a count of 300,
// the loop sends the warm-up's messages and then the 300 that are
// measured, and stops there, well before the duration.
func TestSendLoopWarmupAndCount(t *testing.T) {
	r, sends := pace(t, context.Background(), loopParams{rate: 1000, duration: 10 * time.Second, warmup: 200 * time.Millisecond, count: 300})
	require.EqualValues(t, 500, r.sent, "200 warm-up messages, then the count")
	require.EqualValues(t, 300, r.measured)
	require.Equal(t, int64(499*time.Millisecond), sends[len(sends)-1].at, "the last leaves when due")
	require.Equal(t, int64(499*time.Millisecond), r.end-r.start, "and the loop stops at once")
}

// TestSendLoopInterrupted: a context that ends mid-run stops the loop at
// its next wait, with what was sent until then.
func TestSendLoopInterrupted(t *testing.T) {
	var r sendResult
	var sends []pacedSend
	Now()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond+time.Microsecond)
		defer cancel()
		f := &fakeSender{}
		r = sendLoop(ctx, f, newRing(Sizes{}, 64, 1), loopParams{rate: 1000, duration: 10 * time.Second, batch: 64, goTimers: true})
		sends = f.sends
	})
	require.True(t, r.interrupted)
	require.EqualValues(t, 501, r.sent, "messages 0 to 500 ms were due before the interrupt")
	require.Len(t, sends, 501)
	require.Equal(t, int64(501*time.Millisecond), r.end-r.start, "stopped at the wait after the interrupt")
}
