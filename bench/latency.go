package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/packetconn/impair"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
)

// Latency modes.
const (
	// OneWay: publisher to subscribers on one group; latency is delivery
	// time minus scheduled send time.
	OneWay = "one-way"
	// RoundTrip: the pinger publishes on group A, a ponger subscribes to
	// A and republishes every message on group B, the pinger subscribes
	// to B; latency is the pinger's delivery time minus the scheduled
	// send time.
	RoundTrip = "round-trip"
)

// LatencyCase is one latency run at a fixed offered rate.
type LatencyCase struct {
	System System
	// Mode is OneWay, RoundTrip (paced) or PingPong (closed loop);
	// default RoundTrip.
	Mode string
	// Sizes of the messages; the zero value is 64 bytes.
	Sizes Sizes
	// Rate is the offered rate in messages/s; default 10,000. A PingPong
	// has none: it sends when the previous answer arrives.
	Rate float64
	// Subscribers (one-way only) is the number of receivers; default 1.
	Subscribers int
	// Processes runs one-way subscribers in their own processes.
	Processes bool
	// Loss drops this fraction of the datagrams each subscriber receives
	// (mdbus only).
	Loss float64
	// Duration and Count override the Config's when positive.
	Duration time.Duration
	Count    int64
}

// Latency runs c and adds its result to the report. An interrupted run
// returns what it measured, marked Interrupted, and an error matching
// context.Canceled.
func (b *Bench) Latency(ctx context.Context, c LatencyCase) (LatencyRun, error) {
	if c.Mode == "" {
		c.Mode = RoundTrip
	}
	if c.Rate == 0 {
		c.Rate = DefaultLatencyRate
	}
	if c.Subscribers == 0 {
		c.Subscribers = 1
	}
	defer b.publisherSide(c.Processes && c.Mode == OneWay)()
	dur, count := b.runLength(c.Duration, c.Count)
	if c.Mode != OneWay && c.Mode != RoundTrip && c.Mode != PingPong {
		return LatencyRun{}, fmt.Errorf("%w: latency mode %q: want %s, %s or %s", ErrConfig, c.Mode, OneWay, RoundTrip, PingPong)
	}
	if c.System == RawGSO && c.Mode != OneWay {
		return LatencyRun{}, fmt.Errorf("%w: raw-gso has no ponger: it runs one-way latency only", ErrConfig)
	}
	if b.s.Progress != nil {
		what := fmt.Sprintf("%s %s %sB %s/s", c.System, c.Mode, c.Sizes, rateName(c.Rate))
		if c.Mode == PingPong {
			what = fmt.Sprintf("%s %s %sB closed loop", c.System, c.Mode, c.Sizes)
		}
		b.s.Progress(what, dur)
	}
	if c.Mode == PingPong {
		if err := b.checkCase(c.System, c.Sizes, 0, c.Subscribers, c.Loss, dur, count, b.s.PayloadSize); err != nil {
			return LatencyRun{}, err
		}
		if b.s.Warmup >= dur {
			return LatencyRun{}, fmt.Errorf("%w: warm-up %v is not shorter than the duration %v", ErrConfig, b.s.Warmup, dur)
		}
		return b.pingPong(ctx, c, dur, count)
	}
	if c.Mode == RoundTrip && (c.Subscribers != 1 || c.Processes) {
		return LatencyRun{}, fmt.Errorf("%w: a round trip has one pinger and one ponger in this process", ErrConfig)
	}
	if c.Rate < 0 {
		return LatencyRun{}, fmt.Errorf("%w: Rate %g is negative", ErrConfig, c.Rate)
	}
	if err := b.checkCase(c.System, c.Sizes, c.Rate, c.Subscribers, c.Loss, dur, count, b.s.PayloadSize); err != nil {
		return LatencyRun{}, err
	}
	if b.s.Warmup >= dur {
		return LatencyRun{}, fmt.Errorf("%w: warm-up %v is not shorter than the duration %v", ErrConfig, b.s.Warmup, dur)
	}
	short := "rtt"
	if c.Mode == OneWay {
		short = "oneway"
	}
	series := seriesName(string(c.System), short, c.Sizes.String()+"B", rateName(c.Rate))
	if c.Loss > 0 {
		series += fmt.Sprintf("-loss%g", c.Loss)
	}
	run := LatencyRun{
		Name:   fmt.Sprintf("%s %s %sB %s/s", c.System, c.Mode, c.Sizes, rateName(c.Rate)),
		System: c.System, Mode: c.Mode, Size: c.Sizes.String(), Rate: c.Rate, Loss: c.Loss, Series: series,
	}
	if c.Loss > 0 {
		run.Name += fmt.Sprintf(" loss %g%%", c.Loss*100)
	}
	run.Name += pathName(b.s.Path)
	ring := newRing(c.Sizes, b.s.Batch, b.s.Seed)
	groups := b.groups(2)
	recvGroup := groups[0]
	if c.Mode == RoundTrip {
		recvGroup = groups[1]
	}
	bufSize := max(c.Sizes.Max, 64)
	start := Now() + int64(50*time.Millisecond) // the sender starts shortly after the receivers
	var specs []recvSpec
	for i := range c.Subscribers {
		sp := b.baseSpec(c.System, fmt.Sprintf("sub%d", i+1))
		if c.Mode == RoundTrip {
			sp.Name = "pinger"
		}
		sp.Group, sp.BufSize = recvGroup.String(), bufSize
		sp.Loss, sp.Seed = c.Loss, b.s.Seed+uint64(i)
		sp.Latency, sp.Series, sp.Tag = true, series, fmt.Sprintf("%s.s%d", series, i+1)
		// Nothing counts until the receiver is told when the warm-up ends.
		sp.WarmupUntil = math.MaxInt64
		sp.Deadline = Now() + int64(dur+b.s.Drain+time.Minute)
		specs = append(specs, sp)
	}
	cpu0 := cpuSeconds()
	snd, err := b.newSender(c.System, sendParams{group: groups[0], batch: b.s.Batch, inline: !b.s.NoInline, recovery: b.recovery(c.System, c.Loss)})
	if err != nil {
		return run, err
	}
	defer snd.close()
	var pong ponger
	if c.Mode == RoundTrip {
		// The ponger's subscriber asks the pinger's retransmitter; the
		// pinger's subscriber asks the ponger's.
		pong, err = b.newPonger(c.System, groups[0], groups[1], bufSize, c.Loss, retransmitterOf(snd))
		if err != nil {
			return run, err
		}
		defer pong.close()
	}
	for i := range specs {
		specs[i].Retransmitter = retransmitterOf(snd)
		if pong != nil {
			specs[i].Retransmitter = pong.retransmitter()
		}
	}
	// A round trip's receivers are the pinger's, beside its sender.
	recvHost := b.path.recvHost()
	if c.Mode == RoundTrip {
		recvHost = b.path.sendHost()
	}
	subs, err := b.startSubsOn(ctx, recvHost, specs, c.Processes)
	if err != nil {
		return run, err
	}
	time.Sleep(time.Duration(start - Now()))
	// The receivers learn the end of the warm-up now (those in child
	// processes were started before it was known); the sender uses the
	// same instant, so both count the same messages as measured.
	warmEnd := Now() + int64(b.s.Warmup)
	b.setWarmup(subs, warmEnd)
	sr := sendLoop(ctx, snd, ring, loopParams{
		rate: c.Rate, count: count, duration: dur, warmEnd: warmEnd, batch: b.s.Batch, spin: b.s.Spin,
	})
	ferr := b.finishRun(ctx, snd, subs)
	var perr error
	if pong != nil {
		perr = pong.close()
	}
	var errs []error
	run.Sent = sr.measured
	for _, s := range subs {
		res, err := s.stop(sr.sent)
		if err != nil {
			errs = append(errs, err)
		}
		run.Received += res.Measured
		if sr.measured > res.Measured {
			run.Lost += sr.measured - res.Measured
		}
	}
	run.CPUSeconds = cpuSeconds() - cpu0
	h, re := b.coll.total(series)
	run.Total = percentiles(h, re)
	run.Spectrum = spectrum(h)
	if b.s.Timestamps {
		if w, wre := b.coll.total(series + "-wire"); w.TotalCount() > 0 {
			p := percentiles(w, wre)
			run.Wire = &p
			r, rre := b.coll.total(series + "-recvpath")
			q := percentiles(r, rre)
			run.RecvPath = &q
		}
	}
	if b.s.Timestamps && run.Wire == nil && c.System == Mdbus && !b.notedStamps {
		b.notedStamps = true
		b.Note("mdbus: no kernel receive timestamps (subscriber.Config cannot turn SO_TIMESTAMPNS on), so no wire / receive-path split for mdbus")
	}
	run.Recovery = b.recoveryOf(series)
	run.Interrupted = sr.interrupted
	err, rerr := runError(sr.interrupted, append([]error{sr.err, ferr, perr}, errs...)...)
	run.Error = errString(err)
	b.rep.Latency = append(b.rep.Latency, run)
	return run, rerr
}

// setWarmup tells the receivers when the warm-up ends (known only once
// they have started).
func (b *Bench) setWarmup(subs []subHandle, until int64) {
	for _, s := range subs {
		switch s := s.(type) {
		case *localSub:
			s.sk.setWarmup(until)
		case *procSub:
			fmt.Fprintf(s.in, "warmup %d\n", until)
		}
	}
}

// ---- pongers ----

type ponger interface {
	close() error
	// retransmitter is where the pinger's subscriber sends re-requests
	// for the pong stream ("" for none).
	retransmitter() string
	// echoed is the number of messages answered; read it after close.
	echoed() uint64
}

func (b *Bench) newPonger(sys System, in, out netip.AddrPort, bufSize int, loss float64, rtx string) (ponger, error) {
	// The ponger is on the receiving host of the path.
	h := b.path.recvHost()
	var pong ponger
	err := on(h, func() error {
		sp, err := hostSend(h, b.sendParams(sendParams{group: out, batch: rawBatch, inline: !b.s.NoInline, recovery: b.recovery(sys, loss)}))
		if err != nil {
			return err
		}
		rp := recvParams{group: in, ifi: sp.ifi, readBuffer: b.s.ReadBuffer, busyPoll: b.s.BusyPoll, noGRO: b.s.NoGRO, bufSize: bufSize, loss: loss, seed: b.s.Seed + 1000, logger: errLogger}
		if rtx != "" {
			rp.retransmitter = netip.MustParseAddrPort(rtx)
		}
		pong, err = startPonger(sys, rp, sp)
		return err
	})
	return pong, err
}

// startPonger answers every message of rp's group on sp's (both complete).
func startPonger(sys System, rp recvParams, sp sendParams) (ponger, error) {
	if sys == Raw {
		return newRawPonger(rp, sp)
	}
	return newMdbusPonger(rp, sp)
}

type mdbusPonger struct {
	sub  *subscriber.Subscriber
	snd  *mdbusSender
	pub  *publisher.Publication
	once sync.Once
	err  atomic.Pointer[error]
	n    uint64 // messages answered, by the subscriber's goroutine
}

func newMdbusPonger(rp recvParams, sp sendParams) (*mdbusPonger, error) {
	snd, err := newSender(Mdbus, sp)
	if err != nil {
		return nil, err
	}
	p := &mdbusPonger{snd: snd.(*mdbusSender), pub: snd.(*mdbusSender).pub}
	var wrap func(sock.PacketConn) sock.PacketConn
	if rp.loss > 0 {
		wrap = impair.Receiver(impair.Config{Loss: rp.loss, Seed: rp.seed})
	}
	sub, err := subscriber.New(subscriber.Config{
		Group: rp.group, Interface: rp.ifi.Name, StartSeq: 1, Wrap: wrap,
		Recovery: subscriber.Recovery{Retransmitter: rp.retransmitter, NAK: nak.Config{Seed: rp.seed}},
		Receive:  subscriber.Receive{ReadBuffer: rp.readBuffer, BusyPoll: rp.busyPoll},
		OnMessage: func(m subscriber.Message) {
			p.n++
			if _, err := p.pub.Publish(m.Data); err != nil {
				p.err.CompareAndSwap(nil, &err)
			}
		},
		// The pinger's end of session ends the pong session too.
		OnEnd:  func(subscriber.StreamID, wire.Seq) { p.endPub() },
		Logger: rp.logger,
	})
	if err != nil {
		p.snd.close()
		return nil, fmt.Errorf("bench: ponger: %w", err)
	}
	p.sub = sub
	return p, nil
}

func (p *mdbusPonger) retransmitter() string { return retransmitterOf(p.snd) }

func (p *mdbusPonger) echoed() uint64 { return p.n }

func (p *mdbusPonger) endPub() {
	p.once.Do(func() {
		if err := p.pub.Close(); err != nil {
			p.err.CompareAndSwap(nil, &err)
		}
	})
}

func (p *mdbusPonger) close() error {
	serr := p.sub.Close()
	if errors.Is(serr, subscriber.ErrClosed) {
		serr = nil
	}
	p.endPub()
	var perr error
	if e := p.err.Load(); e != nil {
		perr = *e
	}
	return errors.Join(serr, perr, p.snd.close())
}

// rawPonger echoes every datagram of group in to group out, in batches.
type rawPonger struct {
	in     *sock.Conn
	out    *sock.Conn
	outG   netip.AddrPort
	done   chan struct{}
	closed atomic.Bool
	once   sync.Once
	err    error
	n      uint64 // datagrams answered, by run
}

func newRawPonger(rp recvParams, sp sendParams) (*rawPonger, error) {
	in, err := openRawReceiver(rp, false, "raw ponger")
	if err != nil {
		return nil, err
	}
	snd, err := newSender(Raw, sp)
	if err != nil {
		in.Close()
		return nil, err
	}
	p := &rawPonger{in: in, out: snd.(*rawSender).conn, outG: sp.group, done: make(chan struct{})}
	go p.run(sock.NewBatch(rawBatch, rp.bufSize+1), sock.NewBatch(rawBatch, 0))
	return p, nil
}

func (p *rawPonger) run(rb, wb *sock.Batch) {
	defer close(p.done)
	for {
		n, err := p.in.ReadBatch(rb)
		if err != nil {
			if !p.closed.Load() && !sock.IsTimeout(err) {
				p.err = fmt.Errorf("bench: raw ponger: %w", err)
				return
			}
			if p.closed.Load() {
				return
			}
			continue
		}
		k := 0
		for i := range rb.Msgs[:n] {
			if rb.Msgs[i].Truncated {
				continue
			}
			wb.Msgs[k].Buf = rb.Msgs[i].Buf
			wb.Msgs[k].Addr = p.outG
			k++
		}
		if k > 0 {
			p.n += uint64(k)
			if _, err := p.out.WriteBatch(wb, k); err != nil && !p.closed.Load() {
				p.err = fmt.Errorf("bench: raw ponger send: %w", err)
				return
			}
		}
	}
}

func (p *rawPonger) retransmitter() string { return "" }

func (p *rawPonger) echoed() uint64 { return p.n }

func (p *rawPonger) close() error {
	p.once.Do(func() {
		p.closed.Store(true)
		p.in.Close()
		<-p.done
		p.out.Close()
	})
	return p.err
}
