package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/mdbus/mdbus/wire"
)

// ThroughputCase is one throughput run: one publisher, Subscribers
// subscribers.
type ThroughputCase struct {
	System System
	// Sizes of the messages; the zero value is 64 bytes.
	Sizes Sizes
	// Rate is the offered rate in messages/s; 0 sends as fast as the
	// sender can.
	Rate float64
	// Subscribers is the number of subscribers; default 1.
	Subscribers int
	// Processes runs each subscriber in its own process (Config.Spawn)
	// instead of a goroutine of this one.
	Processes bool
	// Loss drops this fraction of the datagrams each subscriber receives
	// (the impairment layer; mdbus then repairs them).
	Loss float64
	// Duration and Count override the Config's when positive.
	Duration time.Duration
	Count    int64
	// PayloadSize overrides Config.PayloadSize (the largest MoldUDP64
	// packet) when positive. Raw UDP sends one datagram per message
	// whatever it is.
	PayloadSize int
	// noLatency skips the one-way latency sampling (capacity probes: one
	// histogram series per probe would bury the report's files).
	noLatency bool
}

// throughputQuantum is how far ahead a fixed-rate throughput sender
// sleeps: see loopParams.quantum.
const throughputQuantum = time.Millisecond

func (b *Bench) checkCase(sys System, sz Sizes, rate float64, subs int, loss float64, dur time.Duration, count int64, payload int) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, a...))
	}
	switch {
	case b.closed || b.finished:
		return ErrClosed
	case sys != Mdbus && sys != Raw && sys != RawGSO:
		return bad("unknown system %q", sys)
	case rate < 0 || rate > MaxRate || rate != rate:
		return bad("Rate %g is outside 0..%g messages/s", rate, MaxRate)
	case subs < 0 || subs > MaxSubscribers:
		return bad("Subscribers %d is outside 1..%d", subs, MaxSubscribers)
	case loss < 0 || loss > 0.5 || loss != loss:
		return bad("Loss %g is outside 0..0.5", loss)
	case dur < 0 || dur > MaxDuration:
		return bad("Duration %v is outside 0..%v", dur, MaxDuration)
	case count < 0:
		return bad("Count %d is negative", count)
	case payload < wire.MinPayloadSize+StampLen || payload > wire.MaxPayloadSize:
		return bad("PayloadSize %d is outside %d..%d", payload, wire.MinPayloadSize+StampLen, wire.MaxPayloadSize)
	}
	if sz.Spec != "" {
		if sz.Min < StampLen {
			return bad("messages of %d bytes are shorter than the %d-byte stamp", sz.Min, StampLen)
		}
		if lim := MaxMessageFor(sys, payload); sz.Max > lim {
			return bad("messages of %d bytes do not fit a %d-byte payload (at most %d)", sz.Max, payload, lim)
		}
	}
	if loss > 0 && sys != Mdbus {
		return bad("%s has no recovery: loss applies to mdbus runs only", sys)
	}
	return nil
}

// newSender opens the sending side of a run with the Bench's settings; a
// positive p.payloadSize overrides the configured one.
func (b *Bench) newSender(sys System, p sendParams) (sender, error) {
	return b.newSenderOn(b.path.sendHost(), sys, p)
}

// newSenderOn opens the sending side in host h (nil: here).
func (b *Bench) newSenderOn(h *labHost, sys System, p sendParams) (sender, error) {
	var snd sender
	err := on(h, func() error {
		hp, err := hostSend(h, b.sendParams(p))
		if err != nil {
			return err
		}
		snd, err = newSender(sys, hp)
		return err
	})
	return snd, err
}

// sendParams completes p with the Bench's settings.
func (b *Bench) sendParams(p sendParams) sendParams {
	p.ifi, p.ttl, p.writeBuffer, p.logger = b.s.ifi, b.s.TTL, b.s.WriteBuffer, errLogger
	p.noGSO = b.s.NoGSO
	if p.payloadSize == 0 {
		p.payloadSize = b.s.PayloadSize
	}
	return p
}

// newSender opens the sending side of a run from complete parameters.
func newSender(sys System, p sendParams) (sender, error) {
	switch sys {
	case Raw:
		return newRawSender(p)
	case RawGSO:
		return newRawGSOSender(p)
	}
	return newMdbusSender(p)
}

// recovery reports whether an mdbus run gets its retransmitter: with loss,
// or when Config.Recovery asks for it.
func (b *Bench) recovery(sys System, loss float64) bool {
	return sys == Mdbus && (loss > 0 || b.s.Recovery)
}

// retransmitterOf is the address of snd's retransmit server, or "".
func retransmitterOf(snd sender) string {
	if m, ok := snd.(*mdbusSender); ok && m.srv != nil {
		return m.retransmitter().String()
	}
	return ""
}

func (b *Bench) startSubs(ctx context.Context, specs []recvSpec, procs bool) ([]subHandle, error) {
	return b.startSubsOn(ctx, b.path.recvHost(), specs, procs)
}

// startSubsOn starts the receivers of specs in host h (nil: here).
func (b *Bench) startSubsOn(ctx context.Context, h *labHost, specs []recvSpec, procs bool) ([]subHandle, error) {
	var subs []subHandle
	for _, sp := range specs {
		if h != nil {
			sp.Interface = h.LinkName()
		}
		if procs {
			var p *procSub
			err := on(h, func() (err error) {
				p, err = startProc(ctx, b.s.Spawn, sp, b.coll)
				return err
			})
			if err != nil {
				stopAll(subs)
				return nil, err
			}
			subs = append(subs, p)
			continue
		}
		var (
			r   receiver
			sk  *sink
			err error
		)
		if err := on(h, func() error { r, sk, err = startReceiver(sp, b.coll); return err }); err != nil {
			stopAll(subs)
			return nil, err
		}
		subs = append(subs, &localSub{name: sp.Name, r: r, sk: sk})
	}
	return subs, nil
}

func stopAll(subs []subHandle) {
	for _, s := range subs {
		_, _ = s.stop(0)
	}
}

func (b *Bench) baseSpec(sys System, name string) recvSpec {
	return recvSpec{
		Name: name, System: sys, Interface: b.s.Interface, ReadBuffer: b.s.ReadBuffer,
		Timestamps: b.s.Timestamps, BusyPoll: int64(b.s.BusyPoll), NoGRO: b.s.NoGRO, Procs: b.s.SubProcs, Seed: b.s.Seed, Base: b.startMono, Interval: int64(b.s.Interval),
	}
}

// Throughput runs c and adds its result to the report. An interrupted run
// returns what it measured, marked Interrupted, and an error matching
// context.Canceled.
func (b *Bench) Throughput(ctx context.Context, c ThroughputCase) (ThroughputRun, error) {
	run, err := b.throughput(ctx, c)
	if len(run.Subs) > 0 {
		b.rep.Throughput = append(b.rep.Throughput, run)
	}
	return run, err
}

// throughput runs c without adding it to the report; a run that did not
// get to send has no Subs.
func (b *Bench) throughput(ctx context.Context, c ThroughputCase) (ThroughputRun, error) {
	if c.Subscribers == 0 {
		c.Subscribers = 1
	}
	dur, count := b.runLength(c.Duration, c.Count)
	if c.PayloadSize == 0 {
		c.PayloadSize = b.s.PayloadSize
	}
	if err := b.checkCase(c.System, c.Sizes, c.Rate, c.Subscribers, c.Loss, dur, count, c.PayloadSize); err != nil {
		return ThroughputRun{}, err
	}
	defer b.publisherSide(c.Processes)()
	where := "goroutines"
	if c.Processes {
		where = "processes"
	}
	run := ThroughputRun{
		Name:   fmt.Sprintf("%s %sB %s/s 1->%d %s", c.System, c.Sizes, rateName(c.Rate), c.Subscribers, where),
		System: c.System, Size: c.Sizes.String(), Rate: c.Rate, Subscribers: c.Subscribers,
		Processes: c.Processes, Loss: c.Loss,
	}
	if c.System != Raw && c.PayloadSize != b.s.PayloadSize {
		run.PayloadSize = c.PayloadSize
		run.Name += fmt.Sprintf(" %dB packets", c.PayloadSize)
	}
	if c.Loss > 0 {
		run.Name += fmt.Sprintf(" loss %g%%", c.Loss*100)
	}
	run.Name += pathName(b.s.Path)
	if b.s.Progress != nil {
		b.s.Progress(run.Name, dur)
	}
	ring := newRing(c.Sizes, b.s.Batch, b.s.Seed)
	run.MeanSize = ring.meanSize()
	group := b.groups(1)[0]
	series := seriesName(string(c.System), "tput", c.Sizes.String()+"B", rateName(c.Rate), fmt.Sprintf("%dsub", c.Subscribers))
	if c.Loss > 0 {
		series += fmt.Sprintf("-loss%g", c.Loss)
	}
	var specs []recvSpec
	for i := range c.Subscribers {
		sp := b.baseSpec(c.System, fmt.Sprintf("sub%d", i+1))
		sp.Group = group.String()
		sp.BufSize = c.Sizes.Max
		if sp.BufSize == 0 {
			sp.BufSize = 64
		}
		sp.Loss, sp.Seed = c.Loss, b.s.Seed+uint64(i)
		sp.SampleMask = 63
		sp.Latency = !c.noLatency
		sp.Series, sp.Tag = series, fmt.Sprintf("%s.s%d", series, i+1)
		sp.Deadline = Now() + int64(dur+b.s.Drain+time.Minute)
		specs = append(specs, sp)
	}
	cpu0 := cpuSeconds()
	sp := sendParams{group: group, payloadSize: c.PayloadSize, batch: b.s.Batch, linger: b.s.Linger, recovery: b.recovery(c.System, c.Loss)}
	if b.s.InlineThroughput {
		sp.inline, sp.linger = true, 0
	}
	snd, err := b.newSender(c.System, sp)
	if err != nil {
		return run, err
	}
	defer snd.close()
	for i := range specs {
		specs[i].Retransmitter = retransmitterOf(snd)
	}
	subs, err := b.startSubs(ctx, specs, c.Processes)
	if err != nil {
		return run, err
	}
	time.Sleep(10 * time.Millisecond) // let the joins settle
	// No busy-waiting here: on a small machine the spinning sender would
	// take the CPU the publisher and subscribers need. The sender sleeps
	// when ahead until a millisecond's worth of messages is due (Go's
	// sleeps overshoot by up to a millisecond more) and then sends what
	// fell due in batches, so the average rate is exact and the bursts
	// last about a millisecond or two.
	sr := sendLoop(ctx, snd, ring, loopParams{rate: c.Rate, count: count, duration: dur, batch: b.s.Batch, quantum: throughputQuantum})
	ferr := b.finishRun(ctx, snd, subs)
	run.Sent = Counts{Messages: sr.sent, Bytes: sr.bytes, Packets: snd.packets(), Seconds: float64(sr.end-sr.start) / 1e9}
	if m, ok := snd.(*mdbusSender); ok {
		run.GSOPackets = m.pub.Stats().GSOPackets
	}
	if g, ok := snd.(*rawGSOSender); ok {
		run.GSOPackets = g.gsoPackets()
	}
	run.Sent.rates()
	run.Complete = sr.sent > 0
	var errs []error
	for _, s := range subs {
		res, err := s.stop(sr.sent)
		if err != nil {
			errs = append(errs, err)
		}
		res.rates()
		res.Complete = res.Messages == sr.sent && res.Missing == 0 && res.Disorder == 0 && res.Lost == 0
		if !res.Complete {
			run.Complete = false
		}
		run.Subs = append(run.Subs, res)
	}
	run.CPUSeconds = cpuSeconds() - cpu0
	for i, s := range run.Subs {
		if i == 0 || s.MsgsPerSec < run.MinMsgsPerSec {
			run.MinMsgsPerSec = s.MsgsPerSec
		}
	}
	h, re := b.coll.total(series)
	if h.TotalCount() > 0 {
		p := percentiles(h, re)
		run.Latency = &p
	}
	run.Recovery = b.recoveryOf(series)
	run.Interrupted = sr.interrupted
	err, rerr := runError(sr.interrupted, append([]error{sr.err, ferr}, errs...)...)
	run.Error = errString(err)
	return run, rerr
}
