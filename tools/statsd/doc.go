// Package statsd is StatsD-style metric collection over the bus: a relay
// that takes the StatsD line protocol (etsy and DogStatsD) on UDP or a
// Unix datagram socket and publishes it as sequenced, recoverable MoldUDP64
// messages, a Go client that publishes onto the bus directly, and a
// collector that aggregates per flush interval and writes Graphite, JSON
// lines or Prometheus text.
//
// # Line protocol
//
//	name:value[:value...]|type[|@rate][|#tag,k:v...][|c:container][|Tunixseconds]
//
// Types: c (counter), g (gauge), ms (timer), h (histogram), d
// (distribution), s (set). A gauge value with a sign ("+3", "-3") is a
// delta, without one ("3") sets the gauge (etsy semantics: a negative
// gauge is set by "0|g" then "-3|g"). Lines are separated by '\n' (a
// '\r' before it is dropped); empty lines are skipped.
//
// Etsy multi-metric lines and DogStatsD value packing are told apart by
// where the ':' stands. DogStatsD 1.1 packs values in the value field,
// before the first '|': "name:1:2:3|d" is three values of one
// distribution. Etsy's server splits a line on every ':' and reads each
// part as "value|type[|@rate]", so "a:1|c:5|ms" is a counter and a timer
// of the same name. The type field never holds a ':', so a ':' after the
// type (or inside the sample-rate or timestamp field, the only fields
// etsy's form has) ends the metric and the next one of the same name
// starts after it. A ':' inside the tag field (#k:v) or container field
// (c:id) belongs to that field, which runs to the next '|'. Sets may pack
// members the same way ("s:a:b|s" is two members).
//
// A refused line, or one refused part of an etsy multi-metric line, is
// counted by Reason; nothing refused stops the relay or the collector.
// Limits bounds line length, name length, tag count, tag bytes and packed
// values, so no line costs more than a fixed amount of memory.
//
// The Parser allocates nothing: a Metric is reused and its byte slices
// point into the parsed datagram.
//
// # Relay
//
//	r, err := statsd.NewRelay(statsd.RelayConfig{
//		Listen:     netip.MustParseAddrPort("127.0.0.1:8125"),
//		Retransmit: netip.MustParseAddrPort("127.0.0.1:31082"),
//		Bus:        publisher.Config{Group: netip.MustParseAddrPort("239.192.0.81:31081")},
//	})
//	...
//	defer r.Close()
//
// The relay reads its UDP socket with recvmmsg in batches (internal/sock)
// and counts the kernel's drops on it (SO_RXQ_OVFL, RelayStats.KernelDrops):
// StatsD's own UDP hop is the one place metrics can still vanish, so it is
// measured, never assumed. A Unix datagram socket (RelayConfig.Unix) is
// read one datagram per call. Valid lines are copied, unchanged, into bus
// messages; one publisher session per relay carries them, with a Linger
// (DefaultLinger) so that packets leave full under load. A
// retransmit.Cache and Server (RelayConfig.Retransmit) answer the
// collectors' re-requests, as "mdbus pub --retransmit" does. The relay
// also publishes its own counters (mdbus.statsd.relay.datagrams, .metrics,
// .kernel_drops, .bad_lines with a reason tag) every SelfInterval, so
// every collector sees what the relay refused or never received. Names
// starting with SelfPrefix are theirs alone: the relay and Client refuse
// them from clients (ReasonReservedName), who could otherwise forge or
// cancel them.
//
// Optional pre-aggregation (RelayConfig.PreAggregate) sums counters
// (sample rate applied) and reduces gauges to their net effect per name,
// tags and container id over a short window; other types pass through.
//
// Client publishes onto the bus directly, without the UDP hop, in the
// same message format.
//
// # Bus format
//
// Each MoldUDP64 message (one sequence number) is:
//
//	+---------+---------------------------+-------------------------------+
//	| version | relay time                | lines                         |
//	| 1 byte  | 8 bytes, big endian,      | StatsD lines, each ended by   |
//	| = 1     | Unix nanoseconds          | '\n'; none for a clock tick   |
//	+---------+---------------------------+-------------------------------+
//
// The version byte and the header layout are part of the wire format; do
// not change them. A message holds at most MaxMessageLen bytes (default
// 1400, a packet's worth), so one lost packet costs one re-request, and
// the publisher's Linger packs several messages into a packet. The lines
// are the client's own text, already validated by the relay: it is about
// as compact as a binary encoding for typical metrics (a name dominates),
// keeps every DogStatsD field without a second schema, and the collector
// decodes it with the same zero-allocation Parser, which also guards it
// against a hostile or buggy publisher on the group. ParseMessage decodes
// the header; both are fuzzed (FuzzParseMessage, FuzzParseLine).
//
// # Flush intervals
//
// Two collectors of one group must flush identical output, so interval
// boundaries cannot come from each collector's clock: one would put a
// metric received at 09:59:59.999 in one interval and the other, a
// millisecond slower, in the next. Instead the relay stamps every
// message with its clock when it publishes it, under one lock, taking
// max(now, previous stamp): along the sequence the stamps never go back.
// A collector places each message in the interval
// floor(stamp / FlushInterval), aligned to the Unix epoch (so a 10 s
// interval ends at :00, :10, ...), and closes an interval once the
// stream's clock has passed its end. At every multiple of TickInterval
// on the epoch, a relay that has published nothing since that instant
// publishes a clock tick (a message with no lines), so intervals close
// without metrics too: a flush interval that is a multiple of the tick
// (the defaults, 10 s and 500 ms) is written as soon as it ends, the tick
// crossing the bus; another one up to a tick later.
// Since every collector recovers the same sequence (NAK recovery from
// the relay's retransmit server), each sees the same messages with the
// same stamps in the same order, and aggregates them identically: the
// flush output (series sorted by name, type and tags) is byte for byte
// the same. With several relays on one group, an interval closes when
// every live stream (heard within StreamTimeout) has passed it; a
// message stamped in an interval already closed is counted in the oldest
// open one. Counters, sets and sample counts then still agree across
// collectors; gauge order and floating-point sums across relays may
// differ in arrival order. Client timestamps (|T) are carried and
// validated but do not move a metric between intervals.
//
// # Collector
//
// The collector aggregates per interval per series (name, type and the
// sorted, deduplicated tag set): counters (sum with sample rate applied,
// and per-second rate), gauges (last value set, deltas after it, kept
// across intervals), sets (distinct members, at most MaxSetMembers per
// interval, more counted as refused), and timers, histograms and
// distributions (sample count with rate applied, exact sum, mean, min and
// max, and percentiles from one HdrHistogram per series and interval,
// HistDigits significant digits; values are recorded in thousandths of the
// client's unit up to HistMax). Series beyond MaxSeries are refused,
// counted and logged once per interval; the relays' own series, a fixed
// set of at most a few dozen, are exempt, so that a flood of names does
// not silence the relay's account of it. Series idle for IdleExpiry are
// forgotten (etsy's deleteIdleStats is DeleteIdle). A metric that would
// take a sum, count, rate or gauge beyond ±MaxFloat64 is refused whole
// and counted: no flush holds an infinite or NaN value (sample rates
// below MinSampleRate are refused by the Parser).
//
// A flush also holds the collector's own series, computed from the stream
// alone so that they too agree across collectors:
// mdbus.statsd.collector.metrics, .bad_lines (by reason), .series,
// .series_refused, .set_members_refused, .percentiles_refused,
// .values_clamped, .bad_bus_messages, .non_finite_refused and
// .bus_lost_messages, the bus messages the subscriber declared lost
// (subscriber OnLoss): unrecoverable loss is always in the output. By
// default (SelfMetricsAuto) they are written in a flush that has other
// series or a non-zero count of theirs, so an idle stream's flushes are
// empty; SelfMetricsAlways writes them in every flush.
//
// Backends: GraphiteWriter (plaintext, etsy's non-legacy names, to stdout
// or a TCPWriter), JSONWriter (one object per series), and Prometheus (a
// text exposition endpoint with statsd_exporter-style names, rendered by
// hand; see its doc). Each writes numbers as plain decimals and escapes
// names and tags for its format, so whatever line the Parser accepts
// yields output that parses (FuzzFlushOutput).
//
// # Acceptance
//
// The tests run a real third-party client (npm hot-shots@10.2.1) and
// etsy's server (npm statsd@0.9.0) with node; TestMain installs them with
// npm into the user cache (or $MDBUS_STATSD_NPM) before entering the
// network lab, and the tests skip when node is missing unless CI=true.
package statsd
