package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mdbus/mdbus/packetconn/impair"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/tools/counters"
	"github.com/mdbus/mdbus/tools/statsd"
	"github.com/mdbus/mdbus/wire"
)

func init() {
	register("statsd", "StatsD over the bus: relay (UDP/Unix -> bus) and collect (bus -> Graphite/JSON/Prometheus)", runStatsd)
}

const statsdGroup = "239.192.0.81:31081"

func runStatsd(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, `Usage: mdbus statsd relay|collect|send [flags]

  relay    listen for StatsD/DogStatsD datagrams (UDP 127.0.0.1:8125, optionally a
           Unix socket) and publish the valid metrics on a bus group, with a
           retransmit server for the collectors' re-requests
  collect  subscribe to the group (recovering losses from the relay), aggregate
           per flush interval and write Graphite, JSON lines or Prometheus text
  send     send StatsD lines to a relay over UDP (a client for scripts)

Run "mdbus statsd relay -h" or "mdbus statsd collect -h" for the flags.
`)
		if len(args) == 0 {
			return usageErr("want a subcommand: relay, collect or send")
		}
		return nil
	}
	switch args[0] {
	case "relay":
		return runStatsdRelay(ctx, args[1:])
	case "collect":
		return runStatsdCollect(ctx, args[1:], stdout)
	case "send":
		return runStatsdSend(ctx, args[1:], os.Stdin)
	}
	return usageErr("unknown statsd subcommand %q: want relay, collect or send", args[0])
}

func runStatsdRelay(ctx context.Context, args []string) error {
	fs := newFlags("statsd relay", "[flags]", `Listens for StatsD lines (etsy types c, g, ms, s with sample rates; DogStatsD
tags, h, d, value packing, container ids and timestamps), refuses and counts
malformed ones by reason, and publishes the valid metrics on the bus group as
sequenced MoldUDP64 messages. Collectors recover lost messages from the
relay's retransmit server (--retransmit). Refused as well: sample rates below
@0.000001, and names starting with mdbus.statsd. (kept for the relay's and
collectors' own metrics). Exits 1, saying which, when an address it needs is
taken.`)
	gf := addGroupFlags(fs)
	fs.Lookup("group").DefValue = statsdGroup
	fs.Set("group", statsdGroup)
	listen := fs.String("listen", statsd.DefaultListen, "UDP address for StatsD clients (IPv4 or IPv6, e.g. [::1]:8125)")
	noUDP := fs.Bool("no-udp", false, "do not listen on UDP (with --unix)")
	unixPath := fs.String("unix", "", "also listen on this Unix datagram socket path (DogStatsD unix://)")
	retr := fs.String("retransmit", "127.0.0.1:31082", "unicast address:port of the retransmit server for collectors' re-requests (empty: none)")
	preagg := fs.Duration("preaggregate", 0, "sum counters and keep the last gauge over this window before publishing (0: off)")
	tick := fs.Duration("tick", statsd.DefaultTickInterval, "publish a clock tick at every multiple of this since the epoch unless a metric went out since: collectors write a flush interval that is a multiple of it as soon as it ends, any other within one tick")
	self := fs.Duration("self-interval", statsd.DefaultSelfInterval, "publish the relay's own counters this often (negative: never)")
	rcvbuf := fs.Int("rcvbuf", statsd.DefaultRelayBuffer, "socket receive buffer bytes to request")
	ttl := fs.Int("ttl", 0, "multicast TTL; 0 keeps packets on this host")
	linger := fs.Duration("linger", statsd.DefaultLinger, "how long a partly filled bus packet may wait for more metrics")
	stats := fs.Duration("stats", 0, "print the relay's counters to stderr this often (0: only at exit)")
	dur := fs.Duration("duration", 0, "exit after this long (0: until interrupted)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	group, source, err := gf.parse()
	if err != nil {
		return err
	}
	la, err := netip.ParseAddrPort(*listen)
	if err != nil {
		return usageErr("--listen %q: want address:port, like 127.0.0.1:8125 or [::1]:8125", *listen)
	}
	ra, err := parseAddr("--retransmit", *retr, false)
	if err != nil {
		return err
	}
	log := env.log
	// Everything that binds an address opens before the relay publishes
	// anything, so a taken port stops it cleanly.
	ops, err := startOps("statsd-relay")
	if err != nil {
		return err
	}
	defer ops.Close() // after r.Close below: the file's last sample is final
	r, err := statsd.NewRelay(statsd.RelayConfig{
		Listen: la, NoUDP: *noUDP, Unix: *unixPath, ReadBuffer: *rcvbuf, PreAggregate: *preagg, TickInterval: *tick,
		SelfInterval: *self, Retransmit: ra, Logger: log,
		Bus: publisher.Config{Group: group, Interface: *gf.ifname, Source: source, TTL: *ttl, Linger: *linger},
	})
	if err != nil {
		return statsdListenErr(err)
	}
	counters.AttachPublisher(ops.Counters(), "bus", r.Publication())
	counters.AttachStruct(ops.Counters(), "relay", func() any { return r.Stats() })
	from := "udp " + r.Addr().String()
	switch {
	case *noUDP:
		from = "unix " + *unixPath
	case *unixPath != "":
		from += " and unix " + *unixPath
	}
	answers := "re-requests answered on " + r.RetransmitAddr().String()
	if !r.RetransmitAddr().IsValid() {
		answers = "no retransmit server (collectors cannot recover losses)"
	}
	fmt.Fprintf(os.Stderr, "mdbus statsd relay: %s -> %s session %s, %s\n", from, group, r.Publication().Session(), answers)
	var tickC <-chan time.Time
	if *stats > 0 {
		t := time.NewTicker(*stats)
		defer t.Stop()
		tickC = t.C
	}
	var end <-chan time.Time
	if *dur > 0 {
		end = time.After(*dur)
	}
	print := func() {
		st := r.Stats()
		fmt.Fprintf(os.Stderr, "mdbus statsd relay: datagrams %d metrics %d bad %d kernel-drops %d bus-messages %d publish-errors %d\n",
			st.Datagrams, st.Metrics, st.BadTotal, st.KernelDrops, st.Messages, st.PublishErrors)
	}
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-end:
			break loop
		case <-tickC:
			print()
		}
	}
	err = r.Close()
	print()
	return err
}

func runStatsdCollect(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("statsd collect", "[flags]", `Subscribes to the relay's group, re-requests lost messages from its
retransmit server, and aggregates per flush interval (aligned to the relay's
clock carried in the messages, so every collector flushes identically) per
name and tag set: counters (sum, rate), gauges (with deltas), sets (distinct),
timers/histograms/distributions (count, sum, mean, min, max, percentiles).
Unrecoverable bus loss is reported in mdbus.statsd.collector.bus_lost_messages.
Values are written as plain decimals (1000000, never 1e+06); a metric that
would make a sum, rate or gauge infinite is refused and counted in
mdbus.statsd.collector.non_finite_refused. An interval is written as soon as
the relay's clock tick passes its end (--flush a multiple of the relay's
--tick).`)
	gf := addGroupFlags(fs)
	fs.Set("group", statsdGroup)
	fs.Lookup("group").DefValue = statsdGroup
	retr := fs.String("retransmit", "127.0.0.1:31082", "unicast address:port of the relay's retransmit server (empty: no recovery); a comma-separated list adds backups, asked in turn when one stops answering")
	retrPort := fs.Uint("retransmit-port", 0, "several relays on several hosts: ask each relay's own retransmit server, at this port of its address (replaces --retransmit)")
	flush := fs.Duration("flush", statsd.DefaultFlushInterval, "flush interval")
	pcts := fs.String("percentiles", "50,90,95,99", "comma-separated percentiles for timers, histograms, distributions")
	digits := fs.Int("hist-digits", statsd.DefaultHistDigits, "HdrHistogram significant digits (1-5)")
	format := fs.String("format", "graphite", "output format: graphite or json")
	out := fs.String("output", "-", "where flushes go: - (stdout) or a TCP address (Graphite carbon, e.g. 127.0.0.1:2003)")
	prom := fs.String("prometheus", "", "serve Prometheus text format on this address (e.g. 127.0.0.1:9102) at /metrics")
	maxSeries := countFlag(fs, "max-series", statsd.DefaultMaxSeries, "most distinct series (name, type, tag set) held; a new one beyond it is refused, counted in mdbus.statsd.collector.series_refused and logged once per interval (the relays' own series are exempt)")
	selfMetrics := fs.String("self-metrics", "auto", "when to write the mdbus.statsd.* series: auto (in a flush that has other series or a non-zero count of bad lines, refusals or losses; an idle stream's flushes are empty) or always")
	maxMembers := countFlag(fs, "max-set-members", statsd.DefaultMaxSetMembers, "most members of one set per interval")
	deleteIdle := fs.Bool("delete-idle", false, "omit series without data from a flush (etsy deleteIdleStats)")
	start := fs.Uint64("start", 0, "first sequence to expect (1: ask the relay for everything from the start; 0: join live)")
	dur := fs.Duration("duration", 0, "exit after this long (0: until interrupted)")
	imp := addImpairFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	group, source, err := gf.parse()
	if err != nil {
		return err
	}
	ra, backups, err := parseRetransmitters("--retransmit", *retr)
	if err != nil {
		return err
	}
	if *retrPort > 65535 {
		return usageErr("--retransmit-port %d: want a UDP port, 1-65535", *retrPort)
	}
	if *retrPort != 0 {
		ra, backups = netip.AddrPort{}, nil // each relay's own, not the default one
	}
	var percentiles []float64
	for _, s := range strings.Split(*pcts, ",") {
		p, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return usageErr("--percentiles %q: %q is not a number", *pcts, s)
		}
		percentiles = append(percentiles, p)
	}
	selfMode, err := statsd.ParseSelfMetrics(*selfMetrics)
	if err != nil {
		return usageErr("--self-metrics %q: want auto or always", *selfMetrics)
	}
	icfg, impaired, err := imp.config()
	if err != nil {
		return err
	}
	var w io.Writer
	if *out == "-" {
		bw := bufio.NewWriterSize(stdout, 64<<10)
		defer bw.Flush()
		w = flushingWriter{bw}
	} else {
		tw := &statsd.TCPWriter{Addr: *out}
		defer tw.Close()
		w = tw
	}
	var backends []statsd.Backend
	switch *format {
	case "graphite":
		backends = append(backends, &statsd.GraphiteWriter{W: w})
	case "json":
		backends = append(backends, &statsd.JSONWriter{W: w})
	default:
		return usageErr("--format %q: want graphite or json", *format)
	}
	var promL net.Listener
	if *prom != "" {
		p := statsd.NewPrometheus()
		promL, err = net.Listen("tcp", *prom)
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("--prometheus %s is already in use by another process (a Prometheus exporter?): stop it, or serve elsewhere with --prometheus ADDR:PORT", *prom)
		}
		if err != nil {
			return fmt.Errorf("--prometheus %s: %w", *prom, err)
		}
		defer promL.Close()
		go p.Serve(promL)
		backends = append(backends, p)
		fmt.Fprintf(os.Stderr, "mdbus statsd collect: Prometheus on http://%s/metrics\n", promL.Addr())
	}
	ops, err := startOps("statsd-collect")
	if err != nil {
		return err
	}
	defer ops.Close() // after c.Close below
	bus := subscriber.Config{Group: group, Interface: *gf.ifname, Source: source, StartSeq: wire.Seq(*start),
		Recovery: subscriber.Recovery{Retransmitter: ra, Backups: backups, RetransmitPort: uint16(*retrPort)}}
	if impaired {
		bus.Wrap = impair.Receiver(icfg)
	}
	log := env.log
	c, err := statsd.NewCollector(statsd.CollectorConfig{
		Bus: bus, FlushInterval: *flush, Percentiles: percentiles, HistDigits: *digits, MaxSeries: *maxSeries,
		MaxSetMembers: *maxMembers, DeleteIdle: *deleteIdle, SelfMetrics: selfMode, Backends: backends, Logger: log,
	})
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("group port %s is bound by a process that does not share it (SO_REUSEPORT): stop it, or move the relay and its collectors to another --group (%w)", group, err)
	}
	if err != nil {
		return err
	}
	counters.AttachSubscriber(ops.Counters(), "bus", c.Subscriber())
	fmt.Fprintf(os.Stderr, "mdbus statsd collect: %s via %s, %s, flush every %v\n", group, *gf.ifname, reRequestsTo(ra, backups, uint16(*retrPort)), *flush)
	var end <-chan time.Time
	if *dur > 0 {
		end = time.After(*dur)
	}
	select {
	case <-ctx.Done():
	case <-end:
	}
	err = c.Close()
	st := c.Subscriber().Stats()
	fmt.Fprintf(os.Stderr, "mdbus statsd collect: bus messages %d gaps %d naks %d recovered %d lost %d\n",
		st.Messages, st.Gaps, st.NAKs, st.Recovered, st.LostMessages)
	return err
}

// reRequestsTo says where a collector sends its re-requests.
func reRequestsTo(ra netip.AddrPort, backups []netip.AddrPort, port uint16) string {
	switch {
	case port != 0:
		return fmt.Sprintf("re-requests to each relay's own retransmit server at port %d of its address", port)
	case !ra.IsValid():
		return "no re-requests (no --retransmit: losses are counted, not recovered)"
	case len(backups) > 0:
		return fmt.Sprintf("re-requests to %s (backups %v)", ra, backups)
	}
	return "re-requests to " + ra.String()
}

// statsdListenErr says which address of the relay is taken and what to do
// about it, in one line.
func statsdListenErr(err error) error {
	var le *statsd.ListenError
	if !errors.As(err, &le) {
		return err
	}
	var flag, who string
	switch le.What {
	case "udp":
		flag, who = "--listen ADDR:PORT, and point the StatsD clients there", "a StatsD agent such as etsy statsd or the Datadog agent, or another relay"
	case "unix":
		flag, who = "--unix PATH", "another relay or DogStatsD agent"
	default:
		flag, who = "--retransmit ADDR:PORT, and give the collectors the same --retransmit", "another relay or mdbus pub --retransmit"
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s %s is already in use by another process (%s): stop it, or choose another with %s", le.What, le.Addr, who, flag)
	}
	return fmt.Errorf("%s %s: %v: choose another with %s", le.What, le.Addr, le.Err, flag)
}

// flushingWriter flushes its buffer after every write (one per flush
// interval), so output appears as intervals close.
type flushingWriter struct{ w *bufio.Writer }

func (f flushingWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err == nil {
		err = f.w.Flush()
	}
	return n, err
}
