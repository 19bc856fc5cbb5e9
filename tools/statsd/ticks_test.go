package statsd

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// fakeBus is an emitter's bus that keeps each message's stamp and hands
// the message on, as a subscriber would deliver it.
type fakeBus struct {
	mu      sync.Mutex
	seq     wire.Seq
	stamps  []time.Time
	ticks   []time.Time
	deliver func(subscriber.Message)
	onTick  func(n int) // called with the number of ticks so far
}

func (f *fakeBus) MaxMessageLen() int { return 1452 }

func (f *fakeBus) Publish(msg []byte) (wire.Seq, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := ParseMessage(msg)
	if err != nil {
		return 0, err
	}
	f.seq++
	at := time.Unix(0, m.Time)
	f.stamps = append(f.stamps, at)
	if len(m.Lines) == 0 {
		f.ticks = append(f.ticks, at)
		if f.onTick != nil {
			f.onTick(len(f.ticks))
		}
	}
	if f.deliver != nil {
		f.deliver(subscriber.Message{Seq: f.seq, Data: slices.Clone(msg)})
	}
	return f.seq, nil
}

// TestIdleTicksEveryTick: an idle relay publishes one clock tick per
// tick interval, on the interval's grid (multiples of it since the
// epoch), whatever the moment it started.
func TestIdleTicksEveryTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(123 * time.Millisecond) // start off the grid
		const tick = 500 * time.Millisecond
		twenty := make(chan struct{})
		fb := &fakeBus{onTick: func(n int) {
			if n == 20 {
				close(twenty)
			}
		}}
		e := newEmitter(fb, 0, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			e.runTicks(ctx, tick, nil)
		}()
		start := time.Now()
		<-twenty // the bubble's clock runs on while the emitter sleeps
		require.LessOrEqual(t, time.Since(start), 10*time.Second, "20 ticks within 10 s at --tick %v", tick)
		cancel()
		<-done
		require.Len(t, fb.ticks, 20, "ticks at --tick %v: %v", tick, fb.ticks)
		for i, at := range fb.ticks {
			want := start.Truncate(tick).Add(time.Duration(i+1) * tick)
			require.Equal(t, want, at, "tick %d", i)
		}
	})
}

// TestIntervalWrittenAtItsEnd: with metrics arriving at random moments
// and idle stretches in between, every flush interval reaches the
// backends within 100 ms of its end (relay clock = collector clock here).
func TestIntervalWrittenAtItsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(377 * time.Millisecond) // the relay starts off the grid
		s := newSocketless(t, CollectorConfig{FlushInterval: 10 * time.Second})
		var written []time.Time
		s.rec.onWrite = func(*Flush) { written = append(written, time.Now()) }
		fb := &fakeBus{deliver: func(m subscriber.Message) {
			m.Stream = s.id
			s.onMessage(m)
		}}
		e := newEmitter(fb, 0, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			e.runTicks(ctx, DefaultTickInterval, nil)
		}()
		rng := rand.New(rand.NewPCG(1, 2))
		b := newBuilder(e)
		end := time.Now().Add(2 * time.Minute)
		for time.Now().Before(end) {
			b.add([]byte("a:1|c"))
			b.flush()
			pause := rng.Int64N(int64(3 * time.Second))
			if rng.IntN(4) == 0 {
				pause += rng.Int64N(int64(25 * time.Second)) // an idle stretch
			}
			time.Sleep(time.Duration(pause)) // on the bubble's clock
		}
		synctest.Wait()
		cancel()
		<-done
		s.rec.mu.Lock()
		flushes := slices.Clone(s.rec.flushes)
		at := slices.Clone(written)
		s.rec.mu.Unlock()
		require.GreaterOrEqual(t, len(flushes), 10)
		for i, f := range flushes {
			intervalEnd := f.Start.Add(f.Interval)
			late := at[i].Sub(intervalEnd)
			require.True(t, late >= 0 && late <= 100*time.Millisecond,
				"interval ending %v written %v after its end", intervalEnd.Format(time.TimeOnly), late)
		}
	})
}
