// Package bench measures mdbus: throughput and latency of the bus, and of
// plain UDP multicast sockets on the same path in the same run, so that
// every figure comes with its ratio mdbus / raw UDP. The "mdbus bench"
// command drives it; BENCHMARKS.md explains the numbers.
//
// # Runs
//
// A Bench runs cases one at a time and gathers them into one Report:
//
//   - Throughput: one publisher, N subscribers (goroutines of this process,
//     or separate processes re-executing this binary), a fixed message size
//     or a distribution (uniform, synthetic ITCH, or 1000 real NASDAQ ITCH
//     5.0 messages), at a fixed offered rate or as fast as the sender goes,
//     for a duration or a count. Per subscriber: messages/s, bytes/s,
//     packets/s, messages per packet, kernel drops (SO_RXQ_OVFL), gaps,
//     repairs and losses, plus the one-way latency of 1 message in 64.
//   - Latency at a fixed offered rate: one way (publisher to subscribers)
//     or round trip (the pinger publishes on group A, a ponger subscribed
//     to A republishes each message on group B, the pinger subscribes to
//     B). Percentiles p50, p90, p99, p99.9, p99.99 and max; with kernel
//     receive timestamps (SO_TIMESTAMPNS) the latency splits into wire time
//     (scheduled send to kernel receive) and receive path (kernel to
//     delivery).
//   - Closed-loop ping-pong (PingPong): one message in flight, the ponger
//     in its own process, as Aeron's ping-pong; with each side's CPU time
//     over wall time, and optionally both ends busy-polling.
//   - Capacity: the highest offered rate every subscriber receives whole
//     (zero kernel drops, zero lost), found by a free-running probe, an
//     exponential ramp and bisection to a resolution, bounded in probes
//     and time; over packet sizes, message sizes and subscriber counts.
//   - Raw: the same with one UDP datagram per message, sent with sendmmsg
//     and received with recvmmsg, no protocol at all. Raw receivers
//     never use UDP_GRO (one datagram per recvmmsg slot, the baseline);
//     mdbus subscribers do unless Config.NoGRO (--no-gro), which only
//     matters when the sender sends GSO trains.
//   - Raw-gso (RawGSO): the floor under mdbus, see below.
//   - With loss: the impairment layer (packetconn/impair) drops a fraction of
//     the datagrams each mdbus subscriber receives; the run then reports
//     repairs and the recovery time (gap found to gap repaired).
//
// Every run uses a fresh port, so no run hears another's stragglers, and
// every run is bounded: by its duration (at most MaxDuration), by its count,
// and by a drain timeout after the sender stops. A cancelled context stops
// the sender at once; what was measured is still reported, marked
// Interrupted.
//
// # The floor: raw-gso
//
// Raw UDP sends one datagram per message, so mdbus ÷ raw mostly measures
// batching. RawGSO measures what is left of the bus's cost once batching
// is given to both: it sends mdbus's packets with no protocol. The sender
// packs the same messages into packets of the same payload size, as many
// to a packet as mdbus packs, and keeps mdbus's byte count per packet: a
// 20-byte header (the first message's sequence and the message count, the
// rest zero) and a 2-byte length before each message. The same bytes
// rather than fewer, because the floor must move what mdbus moves: a
// packet 2 bytes shorter per message would carry less and let the floor
// rise with the framing it dropped. Its packets go through a socket
// opened as the publisher's (UDP GSO on unless Config.NoGSO), in sendmmsg
// batches of publisher.DefaultBatchPackets packets that the socket cuts
// into GSO trains of at most 64,000 bytes, as the publisher's are; a
// packet waits for its batch to fill at most Config.Linger (judged at each
// send), as the publisher's linger lets a partly filled packet wait.
//
// The receiver opens its socket as an mdbus subscriber opens its feed
// socket (SO_REUSEPORT, the same receive buffer, UDP_GRO unless NoGRO,
// subscriber.DefaultBatchSize datagrams per read) and reads from each
// packet only its sequence and count: messages and bytes are counted per
// packet, loss is a packet whose first sequence is beyond the next
// expected one, and its latency sample is the packet's first message.
// No message is looked at, no stream state kept, no callback made. So
//
//	mdbus ÷ raw-gso (message bytes/s at capacity)
//
// is what the protocol costs (parsing, sequencing, per-message delivery,
// heartbeats) over the kernel's own work for the same packets. The
// capacity table shows it beside mdbus ÷ raw, and the report's ratios
// list it as "bytes/s vs raw-gso". Raw-gso has no ponger: it runs
// throughput, capacity and one-way latency, not round trips.
//
// # Go processors
//
// Subscriber processes (ThroughputCase.Processes, one-way
// LatencyCase.Processes) and a ping-pong's ponger run as "mdbus sub" runs
// by default, on one Go processor each (Config.SubProcs, --sub-procs).
// While the subscribers of a throughput or one-way run are processes,
// this process is only the publisher's side and runs on the processors
// "mdbus pub" takes by default: one (Config.PubProcs, --pub-procs),
// restored after the run; a ping-pong's pinger, sender and receiver in
// this process, leaves them alone. Both flags take 0 for the Go
// runtime's default, which a GOMAXPROCS variable also asks for when the
// flags are not given; the report's settings line says which ran, and
// each process's result its GOMAXPROCS (SubResult.Procs). Runs with the
// subscribers in this process leave its processors alone.
//
// # Paths
//
// On lo (PathLo, the default) every socket is in one namespace, and a GSO
// train reaches a UDP_GRO socket whole: the kernel never cuts it into
// packets, which flatters the receiving side. PathVeth (--path veth) puts
// the sender in one network namespace of the lab and the receivers in
// another (Config.PathHosts: mdbus bench passes internal/netlab's
// NICPair, two hosts each linked by a veth pair to the lab's bridge),
// whose links are set as a NIC would be: UDP segmentation offload off on
// the sender's, so each train is cut into datagrams as it leaves, and GRO
// on at the receiver's, whose NAPI path coalesces them again for a
// UDP_GRO socket. A veth left as it is would
// pass the train whole through the bridge, as lo does. Multicast then
// leaves with TTL 1 (the bridge leads nowhere but the lab), and a
// retransmitter listens on the sending host's address. Round trips keep
// the pinger's receivers beside its sender and put the ponger on the
// receiving host. Subscribers in goroutines open their sockets in the
// receiving host's namespace (a socket stays in the namespace it was made
// in), and separate-process subscribers are started from the host's own
// thread, which stays in its namespace until Close: a child started with
// Pdeathsig dies with the thread that started it, not with the process.
// Run names end in " over veth" and the report's settings say the path.
//
// # Message format
//
// Every benchmark message starts with a 16-byte stamp; the rest is the
// payload of the chosen size (or the rest of the real ITCH message):
//
//	 0                   8                   16
//	+-------------------+-------------------+------------------
//	| scheduled send    | sequence (uint64, | payload ...
//	| time (int64 ns,   | big endian), from |
//	| CLOCK_MONOTONIC,  | 1; 2^64-1 ends a  |
//	| big endian)       | raw run           |
//	+-------------------+-------------------+------------------
//
// CLOCK_MONOTONIC is one clock for every process of a host, so a child
// process (or bench/peers/zmqbench.c) can subtract a stamp written by
// another. The layout constants are part of the bench format; do not change
// them.
//
// # Coordinated omission
//
// The stamp is the time the message was due under the fixed rate, not the
// time it left. A sender that falls behind (a stall of the machine, the
// runtime, the publisher) sends the overdue messages at once, and each
// carries its own due time, so the stall shows in the latency of every
// message it delayed: the scheduled-time method, equivalent to
// HdrHistogram's RecordCorrectedValue for a fixed-rate load. The sender
// sleeps until shortly before each due time (Config.Spin) and busy-waits
// the rest, yielding the CPU on each turn, because Go's timers wake up to a
// millisecond late on Linux.
//
// # Histograms and files
//
// Latencies are recorded in nanoseconds into HdrHistograms (1 ns to 60 s,
// 3 significant digits). A histogram is not safe for concurrent use, so
// each receiving goroutine owns a Recorder; every interval (Config.Interval)
// it hands its histogram to one collector goroutine, which merges it into
// the series total and writes it to the interval log. Values outside the
// range are counted (RangeErrors), never silently clamped. Bench.WriteFiles
// writes:
//
//	NAME.json              the Report (Schema "mdbus-bench/1")
//	NAME.hlog              every interval histogram, one tag per series and
//	                       receiver (HistogramLogWriter, V2 compressed)
//	NAME-SERIES.hgrm       each series' percentile distribution
//	                       (PercentilesPrint, 5 ticks per half, values in µs)
//	NAME.svg               the latency series as a percentile spectrum on a
//	                       log "1 in N" axis (WriteChart)
//
// # Concurrency
//
// A Bench is not safe for concurrent use. Its runs start goroutines (the
// publisher's and subscribers', raw receivers, pongers, the collector) and
// stop them before returning; Close stops the collector. Nothing on the
// per-message path allocates: the sender stamps pre-built messages from a
// ring, and receivers record into pre-sized histograms.
//
// # Usage
//
//	b, err := bench.New(bench.Config{Duration: 10 * time.Second})
//	if err != nil { ... }
//	defer b.Close()
//	size, _ := bench.ParseSizes("64", b.MaxMessage(bench.Mdbus))
//	for _, sys := range []bench.System{bench.Mdbus, bench.Raw} {
//		b.Throughput(ctx, bench.ThroughputCase{System: sys, Sizes: size})
//		b.Latency(ctx, bench.LatencyCase{System: sys, Mode: bench.RoundTrip, Sizes: size, Rate: 10_000})
//	}
//	b.Finish(ctx.Err() != nil)
//	b.WriteFiles("bench-results", "run1")
//	b.WriteTable(os.Stdout)
//
// Benchmarks must run inside the private network lab (internal/netlab):
// "mdbus bench" enters it by default, and New refuses an interface other
// than loopback or a TTL above 0 unless Config.AllowNetwork is set.
package bench
