package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// PingPong is the closed-loop latency mode, comparable to Aeron's Ping and
// Pong samples: one message in flight. The pinger stamps a message with
// the time it sends it and publishes it on group A; a ponger in its own
// process answers every message of A on group B at once; the pinger,
// subscribed to B, records the round trip and sends the next ping from its
// receiving goroutine, as Aeron's Ping polls and offers on one thread.
// With Config.BusyPoll both ends spin on their sockets. The run reports
// each side's CPU time over wall time (getrusage of each process).
const PingPong = "ping-pong"

// pingTimeout is how long the pinger waits for a pong before it counts a
// timeout and sends the next ping.
const pingTimeout = 100 * time.Millisecond

// ClosedLoop describes a ping-pong run.
type ClosedLoop struct {
	// RoundTripsPerSec is what the loop achieved after the warm-up.
	RoundTripsPerSec float64 `json:"round_trips_per_s"`
	// PingCPU and PongCPU are each side's process CPU time (user +
	// system) over wall time: 1 is one core busy for the whole run.
	PingCPU float64 `json:"ping_cpu"`
	PongCPU float64 `json:"pong_cpu"`
	// Timeouts counts pings whose pong had not come after pingTimeout.
	Timeouts uint64 `json:"timeouts"`
	// BusyPoll is both ends' busy-poll window, seconds (0: none).
	BusyPoll float64 `json:"busy_poll_s"`
	// PingInline and PongInline are the shares of the mdbus pinger's and
	// ponger's data packets sent inline, on the goroutine that received
	// the previous message, rather than by the publication's sending
	// goroutine (publisher.Stats.InlineSends / Packets; 1 is every one).
	// Absent for raw UDP, which always sends on the receiving goroutine.
	PingInline *float64 `json:"ping_inline,omitempty"`
	PongInline *float64 `json:"pong_inline,omitempty"`
}

// closedLoop sends a ping whenever the previous one's pong arrives (pong,
// on the pinger's receiving goroutine) or times out (run).
type closedLoop struct {
	mu       sync.Mutex
	snd      sender
	ring     *messageRing
	msg      [1][]byte
	seq      uint64 // the ping in flight
	sentAt   int64
	end      int64
	warmEnd  int64
	count    uint64 // stop after this many measured pings; 0: none
	measured uint64 // pings sent at or after warmEnd
	measEnd  int64  // when the last pong (or timeout) of the run came
	timeouts uint64
	stopped  bool
	err      error
	done     chan struct{}
}

// sendLocked sends the next ping, or ends the loop. l.mu is held.
func (l *closedLoop) sendLocked() {
	now := Now()
	if now >= l.end || (l.count > 0 && l.measured >= l.count) || l.err != nil {
		l.measEnd = now
		l.stopLocked()
		return
	}
	m := l.ring.next()
	l.seq++
	PutStamp(m, now, l.seq)
	if now >= l.warmEnd {
		l.measured++
	}
	l.msg[0] = m
	l.sentAt = now
	if err := l.snd.send(l.msg[:]); err != nil {
		l.err = err
		l.stopLocked()
	}
}

func (l *closedLoop) stopLocked() {
	if !l.stopped {
		l.stopped = true
		close(l.done)
	}
}

// pong is the pinger's sink echo: the answer to the ping in flight sends
// the next one.
func (l *closedLoop) pong(seq uint64) {
	l.mu.Lock()
	if seq == l.seq && !l.stopped {
		l.sendLocked()
	}
	l.mu.Unlock()
}

// run sends the first ping and returns when the loop ends: at l.end, after
// l.count measured pings, at a send error, or when ctx ends (reported
// true). A ping unanswered for pingTimeout counts as a timeout and the next
// is sent.
func (l *closedLoop) run(ctx context.Context) (interrupted bool) {
	l.mu.Lock()
	l.sendLocked()
	l.mu.Unlock()
	tick := time.NewTicker(pingTimeout / 4)
	defer tick.Stop()
	for {
		select {
		case <-l.done:
			return false
		case <-ctx.Done():
			l.mu.Lock()
			l.measEnd = Now()
			l.stopLocked()
			l.mu.Unlock()
			return true
		case <-tick.C:
			l.mu.Lock()
			if !l.stopped && Now()-l.sentAt > int64(pingTimeout) {
				l.timeouts++
				l.sendLocked()
			}
			l.mu.Unlock()
		}
	}
}

// share returns part/whole, or nil when whole is 0.
func share(part, whole uint64) *float64 {
	if whole == 0 {
		return nil
	}
	f := float64(part) / float64(whole)
	return &f
}

// pingPong runs c as a closed loop (see PingPong) and adds it to the
// report.
func (b *Bench) pingPong(ctx context.Context, c LatencyCase, dur time.Duration, count int64) (LatencyRun, error) {
	if c.Subscribers != 1 || c.Processes || c.Loss > 0 {
		return LatencyRun{}, fmt.Errorf("%w: a ping-pong has one pinger and one ponger process, without loss", ErrConfig)
	}
	series := seriesName(string(c.System), "pingpong", c.Sizes.String()+"B")
	if b.s.BusyPoll > 0 {
		series += "-busypoll"
	}
	run := LatencyRun{
		Name:   fmt.Sprintf("%s ping-pong %sB closed loop", c.System, c.Sizes),
		System: c.System, Mode: PingPong, Size: c.Sizes.String(), Series: series,
		ClosedLoop: &ClosedLoop{BusyPoll: b.s.BusyPoll.Seconds()},
	}
	if b.s.BusyPoll > 0 {
		run.Name += fmt.Sprintf(", busy poll %v", b.s.BusyPoll)
	}
	run.Name += pathName(b.s.Path)
	groups := b.groups(2)
	bufSize := max(c.Sizes.Max, 64)
	deadline := Now() + int64(dur+b.s.Drain+time.Minute)
	ps := b.baseSpec(c.System, "pinger")
	ps.Group, ps.BufSize, ps.Deadline = groups[1].String(), bufSize, deadline
	ps.Latency, ps.Series, ps.Tag = true, series, series+".s1"
	ks := b.baseSpec(c.System, "ponger")
	ks.Group, ks.Pong, ks.BufSize, ks.Deadline = groups[0].String(), groups[1].String(), bufSize, deadline
	ks.PayloadSize, ks.WriteBuffer, ks.TTL, ks.Inline = b.s.PayloadSize, b.s.WriteBuffer, b.s.TTL, !b.s.NoInline

	snd, err := b.newSender(c.System, sendParams{group: groups[0], batch: 1, inline: !b.s.NoInline})
	if err != nil {
		return run, err
	}
	defer snd.close()
	// The ponger runs on the receiving host of the path, the pinger's
	// receiver beside its sender.
	var pong *procSub
	if h := b.path.recvHost(); h != nil {
		ks.Interface, ks.TTL = h.LinkName(), max(ks.TTL, 1)
		ps.Interface = b.path.sendHost().LinkName()
	}
	err = on(b.path.recvHost(), func() (err error) {
		pong, err = startProc(ctx, b.s.Spawn, ks, b.coll)
		return err
	})
	if err != nil {
		return run, err
	}
	loop := &closedLoop{snd: snd, ring: newRing(c.Sizes, 2, b.s.Seed), done: make(chan struct{})}
	sk := specSink(ps, b.coll)
	sk.echo = loop.pong
	var r receiver
	err = on(b.path.sendHost(), func() (err error) {
		r, err = openReceiver(ps, sk)
		return err
	})
	if err != nil {
		_, _ = pong.stop(0)
		return run, err
	}
	sub := &localSub{name: ps.Name, r: r, sk: sk}
	time.Sleep(10 * time.Millisecond) // let the joins settle
	start := Now()
	loop.end, loop.warmEnd, loop.count = start+int64(dur), start+int64(b.s.Warmup), uint64(count)
	sk.setWarmup(loop.warmEnd)
	cpu0 := cpuSeconds()
	run.Interrupted = loop.run(ctx)
	cpu := cpuSeconds() - cpu0
	wall := float64(loop.measEnd-start) / 1e9

	ferr := b.finishRun(ctx, snd, []subHandle{sub})
	res, serr := sub.stop(loop.seq)
	pres, perr := pong.stop(loop.seq)
	if ms, ok := snd.(*mdbusSender); ok {
		st := ms.pub.Stats()
		run.ClosedLoop.PingInline = share(st.InlineSends, st.Packets)
		run.ClosedLoop.PongInline = share(pres.InlineSends, pres.Packets)
	}

	run.Sent, run.Received = loop.measured, res.Measured
	if run.Sent > run.Received {
		run.Lost = run.Sent - run.Received
	}
	run.CPUSeconds = cpu
	cl := run.ClosedLoop
	cl.Timeouts = loop.timeouts
	if wall > 0 {
		cl.PingCPU = cpu / wall
	}
	if pres.WallSeconds > 0 {
		cl.PongCPU = pres.CPUSeconds / pres.WallSeconds
	}
	if meas := float64(loop.measEnd-loop.warmEnd) / 1e9; meas > 0 {
		cl.RoundTripsPerSec = float64(run.Received) / meas
	}
	h, re := b.coll.total(series)
	run.Total = percentiles(h, re)
	run.Spectrum = spectrum(h)
	err = errors.Join(loop.err, ferr, serr, perr)
	run.Error = errString(err)
	b.rep.Latency = append(b.rep.Latency, run)
	if run.Interrupted {
		return run, errors.Join(context.Canceled, err)
	}
	return run, err
}
