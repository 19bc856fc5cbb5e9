package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mdbus/mdbus/bench"
	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/wire"
)

func init() {
	register("bench", "benchmarks: throughput, latency, raw UDP, the issue's goals, charts (in a private netns by default)", runBench)
	// Benchmark traffic is heavy: it runs in the lab unless --netns=false.
	netnsDefault["bench"] = true
}

const benchUsage = `Measures mdbus against plain UDP multicast on the same path, in the same run.

Modes:
  throughput  one publisher, --subs subscribers (goroutines, or processes
              with --procs); messages/s, bytes/s, packets/s, messages per
              packet, kernel drops, gaps, repairs and losses per subscriber
  latency     latency at a fixed offered rate (--rate, default 10k/s):
              round trip over two groups and/or one way (--mode); the stamp
              is the scheduled send time, which corrects coordinated omission.
              --mode pingpong: closed loop as Aeron's ping-pong (one message
              in flight, the ponger in its own process answers at once),
              with each side's CPU/wall; add --busy-poll D to spin both ends
  raw         throughput and latency of plain UDP multicast only
  capacity    the highest offered rate that arrives whole (zero kernel drops,
              zero lost) for --probe per run, mdbus and raw UDP in the same
              run, over --payload-sizes x --size x --sub-counts (default
              1472,8972 x 64,1024 x 1,4; 4 = subscriber processes): a
              free-running probe, an exponential ramp, then bisection to
              --resolution, at most --max-probes and --budget per cell;
              with --with-loss each lossy cell is searched together with
              its lossless cell, their probes taken in turn, and reported
              as a ratio to it
  goals       the performance targets, each measured in this run, PASS/FAIL;
              the throughput goals at 8972 and 1472-byte packets (or
              --payload-size), with headroom = capacity / goal from
              --headroom (searched) or --capacity-from (a capacity report)
  chart       draw a percentile-spectrum SVG from .json reports or .hgrm files:
              mdbus bench chart -o out.svg a.json b.hgrm ...
  group       recovery at group scale: N subscriber processes behind a shared
              loss; re-requests and repairs per lost packet (mdbus bench group -h)
  lab         run a command inside the benchmark lab (private network
              namespace, lo multicast), as bench/peers/run.sh does:
              mdbus bench lab -- COMMAND [ARGS...]

throughput and latency run mdbus and raw UDP (--systems) with the same sizes
and rates and report the ratio mdbus / raw. Each run is bounded by
--duration (and --count); Ctrl-C stops early and still writes what was
measured. Files go to --out: NAME.json, NAME.hlog (interval histograms),
NAME-SERIES.hgrm (percentile distributions, µs) and NAME.svg.

--systems raw-gso adds the floor under mdbus: mdbus's packets (the same
messages, as many to a packet, as many bytes) in the same GSO trains and
GRO reads, with no protocol; capacity rows then show mdbus / raw-gso in
bytes/s. --path veth puts the sender and the receivers in two namespaces of
the lab joined by veth pairs and a bridge, so that packets cross a device
as on a NIC (GSO trains cut into packets on the way).

By default the benchmark runs inside a private network namespace on lo with
TTL 0; --netns=false runs it in this namespace (still lo, TTL 0). Another
interface or a TTL above 0 needs --allow-network.`

func runBench(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 0 && args[0] == "_child" {
		return bench.ChildMain(ctx, args[1:], os.Stdin, stdout)
	}
	if len(args) > 0 && args[0] == "lab" {
		return benchLab(ctx, args[1:], stdout)
	}
	if len(args) > 0 && args[0] == "_group-sub" {
		return bench.GroupChildMain(ctx, args[1:], stdout)
	}
	if len(args) > 0 && args[0] == "group" {
		return benchGroup(ctx, args[1:], stdout)
	}
	mode := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		mode, args = args[0], args[1:]
	}
	fs := newFlags("bench", "throughput|latency|raw|capacity|goals|chart|lab [flags]", benchUsage)
	netns := fs.Bool("netns", true, "run inside a private user+network namespace (false: this namespace, still lo/TTL 0)")
	allowNet := fs.Bool("allow-network", false, "allow an interface other than loopback and a TTL above 0")
	ifname := fs.String("interface", "lo", "multicast interface")
	path := fs.String("path", bench.PathLo, "throughput, latency, capacity: lo (every socket here) or veth (sender and receivers in two namespaces of the lab joined by veth pairs and a bridge, GSO trains cut into packets on the way, as on a NIC; needs --netns)")
	ttl := fs.Int("ttl", 0, "multicast TTL (0 keeps packets on this host)")
	group := fs.String("group", bench.DefaultGroup.String(), "first multicast group:port (each run takes the next port)")
	sizes := fs.String("size", "64", "message sizes, comma-separated: N bytes, MIN-MAX (uniform), itch (real NASDAQ ITCH 5.0 messages) or synth")
	rates := fs.String("rate", "", "offered rates in messages/s, comma-separated (10k, 4M; max = as fast as possible); default: max for throughput, 10k for latency")
	systems := fs.String("systems", "mdbus,raw", "systems to run, comma-separated: mdbus, raw, raw-gso (mdbus's packets in GSO trains with no protocol: the floor; throughput, capacity and one-way latency)")
	latMode := fs.String("mode", "both", "latency: rtt (paced round trip over two groups), oneway, pingpong (closed loop, one in flight, ponger in its own process), or both (rtt,oneway); comma-separated")
	subs := countFlag(fs, "subs", 1, "throughput and one-way latency: subscribers per run (1-64)")
	procs := fs.Bool("procs", false, "run each subscriber in its own process (this binary re-executed)")
	dur := fs.Duration("duration", 0, "how long each run sends (default 5s; goals: 10s; at most 1h)")
	count := countFlag[int64](fs, "count", 0, "also end each run after this many messages (0 = duration only)")
	warmup := fs.Duration("warmup", 0, "latency: leading part of each run not recorded (default 500ms; negative for none)")
	payload := fs.Int("payload-size", 0, "largest MoldUDP64 packet in bytes (default 1472, a 1500-byte MTU; goals: both 8972, a jumbo MTU, and 1472)")
	batch := countFlag(fs, "batch", 0, "messages handed to the publisher (or sendmmsg) at once in throughput runs (default 256)")
	linger := fs.Duration("linger", 0, "throughput: how long the publisher lets a partly filled packet wait for more messages (default 500µs; negative: none)")
	rcvbuf := fs.Int("read-buffer", 0, "SO_RCVBUF request in bytes (default 32 MiB; the kernel caps it at net.core.rmem_max unless the lab runs as root, see BENCHMARKS.md)")
	sndbuf := fs.Int("write-buffer", 0, "SO_SNDBUF request in bytes (default 4 MiB)")
	stamps := fs.Bool("timestamps", false, "kernel receive timestamps (SO_TIMESTAMPNS): split latency into wire and receive path")
	busy := fs.Duration("busy-poll", 0, "every receiver (mdbus and raw) spins on its socket this long before parking (0-10ms; costs a CPU each)")
	noGRO := fs.Bool("no-gro", false, "mdbus subscribers read without UDP_GRO (raw UDP receivers never use it)")
	pubProcsN := fs.Int("pub-procs", 1, "Go processors (GOMAXPROCS) of this process during runs with --procs, when it is only the publisher's side: 1 as 'mdbus pub' runs; 0: the Go runtime's default, as does a GOMAXPROCS variable when this flag is not given")
	subProcsN := addSubProcsFlag(fs) // with --procs
	spin := fs.Duration("spin", 0, "latency: busy-wait this close to each send time (default 2ms; negative: only sleep)")
	noInline := fs.Bool("no-inline", false, "latency: send from the publisher's goroutine instead of inline in Publish")
	inlineTput := fs.Bool("inline", false, "throughput and capacity: the mdbus publisher sends inline in PublishBatch (no sending goroutine, no linger), the raw sender's thread shape")
	noGSO := fs.Bool("no-gso", false, "throughput, capacity, goals, latency: the mdbus publisher sends one packet per sendmmsg slot instead of UDP GSO trains (raw UDP never uses GSO)")
	interval := fs.Duration("interval", 0, "length of each .hlog interval (default 1s)")
	drain := fs.Duration("drain", 0, "wait this long for subscribers after the sender stops (default 2s)")
	seed := fs.Uint64("seed", 1, "seed for message contents and loss")
	withLoss := fs.Bool("with-loss", false, "also run mdbus with --loss of the datagrams dropped at each subscriber (the impairment layer; recovery cost)")
	lossList := fs.String("loss", "0.01", "fractions of datagrams --with-loss drops (0-0.5), comma-separated: 0.01,0.02,0.05 runs each beside the lossless case")
	recovery := fs.Bool("recovery", false, "run every mdbus case with its retransmitter (cache, server, NAKs), not only the lossy ones")
	out := fs.String("out", "bench-results", "directory for the .json, .hlog, .hgrm and .svg files (empty: none)")
	name := fs.String("name", "", "base name of the files (default: MODE-YYYYmmdd-HHMMSS)")
	asJSON := fs.Bool("json", false, "print the JSON report on stdout instead of the table")
	chartOut := fs.String("o", "chart.svg", "chart: the SVG file to write")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process (publisher and goroutine subscribers) to this file")
	payloads := fs.String("payload-sizes", "1472,8972", "capacity: mdbus packet payload sizes, comma-separated")
	subCounts := fs.String("sub-counts", "1,4", "capacity: subscriber counts, comma-separated (1 runs in a goroutine, more in processes)")
	probe := fs.Duration("probe", bench.DefaultProbeDuration, "capacity: how long each probe sends")
	resolution := fs.Float64("resolution", bench.DefaultResolution, "capacity: stop when the lowest lossy rate is within this fraction above the highest lossless one")
	maxProbes := countFlag(fs, "max-probes", bench.DefaultMaxProbes, "capacity: at most this many probes per cell (the free-running one included)")
	budget := fs.Duration("budget", bench.DefaultCapacityBudget, "capacity: no probe of a cell starts after this long")
	withHeadroom := fs.Bool("headroom", false, "goals: search the capacity of each throughput goal's cell (--probe per probe) and report headroom = capacity / goal")
	capFrom := fs.String("capacity-from", "", "goals: take capacities for the headroom from this capacity report (.json)")
	if err := parseSome(fs, args); err != nil {
		return err
	}
	if mode == "" && fs.NArg() > 0 {
		mode = fs.Arg(0)
		if err := parseSome(fs, fs.Args()[1:]); err != nil {
			return err
		}
	}
	_ = netns
	switch mode {
	case "chart":
		return benchChart(*chartOut, fs.Args(), stdout)
	case "throughput", "latency", "raw", "capacity", "goals":
	case "":
		return usageErr("say which benchmark: throughput, latency, raw, capacity, goals or chart")
	default:
		return usageErr("unknown benchmark %q: want throughput, latency, raw, capacity, goals or chart", mode)
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q", fs.Args())
	}

	// Check everything before anything runs.
	g, err := netip.ParseAddrPort(*group)
	if err != nil || !g.Addr().Is4() || !g.Addr().IsMulticast() {
		return usageErr("--group %q: want an IPv4 multicast address and port, like 239.255.77.1:41000", *group)
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"--duration", *dur}, {"--interval", *interval}, {"--drain", *drain}} {
		if f.v < 0 {
			return usageErr("%s %v is negative", f.name, f.v)
		}
	}
	if *dur > bench.MaxDuration {
		return usageErr("--duration %v is above the limit of %v", *dur, bench.MaxDuration)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"--payload-size", *payload}, {"--batch", *batch}, {"--read-buffer", *rcvbuf}, {"--write-buffer", *sndbuf}} {
		if f.v < 0 {
			return usageErr("%s %d is negative", f.name, f.v)
		}
	}
	if *count < 0 {
		return usageErr("--count %d is negative", *count)
	}
	if *subs < 1 || *subs > bench.MaxSubscribers {
		return usageErr("--subs %d: want 1 to %d", *subs, bench.MaxSubscribers)
	}
	losses, err := parseLosses(*lossList)
	if err != nil {
		return err
	}
	loss := &losses[0] // goals take the first
	if flagWasSet(fs, "loss") && !*withLoss && mode != "goals" {
		return usageErr("--loss is used by --with-loss (mdbus again at each loss, beside the lossless case) and by goals: add --with-loss")
	}
	var sys []bench.System
	for _, s := range strings.Split(*systems, ",") {
		switch strings.TrimSpace(s) {
		case "mdbus":
			sys = append(sys, bench.Mdbus)
		case "raw":
			sys = append(sys, bench.Raw)
		case "raw-gso":
			sys = append(sys, bench.RawGSO)
		default:
			return usageErr("--systems %q: want mdbus, raw, raw-gso or a comma-separated list like mdbus,raw", *systems)
		}
	}
	if mode == "raw" {
		sys = []bench.System{bench.Raw}
	}
	var modes []string
	for _, m := range strings.Split(*latMode, ",") {
		switch strings.TrimSpace(m) {
		case "both":
			modes = append(modes, bench.RoundTrip, bench.OneWay)
		case "rtt", "round-trip":
			modes = append(modes, bench.RoundTrip)
		case "oneway", "one-way":
			modes = append(modes, bench.OneWay)
		case "pingpong", "ping-pong":
			modes = append(modes, bench.PingPong)
		default:
			return usageErr("--mode %q: want rtt, oneway, pingpong or both (rtt,oneway), comma-separated", *latMode)
		}
	}
	cfg := bench.Config{
		Command: mode, Interface: *ifname, AllowNetwork: *allowNet, TTL: *ttl, Group: g,
		Duration: *dur, Count: *count, Warmup: *warmup, PayloadSize: *payload, Batch: *batch, Linger: *linger,
		ReadBuffer: *rcvbuf, WriteBuffer: *sndbuf, Timestamps: *stamps, Spin: *spin, BusyPoll: *busy, NoInline: *noInline, InlineThroughput: *inlineTput, NoGSO: *noGSO, NoGRO: *noGRO,
		Interval: *interval, Drain: *drain, Seed: *seed, Recovery: *recovery, Path: *path,
	}
	if cfg.SubProcs, err = benchProcs(fs, "sub-procs", *subProcsN); err != nil {
		return err
	}
	if cfg.PubProcs, err = benchProcs(fs, "pub-procs", *pubProcsN); err != nil {
		return err
	}
	if *path != bench.PathLo && *path != bench.PathVeth {
		return usageErr("--path %q: want lo or veth", *path)
	}
	if *path == bench.PathVeth {
		if !netlab.Inside() {
			return usageErr("--path veth builds its two hosts inside the private network lab: drop --netns=false")
		}
		cfg.PathHosts = func() (bench.PathHost, bench.PathHost, error) {
			s, r, err := netlab.NICPair("bsnd", "brcv")
			if err != nil {
				return nil, nil, err
			}
			return s, r, nil
		}
	}
	prog := &benchProgress{w: os.Stderr, start: time.Now()}
	cfg.Progress = prog.run
	var matrix bench.CapacityMatrix
	if mode == "capacity" {
		if !flagWasSet(fs, "size") {
			*sizes = "64,1024"
		}
		var err error
		if matrix, err = capacityMatrix(*payloads, *subCounts, sys); err != nil {
			return err
		}
		switch {
		case *probe <= 0 || *probe > bench.MaxDuration:
			return usageErr("--probe %v: want a positive duration up to %v", *probe, bench.MaxDuration)
		case !(*resolution > 0 && *resolution < 1):
			return usageErr("--resolution %v: want a fraction above 0 and below 1, like 0.05", *resolution)
		case *maxProbes < 1 || *maxProbes > 100:
			return usageErr("--max-probes %d: want 1 to 100", *maxProbes)
		case *budget <= 0:
			return usageErr("--budget %v: want a positive duration", *budget)
		}
		cfg.Duration = *probe
	}
	if mode == "goals" && (!(*resolution > 0 && *resolution < 1) || *maxProbes < 1 || *maxProbes > 100 || *budget <= 0 || *probe <= 0 || *probe > bench.MaxDuration) {
		return usageErr("goals: --probe, --resolution, --max-probes or --budget out of range (see mdbus bench -h)")
	}
	var known []bench.CapacityResult
	if mode == "goals" && *capFrom != "" {
		rep, err := bench.LoadReport(*capFrom)
		if err != nil {
			return usageErr("--capacity-from: %v", clean(err))
		}
		if len(rep.Capacity) == 0 {
			return usageErr("--capacity-from %s: the report holds no capacity results (write one with mdbus bench capacity)", *capFrom)
		}
		known = rep.Capacity
	}
	if mode == "goals" && cfg.Duration == 0 {
		cfg.Duration = 10 * time.Second
	}
	if mode == "goals" && cfg.PayloadSize == 0 {
		cfg.PayloadSize = bench.GoalPayloadSize
	}
	b, err := bench.New(cfg)
	if err != nil {
		switch {
		case errors.Is(err, bench.ErrNotLoopback):
			return usageErr("%s", strings.ReplaceAll(clean(err), "Config.AllowNetwork", "--allow-network"))
		case errors.Is(err, bench.ErrConfig):
			return usageErr("%v", clean(err))
		}
		return err
	}
	defer b.Close()
	b.SetInLab(netlab.Inside())
	if !netlab.Inside() {
		b.Note("ran outside the private network lab (--netns=false)")
	}
	var szs []bench.Sizes
	for _, s := range strings.Split(*sizes, ",") {
		lim := b.MaxMessage(bench.Raw)
		for _, y := range sys {
			lim = min(lim, b.MaxMessage(y))
		}
		if mode == "goals" {
			lim = b.MaxMessage(bench.Mdbus)
		}
		if mode == "capacity" {
			// A size too large for a payload size skips those cells.
			lim = bench.MaxMessageFor(bench.Mdbus, slices.Max(matrix.PayloadSizes))
		}
		sz, err := bench.ParseSizes(s, lim)
		if err != nil {
			return usageErr("--size %v", clean(err))
		}
		szs = append(szs, sz)
	}
	rateSpec := *rates
	if rateSpec == "" {
		rateSpec = "max"
		if mode == "latency" {
			rateSpec = "10k"
		}
	}
	var rs []float64
	for _, s := range strings.Split(rateSpec, ",") {
		if t := strings.TrimSpace(s); t != "max" { // the one number syntax, then bench's own bounds
			v, err := parseNumber(t)
			if err != nil {
				return usageErr("--rate %v", err)
			}
			s = strconv.FormatFloat(v, 'f', -1, 64)
		}
		r, err := bench.ParseRate(s, mode != "latency")
		if err != nil {
			return usageErr("--rate %v", clean(err))
		}
		rs = append(rs, r)
	}
	if *name == "" {
		*name = mode + "-" + time.Now().Format("20060102-150405")
	}
	if err := bench.CheckOutput(*out); err != nil {
		return usageErr("--out %q: %v", *out, clean(err))
	}

	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}

	var lossy []float64 // --with-loss: mdbus again at each --loss
	if *withLoss {
		lossy = losses
	}
	rm := bench.RunMatrix{Systems: sys, Sizes: szs, Rates: rs, Modes: modes, Subscribers: *subs, Processes: *procs, Losses: lossy}
	var (
		tput []bench.ThroughputCase
		lat  []bench.LatencyCase
		capa []bench.CapacityCase
	)
	switch mode {
	case "capacity":
		matrix.Sizes, matrix.Processes, matrix.Losses = szs, *procs, lossy
		capa = bench.CapacityCases(matrix)
		for i := range capa {
			capa[i].Search = bench.SearchConfig{Resolution: *resolution, MaxProbes: *maxProbes, Budget: *budget}
			capa[i].Probe = *probe
		}
		prog.total, prog.atMost = len(capa)*(*maxProbes), true
	case "throughput":
		tput = bench.ThroughputCases(rm)
	case "latency":
		lat = bench.LatencyCases(rm)
	case "raw": // throughput flat out, then latency unless a rate is max
		rm.Losses = nil
		tput = bench.ThroughputCases(bench.RunMatrix{Systems: sys, Sizes: szs, Rates: []float64{0}, Subscribers: *subs, Processes: *procs})
		if *rates == "" {
			rm.Rates = []float64{bench.DefaultLatencyRate}
		}
		if !containsZero(rm.Rates) {
			lat = bench.LatencyCases(rm)
		}
	}
	if mode != "capacity" {
		prog.total = len(tput) + len(lat)
	}
	var runErr error
	prog.start = time.Now()
	switch mode {
	case "capacity":
		runErr = b.RunCapacity(ctx, capa)
	case "throughput", "latency", "raw":
		runErr = b.RunThroughput(ctx, tput)
		if runErr == nil {
			runErr = b.RunLatency(ctx, lat)
		}
	case "goals":
		gc := bench.GoalsConfig{
			Loss: *loss, Headroom: *withHeadroom, Probe: *probe, Capacities: known,
			Search: bench.SearchConfig{Resolution: *resolution, MaxProbes: *maxProbes, Budget: *budget},
		}
		if *rates != "" {
			gc.Rate = rs[0]
		}
		if *payload != 0 {
			gc.PayloadSizes = []int{*payload}
		}
		runErr = b.Goals(ctx, gc)
	}
	interrupted := ctx.Err() != nil
	b.Finish(interrupted)
	files, werr := b.WriteFiles(*out, *name)
	_ = files
	var perr error
	if *asJSON {
		perr = b.WriteJSON(stdout)
	} else {
		perr = b.WriteTable(stdout)
	}
	if interrupted { // a signal is a clean end: exit 0 unless writing failed
		env.log.Warn("interrupted; what was measured is above and in the files")
		return errors.Join(werr, perr)
	}
	return errors.Join(runErr, werr, perr)
}

// benchLab runs a command inside the lab (main re-executed this process in
// it, as for every bench mode): the peer scripts use it so that sockperf,
// ZeroMQ and mdbus share one private network.
func benchLab(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 0 && (args[0] == "--netns" || args[0] == "--netns=true") {
		args = args[1:]
	}
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return usageErr("lab: give a command to run inside the lab: mdbus bench lab -- COMMAND [ARGS...]")
	}
	if !netlab.Inside() {
		return usageErr("lab: refusing to run outside the private network lab (drop --netns=false)")
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("lab: %s exited with status %d", args[0], ee.ExitCode())
		}
		return fmt.Errorf("lab: %w", err)
	}
	return nil
}

// clean drops the package prefixes from a bench error for the command line.
func clean(err error) string {
	s := err.Error()
	for _, p := range []string{"bench: invalid config: ", "bench: bad message size: ", "bench: "} {
		s = strings.ReplaceAll(s, p, "")
	}
	return s
}

func containsZero(rs []float64) bool {
	for _, r := range rs {
		if r == 0 {
			return true
		}
	}
	return false
}

// benchProgress writes a line to stderr as each run or capacity probe
// starts: its place, its name and planned length, the time elapsed and
// an estimate of the time left (from the runs so far; "at most" where a
// capacity search may stop early). total 0: not known (goals).
type benchProgress struct {
	w      io.Writer
	start  time.Time
	n      int
	total  int
	atMost bool
}

func (p *benchProgress) run(name string, planned time.Duration) {
	p.n++
	el := time.Since(p.start)
	place, eta := fmt.Sprintf("run %d", p.n), "?"
	if p.total > 0 {
		place = fmt.Sprintf("run %d/%d", p.n, max(p.total, p.n))
		if p.atMost {
			place = fmt.Sprintf("probe %d (at most %d)", p.n, max(p.total, p.n))
		}
		left := time.Duration(max(p.total-p.n+1, 0)) * planned
		if p.n > 1 {
			left = el / time.Duration(p.n-1) * time.Duration(max(p.total-p.n+1, 0))
		}
		eta = left.Round(time.Second).String()
		if p.atMost {
			eta = "at most " + eta
		}
	}
	fmt.Fprintf(p.w, "mdbus bench: %s: %s (%v); elapsed %v, ETA %s\n", place, name, planned, el.Round(time.Second), eta)
}

// capacityMatrix parses the capacity flags.
func capacityMatrix(payloads, subCounts string, sys []bench.System) (bench.CapacityMatrix, error) {
	m := bench.CapacityMatrix{Systems: sys}
	for _, f := range strings.Split(payloads, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < wire.MinPayloadSize+bench.StampLen || n > wire.MaxPayloadSize {
			return m, usageErr("--payload-sizes %q: want sizes from %d to %d bytes, like 1472,8972", payloads, wire.MinPayloadSize+bench.StampLen, wire.MaxPayloadSize)
		}
		m.PayloadSizes = append(m.PayloadSizes, n)
	}
	for _, f := range strings.Split(subCounts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > bench.MaxSubscribers {
			return m, usageErr("--sub-counts %q: want counts from 1 to %d, like 1,4", subCounts, bench.MaxSubscribers)
		}
		m.Subscribers = append(m.Subscribers, n)
	}
	return m, nil
}

func benchChart(out string, inputs []string, stdout io.Writer) error {
	if len(inputs) == 0 {
		return usageErr("chart: give .json reports or .hgrm files to draw")
	}
	var series []bench.ChartSeries
	for _, in := range inputs {
		s, err := bench.LoadChartSeries(in)
		if err != nil {
			return err
		}
		series = append(series, s...)
	}
	f, err := os.Create(out)
	if err != nil {
		return usageErr("-o: %v", err)
	}
	title := fmt.Sprintf("latency by percentile, %d series\n%s", len(series), strings.Join(inputs, ", "))
	if err := bench.WriteChart(f, title, series); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (%d series)\n", out, len(series))
	return nil
}

// startCPUProfile starts a CPU profile of this process into path and
// returns the function that stops it and closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, usageErr("--cpuprofile: %v", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile %s: %w", path, err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
