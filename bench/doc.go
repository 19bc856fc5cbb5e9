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
