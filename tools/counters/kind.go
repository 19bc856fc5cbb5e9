package counters

// Kind is the stable identity of what a slot counts, like Aeron's counter
// type ids: readers key on it, so a value keeps its meaning across
// versions. Part of the file format: never renumber, only add.
type Kind uint32

// Kinds. A slot's label refines its kind (the verdict of a request count,
// the field name of KindCustom); its owner names the role instance and,
// for per-stream counters, the stream.
const (
	// KindCustom is a value named by its label alone (a role attached
	// with AttachStruct).
	KindCustom Kind = 0

	// Publisher.
	PubPublished  Kind = 1 // messages accepted by Publish
	PubMessages   Kind = 2 // messages in packets the kernel accepted
	PubPackets    Kind = 3
	PubBytes      Kind = 4 // UDP payload bytes
	PubHeartbeats Kind = 5
	PubSendErrors Kind = 6
	PubNextSeq    Kind = 7 // gauge; label: the session
	PubQueueFull  Kind = 8

	// Subscriber, all streams.
	SubDatagrams   Kind = 20
	SubPackets     Kind = 21
	SubMessages    Kind = 22
	SubBytes       Kind = 23
	SubDupDropped  Kind = 24 // duplicates dropped; the app never sees them
	SubGaps        Kind = 25
	SubNAKs        Kind = 26
	SubRepairs     Kind = 27
	SubRecovered   Kind = 28
	SubLost        Kind = 29
	SubKernelDrops Kind = 30
	SubDropped     Kind = 31 // label: drop reason
	SubHeld        Kind = 32 // gauge: packets in reorder buffers
	SubStreams     Kind = 33 // gauge
	SubHeartbeats  Kind = 34
	SubFailovers   Kind = 35 // retransmitters left for the next (subscriber.Config.Recovery.Backups)
	SubLatencyP99  Kind = 36 // gauge, µs: one-way latency p99 of stamped messages over the role's last interval (AttachLatency)

	// Subscriber, per stream (owner "NAME/SESSION@SOURCE").
	StreamNextSeq     Kind = 40 // gauge
	StreamMessages    Kind = 41
	StreamBytes       Kind = 42
	StreamGaps        Kind = 43
	StreamNAKs        Kind = 44
	StreamRepairs     Kind = 45
	StreamPending     Kind = 46 // gauge: messages being recovered
	StreamLost        Kind = 47
	StreamDupDropped  Kind = 48
	StreamHeld        Kind = 49 // gauge: reorder buffer occupancy, packets
	StreamProgressAge Kind = 50 // gauge, ms: since next, horizon or end last moved
	StreamRecovered   Kind = 51
	StreamHorizon     Kind = 52 // gauge: one past the highest sequence seen (heartbeats included)
	StreamState       Kind = 53 // gauge: a StreamStateValue
	StreamRecoveryP99 Kind = 54 // gauge, µs: time from finding a gap to filling it, p99

	// Retransmitter (server) and its cache.
	RetrRequests  Kind = 60 // label: verdict (answered, capped, partial, refused-REASON)
	RetrPackets   Kind = 61 // label: unicast or multicast
	RetrBytes     Kind = 62 // label: unicast or multicast
	RetrMessages  Kind = 63
	RetrErrors    Kind = 64 // label: send, read, kernel-drop
	CacheMessages Kind = 70 // gauge: depth
	CacheBytes    Kind = 71 // gauge
	CacheSessions Kind = 72 // gauge
	CacheSpan     Kind = 73 // gauge: sequences from oldest cached to next (label: session)
	CacheEvicted  Kind = 74
)

type kindInfo struct {
	name, labelKey, help string
	typ                  Type
	scale                float64 // Prometheus value = slot value * scale (base units); 0 means 1
}

// kinds describes every kind but those in bothScopes.
var kinds = withScopes(map[Kind]kindInfo{
	PubPublished:  {"publisher_published_total", "", "messages accepted by Publish", Counter, 0},
	PubMessages:   {"publisher_messages_total", "", "messages in packets the kernel accepted", Counter, 0},
	PubPackets:    {"publisher_packets_total", "", "data packets sent", Counter, 0},
	PubBytes:      {"publisher_bytes_total", "", "UDP payload bytes of data packets sent", Counter, 0},
	PubHeartbeats: {"publisher_heartbeats_total", "", "heartbeats sent", Counter, 0},
	PubSendErrors: {"publisher_send_errors_total", "", "packets the kernel refused", Counter, 0},
	PubNextSeq:    {"publisher_next_sequence", "session", "next sequence number to assign", Gauge, 0},
	PubQueueFull:  {"publisher_queue_full_total", "", "waits for a free send buffer", Counter, 0},

	SubDatagrams:   {"subscriber_datagrams_total", "", "datagrams read from all sockets", Counter, 0},
	SubPackets:     {"subscriber_packets_total", "", "datagrams that decoded as MoldUDP64", Counter, 0},
	SubKernelDrops: {"subscriber_kernel_drops_total", "", "datagrams the kernel dropped (SO_RXQ_OVFL)", Counter, 0},
	SubDropped:     {"subscriber_dropped_total", "reason", "datagrams dropped, by reason", Counter, 0},
	SubHeld:        {"subscriber_reorder_held", "", "packets held in reorder buffers", Gauge, 0},
	SubStreams:     {"subscriber_streams", "", "streams known", Gauge, 0},
	SubHeartbeats:  {"subscriber_heartbeats_total", "", "heartbeats received", Counter, 0},
	SubFailovers:   {"subscriber_failovers_total", "", "retransmitters left for the next because they did not answer", Counter, 0},
	SubLatencyP99:  {"subscriber_latency_p99_seconds", "", "one-way latency of stamped messages over the role's last stats interval, 99th percentile (the slot holds µs)", Gauge, 1e-6},

	StreamNextSeq:     {"stream_next_sequence", "", "next sequence to deliver", Gauge, 0},
	StreamPending:     {"stream_pending_messages", "", "messages being recovered now", Gauge, 0},
	StreamHeld:        {"stream_reorder_held", "", "packets in the reorder buffer", Gauge, 0},
	StreamProgressAge: {"stream_progress_age_seconds", "", "time since the stream's sequence state last moved (sampled; the slot holds ms)", Gauge, 1e-3},
	StreamHorizon:     {"stream_horizon_sequence", "", "one past the highest sequence seen or reported missing", Gauge, 0},
	StreamState:       {"stream_state", "", "0 running, 1 ended, 2 stopped by a loss, 3 replaced by a newer incarnation", Gauge, 0},
	StreamRecoveryP99: {"stream_recovery_p99_seconds", "", "time from finding a gap to filling it, 99th percentile (the slot holds µs)", Gauge, 1e-6},

	RetrRequests:  {"retransmit_requests_total", "verdict", "re-requests by verdict", Counter, 0},
	RetrPackets:   {"retransmit_packets_total", "via", "repair packets sent", Counter, 0},
	RetrBytes:     {"retransmit_bytes_total", "via", "repair bytes sent", Counter, 0},
	RetrMessages:  {"retransmit_messages_total", "", "messages in repairs", Counter, 0},
	RetrErrors:    {"retransmit_errors_total", "error", "socket errors", Counter, 0},
	CacheMessages: {"cache_messages", "", "messages held in the cache (depth)", Gauge, 0},
	CacheBytes:    {"cache_bytes", "", "bytes held in the cache", Gauge, 0},
	CacheSessions: {"cache_sessions", "", "sessions in the cache", Gauge, 0},
	CacheSpan:     {"cache_span_sequences", "session", "sequences from the oldest cached to the next", Gauge, 0},
	CacheEvicted:  {"cache_evicted_total", "", "messages evicted to make room", Counter, 0},
}, bothScopes)

// scoped is a counter a subscriber keeps both for all its streams (sub,
// named "subscriber_"+name) and per stream (stream, "stream_"+name), with
// one meaning.
type scoped struct {
	sub, stream Kind
	name, help  string
}

var bothScopes = []scoped{
	{SubMessages, StreamMessages, "messages_total", "messages delivered"},
	{SubBytes, StreamBytes, "bytes_total", "message bytes delivered"},
	{SubDupDropped, StreamDupDropped, "dup_dropped_total", "duplicate messages dropped (received again; never delivered)"},
	{SubGaps, StreamGaps, "gaps_total", "gap ranges detected"},
	{SubNAKs, StreamNAKs, "naks_total", "re-requests sent"},
	{SubRepairs, StreamRepairs, "repairs_total", "repair packets that filled a gap"},
	{SubRecovered, StreamRecovered, "recovered_total", "messages recovered after a gap"},
	{SubLost, StreamLost, "lost_total", "messages declared lost"},
}

func withScopes(m map[Kind]kindInfo, both []scoped) map[Kind]kindInfo {
	for _, q := range both {
		m[q.sub] = kindInfo{"subscriber_" + q.name, "", q.help, Counter, 0}
		m[q.stream] = kindInfo{"stream_" + q.name, "", q.help, Counter, 0}
	}
	return m
}

// Name is the kind's metric name without the "mdbus_" prefix, e.g.
// "stream_gaps_total"; "" for KindCustom and unknown kinds.
func (k Kind) Name() string { return kinds[k].name }

// LabelKey is the name of the dimension a slot's label gives the kind
// ("verdict", "reason"), or "" when the label is only descriptive.
func (k Kind) LabelKey() string { return kinds[k].labelKey }

// Help is a one-line description of the kind.
func (k Kind) Help() string { return kinds[k].help }

// Type is the kind's type (Counter or Gauge); Free for KindCustom and
// unknown kinds, whose slots carry their own.
func (k Kind) Type() Type { return kinds[k].typ }

// StreamStateValue is the value of a StreamState slot. Part of the file
// format.
type StreamStateValue int64

// Stream states.
const (
	StreamRunning  StreamStateValue = 0
	StreamEnded    StreamStateValue = 1 // end of session reached and delivered
	StreamStopped  StreamStateValue = 2 // a loss stopped it (subscriber.LossStop)
	StreamReplaced StreamStateValue = 3 // a newer incarnation of its session took its place
)

func (v StreamStateValue) String() string {
	switch v {
	case StreamRunning:
		return "running"
	case StreamEnded:
		return "ended"
	case StreamStopped:
		return "stopped"
	case StreamReplaced:
		return "replaced"
	}
	return "unknown"
}
