package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/mdbus/mdbus/internal/oneway"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/packetconn/impair"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/tools/counters"
	"github.com/mdbus/mdbus/wire"
)

func init() {
	register("sub", "subscribe to a multicast group and print messages or periodic stats", runSub)
}

func runSub(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("sub", "[flags]", `Joins a multicast group and delivers each stream (source + session) in
order, once. Prints every message ("session seq text" for printable text,
hex otherwise), or with --stats only a stats line per interval. Ends at
--count messages, --duration, end of session with --exit-on-end, or SIGINT.`)
	gf := addGroupFlags(fs)
	stats := fs.Duration("stats", 0, "print a stats line every interval instead of messages (e.g. 1s)")
	count := fs.Int("count", 0, "exit after this many messages (0 = no limit)")
	dur := fs.Duration("duration", 0, "exit after this long (0 = no limit)")
	exitOnEnd := fs.Bool("exit-on-end", false, "exit when a stream ends (end-of-session packet)")
	start := fs.String("start", "live", "where each stream starts: live, session (its sequence 1), seq:N, time:RFC3339 (needs --journal); history comes from --journal, then --retransmit")
	ckpt := fs.String("checkpoint", "", "resume file: the last delivered sequence per session, saved atomically every 100 ms; a restart continues after it. Alone: at-least-once (stdout is flushed before each save, so a restart may print again what followed the last save)")
	outFile := fs.String("out", "", "with --checkpoint: append messages to this file in step with the checkpoint (exactly-once across restarts)")
	jdir := fs.String("journal", "", "journal directory to read history (and --start time:) from")
	rcvbuf := fs.Int("rcvbuf", 0, "socket receive buffer bytes to request (default 4 MiB)")
	noGRO := fs.Bool("no-gro", false, "read the feed without UDP_GRO (one datagram per read slot; for comparing, or a kernel whose GRO misbehaves)")
	busy := fs.Duration("busy-poll", 0, "spin on the feed socket this long before sleeping (0-10ms): lower latency for a CPU")
	retr := fs.String("retransmit", "", "unicast address:port of the retransmitter (pub --retransmit or rewind) to send re-requests to; a comma-separated list adds backups, asked in turn when the one asked stops answering")
	retrPort := fs.Uint("retransmit-port", 0, "instead of --retransmit: send each stream's re-requests to this port at its own source's address (every publisher host runs its retransmitter there)")
	failover := fs.Duration("failover", 0, "with several --retransmit addresses: how long re-requests may go unanswered before the next is asked (default 50ms)")
	repair := fs.String("repair-group", "", "also join this multicast group:port for repairs")
	repairSrc := fs.String("repair-source", "", "with --repair-group: accept repairs only from this address (the retransmitter's; unset: any sender, counted as unverified)")
	secondary := fs.String("secondary", "", "A/B: second feed group:port carrying the same sessions")
	stop := fs.Bool("stop-on-loss", false, "stop delivering a stream at its first unrecoverable loss (default: report it and continue)")
	imp := addImpairFlags(fs)
	latency := fs.Bool("latency", true, "with --stats: one-way latency percentiles of stamped messages (pub --synthetic stamps them)")
	fan := fs.String("fanout", "", "read the feed from this host's fan-out ring (mdbus fanout) instead of the network: its NAME, or a PATH; no socket and no system call per message; --retransmit fills what the reader misses, --busy-poll is how long an idle reader spins before it sleeps (default 20µs)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *fan != "" {
		return runSubFanout(ctx, stdout, subFanout{ring: *fan, start: *start, retransmit: *retr, stats: *stats, count: *count, dur: *dur, exitOnEnd: *exitOnEnd, stopOnLoss: *stop, spin: *busy})
	}
	group, source, err := gf.parse()
	if err != nil {
		return err
	}
	retrAddr, backups, err := parseRetransmitters("--retransmit", *retr)
	if err != nil {
		return err
	}
	if *retrPort > 65535 {
		return usageErr("--retransmit-port %d: want a UDP port, 1-65535", *retrPort)
	}
	repairG, err := parseAddr("--repair-group", *repair, true)
	if err != nil {
		return err
	}
	secondG, err := parseAddr("--secondary", *secondary, true)
	if err != nil {
		return err
	}
	var repairSource netip.Addr
	if *repairSrc != "" {
		if repairSource, err = netip.ParseAddr(*repairSrc); err != nil {
			return fmt.Errorf("--repair-source %q: want an IP address such as 127.0.0.1: %w", *repairSrc, err)
		}
		if !repairG.IsValid() {
			return fmt.Errorf("--repair-source needs --repair-group")
		}
	}
	icfg, impaired, err := imp.config()
	if err != nil {
		return err
	}
	var wrap, wrap2 func(sock.PacketConn) sock.PacketConn
	if impaired {
		wrap = impair.Receiver(icfg)
		icfg.Stream = 1 << 32
		wrap2 = impair.Receiver(icfg)
	}
	policy := subscriber.LossContinue
	if *stop {
		policy = subscriber.LossStop
	}
	if *count < 0 || *dur < 0 || *stats < 0 || *rcvbuf < 0 {
		return usageErr("--count, --duration, --stats and --rcvbuf must not be negative")
	}
	rs, err := parseSubResume(*start, *ckpt, *outFile, *jdir)
	if err != nil {
		return err
	}
	out := bufio.NewWriterSize(stdout, 64<<10)
	defer out.Flush()
	var mu sync.Mutex // guards out
	msgOut := rs.writer(out, &mu)
	done := make(chan struct{})
	var once sync.Once
	n := 0
	var lat *oneway.Recorder
	if *stats > 0 && *latency {
		lat = oneway.NewRecorder()
	}
	scfg := subscriber.Config{
		Group: group, Interface: *gf.ifname, Source: source, StartSeq: rs.legacy, ReadBuffer: *rcvbuf, BusyPoll: *busy, DisableGRO: *noGRO,
		Retransmitter: retrAddr, Backups: backups, RetransmitPort: uint16(*retrPort), Failover: *failover, RepairGroup: repairG, RepairSource: repairSource, Secondary: secondG, LossPolicy: policy,
		Wrap: wrap, WrapSecondary: wrap2, Logger: env.log,
		OnLoss: func(l subscriber.Loss) {
			mu.Lock()
			fmt.Fprintf(out, "# LOST %s [%d, %d): %d messages could not be recovered\n", l.Stream.Session, l.From, l.To, l.To-l.From)
			mu.Unlock()
		},
		OnMessage: func(m subscriber.Message) {
			mu.Lock()
			defer mu.Unlock()
			n++
			if *stats == 0 {
				printMessage(msgOut, m)
			} else if lat != nil {
				lat.Record(m.Data, time.Now())
			}
			if *count > 0 && n >= *count {
				once.Do(func() { close(done) })
			}
		},
		OnEnd: func(id subscriber.StreamID, next wire.Seq) {
			mu.Lock()
			fmt.Fprintf(out, "# end of session %s from %s at sequence %d\n", id.Session, id.Source, next)
			mu.Unlock()
			if *exitOnEnd {
				once.Do(func() { close(done) })
			}
		},
	}
	feedStats := func() subscriber.Stats { return rs.stats() }
	var feedStreams func() []subscriber.StreamStats // a resuming consumer shows totals only
	if rs.enabled {
		if err := rs.open(scfg); err != nil {
			rs.close()
			return err
		}
		defer rs.close()
	} else {
		s, err := subscriber.New(scfg)
		if err != nil {
			return err
		}
		defer s.Close()
		feedStats, feedStreams = s.Stats, s.Streams
	}
	ops, err := startOps("sub")
	if err != nil {
		return err
	}
	defer ops.Close()
	counters.AttachSubscriberFuncs(ops.Counters(), "sub", feedStats, feedStreams)
	var latP99 atomic.Value // oneway.Summary of the last --stats interval, for mdbus stat
	if lat != nil {
		counters.AttachLatency(ops.Counters(), "sub", func() (time.Duration, bool) {
			iv, ok := latP99.Load().(oneway.Summary)
			return iv.P99, ok && iv.Count > 0
		})
	}
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); watchDrops(wctx, "sub", feedStats, time.Second) }()
	defer func() { stopWatch(); <-watched }()
	defer func() { // after the loop, before ops.Close and the subscriber's close
		st := feedStats()
		mu.Lock()
		out.Flush()
		attrs := []any{"messages", st.Messages, "packets", st.Packets, "bytes", st.Bytes, "duplicates", st.Duplicates,
			"gaps", st.Gaps, "naks", st.NAKs, "repairs", st.Repairs, "recovered", st.Recovered, "lost", st.LostMessages,
			"kernel_drops", st.KernelDrops, "dropped", st.Dropped, "streams", st.Streams}
		if len(backups) > 0 {
			attrs = append(attrs, "failovers", st.Failovers, "asking", st.Asking)
		}
		if lat != nil {
			t := lat.Total()
			attrs = append(attrs, "latency_count", t.Count, "latency_p50", t.P50, "latency_p99", t.P99, "latency_p999", t.P999, "latency_max", t.Max)
		}
		mu.Unlock()
		env.log.Info("summary", attrs...)
	}()
	var tick <-chan time.Time
	if *stats > 0 {
		t := time.NewTicker(*stats)
		defer t.Stop()
		tick = t.C
	}
	var end <-chan time.Time
	if *dur > 0 {
		end = time.After(*dur)
	}
	var last subscriber.Stats
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-done:
			return nil
		case <-end:
			return nil
		case <-tick:
			st := feedStats()
			streams := st.Streams
			mu.Lock() // never call into the subscriber while holding mu: OnMessage takes mu under the subscriber's lock
			fmt.Fprintf(out, "%s msgs %d (+%d) pkts %d bytes %d dups %d gaps %d naks %d unanswered %d confirms %d recovered %d lost %d (recovery p50 %v p99 %v) kernel-drops %d streams %d",
				time.Now().Format("15:04:05"), st.Messages, st.Messages-last.Messages, st.Packets, st.Bytes,
				st.Duplicates, st.Gaps, st.NAKs, st.Retries, st.Confirms, st.Recovered, st.LostMessages, st.RecoveryP50, st.RecoveryP99, st.KernelDrops, streams)
			if lat != nil {
				iv := lat.Interval()
				latP99.Store(iv)
				fmt.Fprintf(out, " | one-way %s", iv)
			}
			out.WriteByte('\n')
			out.Flush()
			mu.Unlock()
			last = st
		}
	}
}

func printMessage(w *bufio.Writer, m subscriber.Message) {
	fmt.Fprintf(w, "%s %d ", m.Stream.Session, m.Seq)
	if utf8.Valid(m.Data) && printable(m.Data) {
		w.Write(m.Data)
	} else {
		fmt.Fprintf(w, "%x", m.Data)
	}
	w.WriteByte('\n')
}

func printable(b []byte) bool {
	for _, c := range b {
		if c < 0x20 && c != '\t' {
			return false
		}
	}
	return true
}
