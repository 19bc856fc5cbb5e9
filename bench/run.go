package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/mdbus/mdbus/internal/alarm"
	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/wire"
)

// Bench runs benchmark cases and gathers their results into one Report,
// with the histograms behind it for the .hgrm, .hlog and chart files. Each
// run uses fresh groups (the next port), so no run hears another's
// stragglers.
//
// A Bench is not safe for concurrent use: run one case at a time.
type Bench struct {
	s         settings
	path      *labPath // the veth path's hosts; nil on lo
	coll      *collector
	rep       Report
	startMono int64
	port      uint16
	closed    bool
	finished  bool
	// notedStamps: the report already says mdbus has no kernel timestamps.
	notedStamps bool
}

// New validates cfg and returns a Bench ready to run cases. Close it.
func New(cfg Config) (*Bench, error) {
	s, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	path, err := openPath(s.Path, s.PathHosts)
	if err != nil {
		return nil, err
	}
	b := &Bench{s: s, path: path, startMono: Now(), port: s.Group.Port()}
	b.coll = newCollector(b.startMono, s.Interval)
	b.rep = Report{
		Schema:  Schema,
		Command: s.Command,
		Started: time.Now(),
		Machine: machine(),
		Settings: Settings{
			Interface: s.Interface, TTL: s.TTL, PayloadSize: s.PayloadSize, Batch: s.Batch, Linger: s.Linger.Seconds(),
			ReadBuffer: s.ReadBuffer, WriteBuffer: s.WriteBuffer, Duration: s.Duration.Seconds(),
			Count: s.Count, Warmup: s.Warmup.Seconds(), Interval: s.Interval.Seconds(),
			Timestamps: s.Timestamps, Seed: s.Seed, InlineThroughput: s.InlineThroughput, NoGSO: s.NoGSO, NoGRO: s.NoGRO,
			SubProcs: max(s.SubProcs, 0), PubProcs: max(s.PubProcs, 0), Path: s.Path,
		},
	}
	return b, nil
}

// SetInLab records in the report whether the run happens inside the
// private network lab.
func (b *Bench) SetInLab(in bool) { b.rep.Machine.InLab = in }

// Note adds a line to the report's notes.
func (b *Bench) Note(format string, a ...any) {
	b.rep.Notes = append(b.rep.Notes, fmt.Sprintf(format, a...))
}

// Close stops the histogram collector. Safe to call twice; later calls
// return ErrClosed.
func (b *Bench) Close() error {
	if b.closed {
		return ErrClosed
	}
	b.closed = true
	b.coll.close()
	return b.path.close()
}

// groups returns n groups for the next run: consecutive addresses from the
// configured one, all on a fresh port.
func (b *Bench) groups(n int) []netip.AddrPort {
	port := b.port
	b.port++
	if b.port == 0 {
		b.port = 1024
	}
	out := make([]netip.AddrPort, n)
	a := b.s.Group.Addr()
	for i := range out {
		out[i] = netip.AddrPortFrom(a, port)
		a = a.Next()
	}
	return out
}

// MaxMessage is the largest message sys carries at the configured payload
// size.
func (b *Bench) MaxMessage(sys System) int { return MaxMessageFor(sys, b.s.PayloadSize) }

// MaxMessageFor is the largest message sys carries in packets of payload
// bytes.
func MaxMessageFor(sys System, payload int) int {
	if sys == Raw {
		return wire.MaxPayloadSize
	}
	return wire.MaxMessageLen(payload)
}

// ---- the sending loop ----

type loopParams struct {
	rate     float64 // messages/s; 0 = as fast as possible
	count    int64   // messages after the warm-up; 0 = no limit
	duration time.Duration
	warmup   time.Duration
	// warmEnd, when set, is the end of the warm-up (CLOCK_MONOTONIC ns),
	// as already told to the receivers; it overrides warmup.
	warmEnd int64
	batch   int
	spin    time.Duration // busy-wait window before a scheduled send; 0 sleeps
	// quantum, when positive, makes a sender that is ahead sleep until
	// quantum's worth of messages is due, instead of until the next one:
	// at millions of messages per second a sleep per message would spend
	// the CPU in the runtime's timers rather than in the bus.
	quantum time.Duration
	// goTimers makes the sleeps between bursts wait on a Go timer alone
	// (alarm.NewGo), as a test in a testing/synctest bubble needs.
	goTimers bool
}

type sendResult struct {
	sent, bytes uint64
	measured    uint64 // messages scheduled after the warm-up
	start, end  int64
	interrupted bool
	err         error
}

// sendLoop stamps messages from ring with their scheduled send time and a
// sequence number from 1 and hands them to snd: at rate, or as fast as snd
// takes them. A message's stamp is the time it was due, not the time it
// left, so a stall in the sender shows up in the latency of every message
// it delayed (the scheduled-time correction of coordinated omission). When
// late, the sender sends everything due at once, up to p.batch messages.
func sendLoop(ctx context.Context, snd sender, ring *messageRing, p loopParams) sendResult {
	done := ctx.Done()
	msgs := make([][]byte, p.batch)
	var r sendResult
	start := Now()
	end := start + int64(p.duration)
	warmEnd := start + int64(p.warmup)
	if p.warmEnd != 0 {
		warmEnd = max(p.warmEnd, start)
	}
	period := 0.0
	limit := uint64(1<<63 - 1)
	if p.rate > 0 {
		period = 1e9 / p.rate
		if p.count > 0 {
			limit = uint64(math.Ceil(float64(warmEnd-start)/period)) + uint64(p.count)
		}
	} else if p.count > 0 {
		limit = uint64(p.count)
	}
	r.start = start
	// The sleeps between bursts wait on an alarm (see waitUntil).
	var clk *alarm.Clock
	switch {
	case p.rate > 0 && p.goTimers:
		clk = alarm.NewGo()
	case p.rate > 0:
		clk = alarm.New()
	}
	if clk != nil {
		defer clk.Close()
	}
	var k uint64
	for k < limit {
		now := Now()
		// At the end, the messages due before it still leave (a paced
		// sender that sleeps a quantum between sends would otherwise miss
		// up to a quantum of them), then the loop stops.
		last := now >= end
		if last {
			now = end
		}
		select {
		case <-done:
			r.interrupted = true
		default:
		}
		if r.interrupted {
			break
		}
		n := uint64(p.batch)
		if p.rate > 0 {
			due := min(uint64(float64(now-start)/period)+1, limit)
			if last {
				due = min(uint64(math.Ceil(float64(end-start)/period)), limit) // scheduled before end
			}
			if due <= k {
				if last {
					break
				}
				ahead := 0.0
				if p.quantum > 0 {
					ahead = max(0, math.Floor(float64(p.quantum)/period)-1)
				}
				waitUntil(clk, start+int64((float64(k)+ahead)*period), p.spin, end)
				continue
			}
			n = min(due-k, n)
		} else {
			if last {
				break
			}
			n = min(n, limit-k)
		}
		for i := range n {
			m := ring.next()
			sched := now
			if p.rate > 0 {
				sched = start + int64(float64(k+i)*period)
			}
			PutStamp(m, sched, k+i+1)
			msgs[i] = m
			r.bytes += uint64(len(m))
			if sched >= warmEnd {
				r.measured++
			}
		}
		if err := snd.send(msgs[:n]); err != nil {
			r.err = err
			break
		}
		k += n
	}
	r.sent = k
	r.end = Now()
	return r
}

// waitUntil returns at time t or at end, whichever is first: it sleeps on
// clk until spin before t, then busy-waits. clk, not time.Sleep: in an
// idle process Go's timers wake up to a millisecond late (internal/alarm),
// and any other wake-up in the process meanwhile (a publisher's lingering
// packet, a subscriber's NAK timer) restarts that rounding, so the
// bursts' lateness, which every message's latency includes, depended on
// what else the process did.
func waitUntil(clk *alarm.Clock, t int64, spin time.Duration, end int64) {
	t = min(t, end)
	d := time.Duration(t - Now())
	if d <= 0 {
		return
	}
	if d > spin {
		clk.Set(monotime.Now().Add(d - spin))
		clk.Wait()
	}
	// Busy-wait, but give the CPU to any other runnable thread on each
	// turn (sched_yield), and this goroutine's P to any runnable goroutine
	// every 16 turns (runtime.Gosched): on a small machine the receivers
	// must not wait behind the spinner, neither for a CPU (a plain spin
	// holds it for a whole kernel time slice) nor for a P (the spinner
	// holds one of GOMAXPROCS).
	for i := 1; spin > 0 && Now() < t; i++ {
		if i%16 == 0 {
			runtime.Gosched()
			continue
		}
		schedYield()
	}
}

// rateName formats a rate for names: "max", "10000", "4M".
func rateName(r float64) string {
	trim := func(v float64) string { return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64) }
	switch {
	case r == 0:
		return "max"
	case r >= 1e6:
		return trim(r/1e6) + "M"
	case r >= 1e3:
		return trim(r/1e3) + "k"
	}
	return trim(r)
}

// seriesName is a file- and tag-safe name of a run's histogram series.
func seriesName(parts ...string) string {
	s := strings.Join(parts, "-")
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
			return r
		}
		return '_'
	}, s)
}

// runLength is a case's duration and count: its own where set, else the
// Config's.
func (b *Bench) runLength(dur time.Duration, count int64) (time.Duration, int64) {
	if dur == 0 {
		dur = b.s.Duration
	}
	if count == 0 {
		count = b.s.Count
	}
	return dur, count
}

// finishRun ends the sender's session and waits, at most Config.Drain
// (even when ctx has ended), until every receiver has seen the end. It
// returns the sender's error.
func (b *Bench) finishRun(ctx context.Context, snd sender, subs []subHandle) error {
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.s.Drain)
	defer cancel()
	ferr := snd.finish(drainCtx)
	ends := make([]<-chan struct{}, 0, len(subs))
	for _, s := range subs {
		ends = append(ends, s.ended())
	}
	drainWait(drainCtx, ends)
	return ferr
}

// recoveryOf is the recovery-time percentiles of series, nil if nothing
// was recovered.
func (b *Bench) recoveryOf(series string) *Percentiles {
	h, re := b.coll.total(series + "-recovery")
	if h.TotalCount() == 0 {
		return nil
	}
	p := percentiles(h, re)
	return &p
}

// runError joins a run's errors; an interrupted run's also matches
// context.Canceled. The first is the one its report records.
func runError(interrupted bool, errs ...error) (recorded, returned error) {
	err := errors.Join(errs...)
	if interrupted {
		return err, errors.Join(context.Canceled, err)
	}
	return err, err
}

// drainWait waits until every channel is closed or ctx ends.
func drainWait(ctx context.Context, chs []<-chan struct{}) bool {
	for _, ch := range chs {
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

var errInterrupted = errors.New("bench: interrupted")
