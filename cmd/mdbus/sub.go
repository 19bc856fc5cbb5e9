package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

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
hex otherwise; --format hex or json; --decode itch50 decodes NASDAQ ITCH 5.0
field by field), or with --stats only a stats line per interval. Ends at
--count messages, --duration, end of session with --exit-on-end, or SIGINT.`)
	ff := addFeedFlags(fs)
	stats := fs.Duration("stats", 0, "print a stats line every interval instead of messages (e.g. 1s)")
	count := countFlag(fs, "count", 0, "exit after this many messages (0 = no limit)")
	dur := fs.Duration("duration", 0, "exit after this long (0 = no limit)")
	exitOnEnd := fs.Bool("exit-on-end", false, "exit when a stream ends (end-of-session packet)")
	start := fs.String("start", "live", "where each stream starts: live, session (its sequence 1), seq:N, time:RFC3339 (needs --journal); history comes from --journal, then --retransmit")
	ckpt := fs.String("checkpoint", "", "resume file: the last delivered sequence per session, saved atomically every 100 ms; a restart continues after it. Alone: at-least-once (stdout is flushed before each save, so a restart may print again what followed the last save)")
	outFile := fs.String("out", "", "with --checkpoint: append messages to this file in step with the checkpoint (exactly-once across restarts)")
	jdir := fs.String("journal", "", "journal directory to read history (and --start time:) from")
	maxGap := fs.Uint64("max-gap", subscriber.DefaultMaxGap, "how far ahead of the next expected sequence a packet may jump before it is held as a suspect until its source confirms the jump (a warning says when); raise it to accept the jumps of a replayed capture")
	retrPort := fs.Uint("retransmit-port", 0, "instead of --retransmit: send each stream's re-requests to this port at its own source's address (every publisher host runs its retransmitter there)")
	failover := fs.Duration("failover", 0, "with several --retransmit addresses: how long re-requests may go unanswered before the next is asked (default 50ms)")
	repair := fs.String("repair-group", "", "also join this multicast group:port for repairs")
	repairSrc := fs.String("repair-source", "", "with --repair-group: accept repairs only from this address (the retransmitter's; unset: any sender, counted as unverified)")
	secondary := fs.String("secondary", "", "A/B: second feed group:port carrying the same sessions")
	stop := fs.Bool("stop-on-loss", false, "stop delivering a stream at its first unrecoverable loss (default: report it and continue)")
	imp := addImpairFlags(fs)
	format := fs.String("format", "text", "how messages are printed: text (session seq payload), hex or json (one object per line)")
	decodeAs := addDecodeFlag(fs)
	latency := fs.Bool("latency", true, "with --stats: one-way latency percentiles of stamped messages (pub --synthetic stamps each at its send moment, after its pacing wait)")
	fan := fs.String("fanout", "", "read the feed from this host's fan-out ring (mdbus fanout) instead of the network: its NAME, or a PATH; no socket and no system call per message; --retransmit fills what the reader misses, --busy-poll is how long an idle reader spins before it sleeps (default 20µs)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	dec, err := parseOutput(*format, *decodeAs)
	if err != nil {
		return err
	}
	pr := msgPrinter{format: *format, dec: dec}
	if *fan != "" {
		if err := ff.setProcs(fs, 1); err != nil {
			return err
		}
		return runSubFanout(ctx, stdout, subFanout{ring: *fan, start: *start, retransmit: *ff.retransmit, stats: *stats, count: *count, dur: *dur, exitOnEnd: *exitOnEnd, stopOnLoss: *stop, spin: *ff.busy, pr: &pr})
	}
	scfg, err := ff.config()
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
	feeds := 1
	if secondG.IsValid() {
		feeds = 2
	}
	if err := ff.setProcs(fs, feeds); err != nil {
		return err
	}
	var repairSource netip.Addr
	if *repairSrc != "" {
		if repairSource, err = netip.ParseAddr(*repairSrc); err != nil {
			return usageErr("--repair-source %q: want an IP address such as 127.0.0.1", *repairSrc)
		}
		if !repairG.IsValid() {
			return usageErr("--repair-source needs --repair-group")
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
	if *count < 0 || *dur < 0 || *stats < 0 {
		return usageErr("--count, --duration and --stats must not be negative")
	}
	rs, err := parseSubResume(*start, *ckpt, *outFile, *jdir)
	if err != nil {
		return err
	}
	out := bufio.NewWriterSize(stdout, 64<<10)
	defer out.Flush()
	var mu sync.Mutex // guards out
	msgOut := rs.writer(out, &mu)
	run, end := runFor(ctx, *dur) // the callbacks stop it at --count or an end with --exit-on-end
	defer end()
	n := 0
	var lat *oneway.Recorder
	if *stats > 0 && *latency {
		lat = oneway.NewRecorder()
	}
	scfg.Secondary, scfg.StartSeq = secondG, rs.legacy
	scfg.Recovery.RetransmitPort, scfg.Recovery.Failover = uint16(*retrPort), *failover
	scfg.Recovery.RepairGroup, scfg.Recovery.RepairSource, scfg.Recovery.LossPolicy = repairG, repairSource, policy
	scfg.Limits.MaxGap = *maxGap
	scfg.Wrap, scfg.WrapSecondary = wrap, wrap2
	scfg.OnLoss = func(l subscriber.Loss) {
		mu.Lock()
		if *format == "json" { // every line of the output is one JSON object
			fmt.Fprintf(out, `{"event":"lost","session":%s,"source":%q,"from":%d,"to":%d,"messages":%d}`+"\n",
				appendJSONStr(nil, l.Stream.Session.String()), l.Stream.Source, l.From, l.To, l.To-l.From)
		} else {
			fmt.Fprintf(out, "# LOST %s [%d, %d): %d messages could not be recovered\n", l.Stream.Session, l.From, l.To, l.To-l.From)
		}
		mu.Unlock()
	}
	scfg.OnMessage = func(m subscriber.Message) {
		mu.Lock()
		defer mu.Unlock()
		n++
		if *count > 0 && n > *count {
			return // the rest of the last packet: --count is exact
		}
		if *stats == 0 {
			pr.print(msgOut, m)
		} else if lat != nil {
			lat.Record(m.Data, time.Now())
		}
		if *count > 0 && n >= *count {
			end()
		}
	}
	scfg.OnEnd = func(id subscriber.StreamID, next wire.Seq) {
		mu.Lock()
		if *format == "json" {
			fmt.Fprintf(out, `{"event":"end_of_session","session":%s,"source":%q,"next_seq":%d}`+"\n",
				appendJSONStr(nil, id.Session.String()), id.Source, next)
		} else {
			fmt.Fprintf(out, "# end of session %s from %s at sequence %d\n", id.Session, id.Source, next)
		}
		mu.Unlock()
		if *exitOnEnd {
			end()
		}
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
	defer goWatchDrops(ctx, "sub", feedStats)()
	defer func() { // after the loop, before ops.Close and the subscriber's close
		st := feedStats()
		mu.Lock()
		out.Flush()
		attrs := []any{"messages", st.Messages, "packets", st.Packets, "bytes", st.Bytes, "duplicates", st.Duplicates,
			"gaps", st.Gaps, "naks", st.NAKs, "repairs", st.Repairs, "recovered", st.Recovered, "lost", st.LostMessages,
			"kernel_drops", st.KernelDrops, "dropped", st.Dropped, "streams", st.Streams}
		if st.SuspectJumps > 0 {
			attrs = append(attrs, "suspect_jumps", st.SuspectJumps, "resyncs", st.Resyncs)
		}
		if len(scfg.Recovery.Backups) > 0 {
			attrs = append(attrs, "failovers", st.Failovers, "asking", st.Asking)
		}
		if lat != nil {
			t := lat.Total()
			attrs = append(attrs, "latency_count", t.Count, "latency_p50", t.P50, "latency_p99", t.P99, "latency_p999", t.P999, "latency_max", t.Max)
		}
		mu.Unlock()
		env.log.Info("summary", attrs...)
	}()
	tick, stopTick := ticker(*stats)
	defer stopTick()
	var last subscriber.Stats
	for {
		select {
		case <-run.Done():
			return nil
		case <-tick:
			st := feedStats()
			streams := st.Streams
			mu.Lock() // never call into the subscriber while holding mu: OnMessage takes mu under the subscriber's lock
			fmt.Fprintf(out, "%s msgs %d (+%d) pkts %d bytes %d dups %d gaps %d naks %d unanswered %d confirms %d recovered %d lost %d (recovery p50 %v p99 %v; asked after p50 %v, answered in p50 %v) kernel-drops %d streams %d",
				time.Now().Format("15:04:05"), st.Messages, st.Messages-last.Messages, st.Packets, st.Bytes,
				st.Duplicates, st.Gaps, st.NAKs, st.Retries, st.Confirms, st.Recovered, st.LostMessages, st.RecoveryP50, st.RecoveryP99,
				st.AskedP50, st.AnsweredP50, st.KernelDrops, streams)
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

// msgPrinter writes delivered messages as text, hex or JSON lines,
// reusing one buffer and the last stream's formatted names, so that a
// message costs no allocation. Not safe for concurrent use.
type msgPrinter struct {
	format string
	dec    decoder
	buf    []byte
	last   subscriber.StreamID
	named  bool
	prefix []byte // text: "SESSION "; JSON: `{"session":"S","source":"A"`
}

func (p *msgPrinter) print(w *bufio.Writer, m subscriber.Message) {
	if !p.named || m.Stream != p.last {
		p.last, p.named = m.Stream, true
		session := m.Stream.Session.String()
		if p.format == "json" {
			p.prefix = append(appendJSONStr(append(p.prefix[:0], `{"session":`...), session), `,"source":`...)
			p.prefix = appendJSONStr(p.prefix, m.Stream.Source.String())
		} else {
			p.prefix = append(append(p.prefix[:0], session...), ' ')
		}
	}
	b := append(p.buf[:0], p.prefix...)
	switch p.format {
	case "json":
		b = append(b, `,"seq":`...)
		b = strconv.AppendUint(b, uint64(m.Seq), 10)
		b = append(b, `,"len":`...)
		b = strconv.AppendInt(b, int64(len(m.Data)), 10)
		b = p.dec.appendJSONField(b, m.Data, "hex")
		b = append(b, '}')
	default:
		b = strconv.AppendUint(b, uint64(m.Seq), 10)
		b = append(b, ' ')
		if p.format == "hex" {
			b = appendHex(b, m.Data)
		} else {
			b = p.dec.appendText(b, m.Data)
		}
	}
	b = append(b, '\n')
	w.Write(b)
	p.buf = b
}
