// Package demo runs the mdbus demonstration: one publisher and several
// subscribers in one process on a multicast group, a few seconds of
// synthetic ITCH-shaped market data (internal/synth), a live stats line per
// second and a final summary per subscriber that says whether it delivered
// the exact stream that was sent (count, order, duplicates, content hash).
//
// The command `mdbus demo` is a thin wrapper around Run.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mdbus/mdbus/internal/cfgcheck"
	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/internal/oneway"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/internal/verify"
	"github.com/mdbus/mdbus/packetconn/impair"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/recorder"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/tools/counters"
)

// ErrConfig marks a Config that Run refuses. Match with errors.Is.
var ErrConfig = errors.New("demo: invalid config")

// Config of a demo run. The zero value is the default.
//
// One rule for the values of every field: the zero value means the
// default. No field has a "none": a negative value is invalid, and Run
// returns an error wrapping ErrConfig that names it.
type Config struct {
	Group       netip.AddrPort // default 239.192.0.1:31001
	Interface   string         // default "lo"
	Subscribers int            // default 3
	Duration    time.Duration  // publishing time, default 5 s
	Rate        float64        // messages/s, default 200,000
	Seed        uint64         // market data seed, default 1
	// Receiving-side impairment of every subscriber (independent loss),
	// to watch recovery: fractions of datagrams in [0, 1].
	Loss, Reorder, Dup float64
	// NoRewinder turns off the rewinder (retransmitter) that the demo
	// runs beside the publisher.
	NoRewinder bool
	// Linger is the publisher's publisher.Config.Linger: how long a
	// partly filled packet waits for more messages. Zero, the default,
	// sends at once (the lowest latency): at the default rate that is
	// about two messages a packet, 100,000 packets a second, each read
	// by every subscriber and the rewinder, which keeps two cores nearly
	// full, so that loss of a few percent overloads the host. 50 µs packs
	// about 20 messages a packet (as a feed publisher batching for
	// throughput does) for about 60 µs more one-way latency; see the
	// README, "Watch recovery live". At most publisher.MaxLinger.
	Linger time.Duration
	Out    io.Writer // live lines and summary; default io.Discard
	// Counters, when set, gets the counters of every role of the demo
	// (owners pub, rewind, sub1, sub2, ...), for mdbus stat and --metrics.
	Counters *counters.File
}

// withDefaults returns c with its zero fields set to the defaults, or an
// error naming the field out of range.
func (c Config) withDefaults() (Config, error) {
	if !c.Group.IsValid() {
		c.Group = netip.MustParseAddrPort("239.192.0.1:31001")
	}
	if c.Interface == "" {
		c.Interface = "lo"
	}
	if c.Subscribers == 0 {
		c.Subscribers = 3
	}
	if c.Duration == 0 {
		c.Duration = 5 * time.Second
	}
	if c.Rate == 0 {
		c.Rate = 200_000
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	switch {
	case c.Subscribers < 1 || c.Subscribers > 64:
		return c, fmt.Errorf("%w: Subscribers %d: want 1 to 64", ErrConfig, c.Subscribers)
	case c.Duration < 0 || c.Duration > time.Hour:
		return c, fmt.Errorf("%w: Duration %v: want up to 1h", ErrConfig, c.Duration)
	case c.Rate < 0:
		return c, fmt.Errorf("%w: Rate %v: must be positive", ErrConfig, c.Rate)
	case c.Linger < 0 || c.Linger > publisher.MaxLinger:
		return c, fmt.Errorf("%w: Linger %v: want 0 to %v", ErrConfig, c.Linger, publisher.MaxLinger)
	}
	if err := cfgcheck.Negative(ErrConfig, cfgcheck.F("Loss", c.Loss), cfgcheck.F("Reorder", c.Reorder), cfgcheck.F("Dup", c.Dup)); err != nil {
		return c, err
	}
	if err := c.impair().Validate(); err != nil {
		return c, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return c, nil
}

func (c *Config) impair() impair.Config {
	return impair.Config{Loss: c.Loss, Reorder: c.Reorder, Duplicate: c.Dup, Seed: c.Seed}
}

func (c *Config) impaired() bool { return c.Loss > 0 || c.Reorder > 0 || c.Dup > 0 }

// repairGroup is the demo's repair group: the feed's group address plus
// one, on the feed's port plus one.
func repairGroup(g netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(g.Addr().Next(), g.Port()+1)
}

// Result is the outcome for one subscriber.
type Result struct {
	Name       string
	Delivered  int
	Duplicates int
	OutOfOrder int
	Gaps       uint64
	NAKs       uint64
	Recovered  uint64
	Lost       uint64
	Unanswered uint64 // re-requests sent again: no answer within the retry interval
	// KernelDrops counts datagrams the kernel dropped for want of receive
	// buffer (the subscriber fell behind), beyond the injected loss.
	KernelDrops uint64
	// ReorderOverflows counts gaps given up because the reorder buffer
	// filled behind them.
	ReorderOverflows uint64
	// The NAK back-off: subscribers asking the rewinder, the share of them
	// that lose what this one loses, the window, the repair round trip.
	Group   int
	Shared  float64
	Backoff time.Duration
	RTT     time.Duration
	// Recovery, gap found to filled, and for ranges asked once its two
	// parts, p50: gap to re-request (Asked), re-request to repair
	// (Answered); subscriber.Stats.AskedP50.
	RecoveryP50, AskedP50, AnsweredP50 time.Duration
	Complete                           bool
	Err                                error // why not complete
	// Latency is the one-way latency of every message delivered, from
	// the send stamp in its ITCH timestamp to delivery.
	Latency oneway.Summary
}

// Summary is the outcome of a run.
type Summary struct {
	Sent        int
	Packets     uint64
	Elapsed     time.Duration
	Subscribers []Result
	// CPU is the process's CPU time over Elapsed (0 where the OS does not
	// say), Procs the Go processors it could run on (GOMAXPROCS).
	CPU   time.Duration
	Procs int
}

// CPUShare is the share of its processors the run kept busy, from 0 to 1
// (0 when CPU is unknown).
func (s Summary) CPUShare() float64 {
	if s.Elapsed <= 0 || s.Procs <= 0 {
		return 0
	}
	return s.CPU.Seconds() / s.Elapsed.Seconds() / float64(s.Procs)
}

// Saturated reports whether the run kept its processors busy enough
// (saturatedShare) that its roles waited for one another: every role of
// the demo shares one process, so its latencies then measure the host,
// not the bus.
func (s Summary) Saturated() bool { return s.CPUShare() >= saturatedShare }

// saturatedShare is the CPU share from which the demo says its host was
// full. Go's scheduler and the kernel's leave a little idle even when
// every core has work.
const saturatedShare = 0.85

// Complete reports whether every subscriber delivered the exact stream.
func (s Summary) Complete() bool {
	for _, r := range s.Subscribers {
		if !r.Complete {
			return false
		}
	}
	return len(s.Subscribers) > 0
}

// Run runs the demo until it is done or ctx ends. An interrupted run still
// prints its summary for what was sent until then.
func Run(ctx context.Context, cfg Config) (Summary, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Summary{}, err
	}
	w := cfg.Out
	type sub struct {
		name string
		s    *subscriber.Subscriber
		chk  *verify.Checker[subscriber.StreamID]
		mu   *sync.Mutex // guards lat
		lat  *oneway.Recorder
	}
	var rw *recorder.Rewinder
	repair := repairGroup(cfg.Group)
	if !cfg.NoRewinder {
		listen := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 0)
		if cfg.Group.Addr().Is6() {
			listen = netip.AddrPortFrom(netip.IPv6Loopback(), 0)
		}
		var err error
		rw, err = recorder.NewRewinder(recorder.RewinderConfig{
			Feed: cfg.Group, Interface: cfg.Interface,
			Server: retransmit.ServerConfig{Listen: listen, RepairGroup: repair, Interface: cfg.Interface},
		})
		if err != nil {
			return Summary{}, fmt.Errorf("demo: rewinder: %w", err)
		}
		defer rw.Close()
	}
	var wrap func(sock.PacketConn) sock.PacketConn
	if cfg.impaired() {
		wrap = impair.Receiver(cfg.impair())
	}
	subs := make([]sub, cfg.Subscribers)
	for i := range subs {
		chk := verify.NewChecker[subscriber.StreamID](-1)
		mu, lat := new(sync.Mutex), oneway.NewRecorder()
		scfg := subscriber.Config{
			Group: cfg.Group, Interface: cfg.Interface, StartSeq: 1, Wrap: wrap,
			OnMessage: func(m subscriber.Message) {
				now := time.Now()
				chk.Deliver(m.Stream, uint64(m.Seq), m.Data)
				mu.Lock()
				lat.Record(m.Data, now)
				mu.Unlock()
			},
			OnLoss: func(l subscriber.Loss) { chk.Skip(l.Stream, uint64(l.From), uint64(l.To-l.From)) },
		}
		if rw != nil {
			scfg.Recovery.Retransmitter, scfg.Recovery.RepairGroup = rw.Addr(), repair
		}
		s, err := subscriber.New(scfg)
		if err != nil {
			for _, p := range subs[:i] {
				p.s.Close()
			}
			return Summary{}, fmt.Errorf("demo: subscriber %d: %w", i+1, err)
		}
		subs[i] = sub{fmt.Sprintf("sub%d", i+1), s, chk, mu, lat}
	}
	defer func() {
		for _, s := range subs {
			s.s.Close()
		}
	}()
	pub, err := publisher.New(publisher.Config{
		Group: cfg.Group, Interface: cfg.Interface,
		HeartbeatInterval: 100 * time.Millisecond,
		Linger:            cfg.Linger,
	})
	if err != nil {
		return Summary{}, fmt.Errorf("demo: publisher: %w", err)
	}
	defer pub.Close()
	if c := cfg.Counters; c != nil {
		counters.AttachPublisher(c, "pub", pub)
		if rw != nil {
			counters.AttachRewinder(c, "rewind", rw)
		}
		for _, s := range subs {
			counters.AttachSubscriber(c, s.name, s.s)
		}
	}
	fmt.Fprintf(w, "mdbus demo: session %s -> %s on %s\n", pub.Session(), cfg.Group, cfg.Interface)
	fmt.Fprintf(w, "  %d subscribers, %.0f msgs/s for %v", cfg.Subscribers, cfg.Rate, cfg.Duration)
	if cfg.Linger > 0 {
		fmt.Fprintf(w, ", packets linger up to %v", cfg.Linger)
	}
	fmt.Fprintln(w)
	if rw != nil {
		fmt.Fprintf(w, "  rewinder: re-requests on %s, repairs on %s\n", rw.Addr(), repair)
	}
	if cfg.impaired() {
		fmt.Fprintf(w, "  each subscriber loses %.1f%%, reorders %.1f%%, duplicates %.1f%% of datagrams\n",
			100*cfg.Loss, 100*cfg.Reorder, 100*cfg.Dup)
	}

	sent := verify.NewHash()
	var sentMu sync.Mutex // the feed's goroutine adds, this one reads
	sentN := func() int { sentMu.Lock(); defer sentMu.Unlock(); return sent.N() }
	start, cpu0 := time.Now(), monotime.ProcessCPU()
	procs := runtime.GOMAXPROCS(0)
	lastSent, lastDelivered, lastAt := 0, make([]int, len(subs)), start
	lastPkts, lastCPU := uint64(0), cpu0
	// live prints one line per role, each under 80 columns.
	live := func() {
		n, now := sentN(), time.Now()
		secs := max(now.Sub(lastAt).Seconds(), 1e-3)
		lastAt = now
		ps, cpu := pub.Stats(), monotime.ProcessCPU()
		fmt.Fprintf(w, "t=%5.1fs pub    %10d msgs %8.0f/s %7.0f pkts/s  cpu %3.0f%%/%d\n", now.Sub(start).Seconds(), n,
			float64(n-lastSent)/secs, float64(ps.Packets-lastPkts)/secs, 100*(cpu-lastCPU).Seconds()/secs, procs)
		lastSent, lastPkts, lastCPU = n, ps.Packets, cpu
		if rw != nil {
			cs, ss := rw.Cache().Stats(), rw.ServerStats()
			fmt.Fprintf(w, "        rewind cached %9d  req %6d answered %6d refused %4d\n",
				cs.Messages, ss.Requests, ss.Answered, ss.Refused.Total())
			fs := rw.FeedStats()
			fmt.Fprintf(w, "        held %d (%d ahead, %d told later) coalesced %d refused: %s\n",
				ss.Deferred, ss.DeferredAhead, ss.ToldLater, ss.Coalesced, ss.Refused)
			if fs.LostMessages > 0 || fs.KernelDrops > 0 {
				fmt.Fprintf(w, "               its own feed: %d kernel drops, %d messages lost (holes it cannot serve)\n", fs.KernelDrops, fs.LostMessages)
			}
		}
		for i, s := range subs {
			d := s.chk.Delivered()
			st := s.s.Stats()
			s.mu.Lock()
			l := s.lat.Interval()
			s.mu.Unlock()
			line := fmt.Sprintf("        %-5s %8.0f/s %s", s.name, float64(d-lastDelivered[i])/secs, l)
			if st.Gaps > 0 || st.LostMessages > 0 {
				more := fmt.Sprintf(" gaps %d lost %d", st.Gaps, st.LostMessages)
				if utf8.RuneCountInString(line+more) > 80 {
					more = fmt.Sprintf(" g%d l%d", st.Gaps, st.LostMessages)
				}
				line += more
			}
			fmt.Fprintln(w, line)
			lastDelivered[i] = d
		}
	}
	// The feed paces itself and stamps each batch as it is handed to
	// Publish, so one-way latency measures the bus, not the pacing wait.
	fctxPub, stopFeed := context.WithTimeout(ctx, cfg.Duration)
	defer stopFeed()
	fed := make(chan error, 1)
	go func() {
		_, err := oneway.Feed(fctxPub, oneway.FeedConfig{Rate: cfg.Rate, Seed: cfg.Seed, Stamp: true,
			OnMessage: func(m []byte) { sentMu.Lock(); sent.Add(m); sentMu.Unlock() }},
			func(b [][]byte) error { _, err := pub.PublishBatch(b); return err })
		fed <- err
	}()
	if err := reportUntil(fed, liveEvery, live); err != nil {
		return Summary{}, fmt.Errorf("demo: publish: %w", err)
	}
	if ctx.Err() != nil {
		fmt.Fprintln(w, "interrupted: summarising what was sent")
	}
	fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := pub.Flush(fctx); err != nil {
		return Summary{}, fmt.Errorf("demo: flush: %w", err)
	}
	awaitCaughtUp(catchUpBound, func() bool {
		for _, s := range subs {
			if s.chk.Delivered() < sentN() {
				return false
			}
		}
		return true
	})
	if time.Since(lastAt) >= liveEvery/4 { // else the ticker's block just said it
		live()
	}
	sum := Summary{Sent: sent.N(), Packets: pub.Stats().Packets, Elapsed: time.Since(start),
		CPU: monotime.ProcessCPU() - cpu0, Procs: procs}
	want := sent.Sum()
	for _, s := range subs {
		st := s.s.Stats()
		r := Result{Name: s.name, Gaps: st.Gaps, NAKs: st.NAKs, Recovered: st.Recovered, Lost: st.LostMessages,
			Unanswered: st.Retries, KernelDrops: st.KernelDrops, ReorderOverflows: st.ReorderOverflows, Group: st.GroupSize, Shared: st.SharedLoss, Backoff: st.Backoff, RTT: st.RepairRTT,
			RecoveryP50: st.RecoveryP50, AskedP50: st.AskedP50, AnsweredP50: st.AnsweredP50}
		s.mu.Lock()
		r.Latency = s.lat.Total()
		s.mu.Unlock()
		var id subscriber.StreamID
		found := false
		for k, st := range s.chk.Streams() {
			if k.Session == pub.Session() {
				id, found = k, true
				r.Delivered, r.Duplicates, r.OutOfOrder = st.Delivered, st.Duplicates, st.OutOfOrder
			}
		}
		if !found {
			r.Err = errors.New("received nothing")
		} else {
			r.Err = s.chk.Check(id, 1, sent.N(), want)
		}
		r.Complete = r.Err == nil
		sum.Subscribers = append(sum.Subscribers, r)
	}
	fmt.Fprintf(w, "\nsummary: sent %d messages in %d packets (%.1f msgs/packet)\n",
		sum.Sent, sum.Packets, float64(sum.Sent)/max(1, float64(sum.Packets)))
	if sum.CPU > 0 {
		fmt.Fprintf(w, "  CPU %.1f s in %.1f s: %.0f%% of %d cores\n", sum.CPU.Seconds(), sum.Elapsed.Seconds(), 100*sum.CPUShare(), sum.Procs)
		if sum.Saturated() {
			fmt.Fprintf(w, "  the cores were full: every role shares this process, so the latencies\n"+
				"  below include waiting for a CPU; a lower --rate shows the bus without it\n")
			if cfg.Linger == 0 && float64(sum.Sent) < 8*float64(sum.Packets) {
				fmt.Fprintf(w, "  (or --linger 50us: fuller packets, fewer to read, for some latency)\n")
			}
		}
	}
	for _, r := range sum.Subscribers {
		verdict := "COMPLETE: every message once, in order, byte-identical"
		if !r.Complete {
			verdict = "INCOMPLETE: " + r.Err.Error()
			if r.Lost > 0 {
				verdict += fmt.Sprintf("; %d messages declared lost: still missing 1 s after their gap was found", r.Lost)
				if rw != nil {
					ss := rw.ServerStats()
					verdict += fmt.Sprintf(" (the rewinder answered %d of %d re-requests, held %d, refused: %s)",
						ss.Answered, ss.Requests, ss.Deferred, ss.Refused)
				}
			}
		}
		fmt.Fprintf(w, "  %-6s delivered %d/%d, in order %v, duplicates %d\n", r.Name, r.Delivered, sum.Sent, r.OutOfOrder == 0, r.Duplicates)
		fmt.Fprintf(w, "         gaps %d, NAKs %d (unanswered %d), recovered %d, lost %d\n", r.Gaps, r.NAKs, r.Unanswered, r.Recovered, r.Lost)
		if r.ReorderOverflows > 0 {
			fmt.Fprintf(w, "         reorder buffer full %d times: the oldest gap was given up to make room\n", r.ReorderOverflows)
		}
		if r.KernelDrops > 0 {
			fmt.Fprintf(w, "         kernel drops %d: the subscriber fell behind its socket buffer\n", r.KernelDrops)
		}
		if r.Group > 0 {
			fmt.Fprintf(w, "         back-off: %d asking, %.0f%% share its losses, window %v, rtt %v\n",
				r.Group, 100*r.Shared, r.Backoff.Round(time.Microsecond), r.RTT.Round(time.Microsecond))
		}
		if r.RecoveryP50 > 0 {
			// The split is of the ranges asked once (Karn's rule).
			fmt.Fprintf(w, "         recovery p50 %v; NAK after %v, repair %v after that\n",
				short(r.RecoveryP50), short(r.AskedP50), short(r.AnsweredP50))
		}
		fmt.Fprintf(w, "         one-way %s\n", r.Latency)
		fmt.Fprintf(w, "         %s\n", verdict)
	}
	return sum, nil
}

// short rounds d to three or four significant digits for a summary line.
func short(d time.Duration) time.Duration {
	if d >= time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// The demo's clock: a block of live lines every liveEvery while the feed
// runs; then the subscribers have catchUpBound to deliver everything,
// checked every catchUpPoll.
const (
	liveEvery    = time.Second
	catchUpBound = 5 * time.Second
	catchUpPoll  = 10 * time.Millisecond
)

// reportUntil calls live every interval until the feed ends (fed), and
// returns the feed's error.
func reportUntil(fed <-chan error, every time.Duration, live func()) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case err := <-fed:
			return err
		case <-tick.C:
			live()
		}
	}
}

// awaitCaughtUp waits until caughtUp holds, checking every catchUpPoll,
// for at most bound, and says whether it held.
func awaitCaughtUp(bound time.Duration, caughtUp func() bool) bool {
	deadline := time.Now().Add(bound)
	for !caughtUp() {
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(catchUpPoll)
	}
	return true
}
