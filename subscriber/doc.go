// Package subscriber receives a MoldUDP64 multicast group (see package
// wire) and delivers each stream's messages to the application in
// sequence order, once per sequence. What is missing it asks a
// retransmitter for again (NAKs, timed by package nak); what cannot be
// recovered in time it reports as lost, with its exact range, and
// continues. It can also arbitrate two feeds carrying the same sessions
// (A/B), delivering whichever copy of each message comes first.
//
// # Usage
//
//	s, err := subscriber.New(subscriber.Config{
//		Group:     netip.MustParseAddrPort("239.1.1.1:30001"),
//		Interface: "eth1",
//		Recovery: subscriber.Recovery{
//			Retransmitter: netip.MustParseAddrPort("10.0.0.5:30100"), // retransmit.Server or rewinder
//			RepairGroup:   netip.MustParseAddrPort("239.1.1.2:30002"), // optional
//		},
//		OnMessage: func(m subscriber.Message) { handle(m.Stream, m.Seq, m.Data) }, // copy m.Data to keep it
//		OnLoss:    func(l subscriber.Loss) { log.Printf("lost %d..%d", l.From, l.To-1) },
//	})
//	if err != nil { ... }
//	defer s.Close()
//
// # Configuration
//
// Config holds the feed (Group, Interface, Source, Secondary, StartSeq),
// the callbacks and the socket hooks, and groups the rest by what it
// decides: Recovery (who repairs a stream and whose repairs are
// trusted), Receive (socket buffer, batches, the reorder buffer, busy
// polling, GRO) and Limits (what senders can make the subscriber track).
// Config's documentation states the one rule for zero and negative
// values; a field's own doc names only its default and whether a
// negative value means "none".
//
// # Sockets
//
// New binds a UDP socket to the wildcard address and the group's port with
// SO_REUSEADDR and SO_REUSEPORT, so several subscribers of one port (of the
// same group or of different groups) coexist on a host, and joins the
// group on the configured interface: from any source, or only from
// Config.Source (source-specific multicast, JoinSourceSpecificGroup). IPv4
// and IPv6 groups work alike.
//
// A socket bound to the wildcard address would, on Linux, also receive
// every other group joined by any socket on the host on that port (Go
// issue 73484). The socket sets IP_MULTICAST_ALL (IPV6_MULTICAST_ALL) to 0
// and the subscriber still checks each datagram's destination address
// (IP_PKTINFO): a datagram for another group, or unicast to the port, is
// dropped (DropWrongGroup). A datagram without destination information is
// accepted.
//
// Datagrams are read in batches (recvmmsg, Config.Receive.BatchSize at a time)
// into preallocated buffers. The receive buffer (SO_RCVBUF) is requested
// from Config.Receive.ReadBuffer; Linux doubles the request and caps it at twice
// net.core.rmem_max, so New reads back what was granted, logs a warning
// when it was capped and reports it in Stats. The kernel's exact count of
// datagrams it dropped for want of buffer space (SO_RXQ_OVFL) is
// Stats.KernelDrops.
//
// Every socket is read by its own goroutine, in batches, into buffers of
// its own (see Concurrency). Besides the feed group's socket a subscriber
// may have three more:
//
//	socket          bound to                     SO_REUSEPORT  carries                   Wrap hook
//	primary feed    wildcard, Group's port       yes           Group                     Wrap
//	secondary feed  wildcard, Secondary's port   yes           Secondary (A/B)           WrapSecondary
//	repair group    wildcard, RepairGroup's port yes           multicast repairs         WrapRepair
//	repair          wildcard, port 0 (own port)  no            NAKs out, unicast repairs WrapRepair
//
// The repair socket exists because of how Linux treats SO_REUSEPORT:
// several subscribers on one host share the feed's port, and the kernel
// spreads unicast datagrams to that port across the sockets of the
// reuseport group (multicast is copied to each). A repair answered to the
// feed socket's address (MoldUDP64 retransmitters answer to the request's
// source address and port) would reach a random sibling. So each
// subscriber with a Retransmitter opens its own unicast socket, of the
// retransmitter's address family, on a port of its own, without
// SO_REUSEPORT; re-requests leave from it and their answers come back to
// it and to nobody else. Packets read from the repair socket or the repair
// group are repairs: their source is the retransmitter, not the
// publisher, so they are matched to the current incarnation of their
// session (see Streams) and never start a stream (DropUnknownRepair).
//
// Who may repair: the repair socket accepts datagrams only from the
// Retransmitter's and the Backups' addresses and ports (with
// RetransmitPort: from that port at the repaired stream's own source
// address), the repair group
// only from Config.Recovery.RepairSource (any port); others are dropped
// (DropUntrustedRepair). Without a RepairSource every sender on the repair
// group is accepted, and counted (Stats.UnverifiedRepairs). A repair never
// moves a stream beyond MaxGap (see The bounded-gap rule).
//
// Each Wrap hook, when set, wraps only its own sockets, so tests can
// impair the feeds and the repair path independently.
//
// # Busy polling
//
// A reader that finds its socket empty parks its goroutine in Go's network
// poller; the next datagram must then be noticed by epoll, the goroutine
// made runnable and a thread scheduled onto a CPU, and on a busy host the
// last step is what makes the tail of receive latency (measured: the
// kernel's receive timestamp to OnMessage is where the one-way p99.9
// goes). Config.Receive.BusyPoll keeps the feed readers on their CPU instead: an
// empty read is retried (recvmmsg with MSG_DONTWAIT) until BusyPoll has
// passed without a datagram, and only then does the reader park. It is
// the userspace form of what feed handlers do with kernel-bypass stacks
// or SO_BUSY_POLL (which only helps on NAPI devices, not lo or veth).
// The cost is a CPU per feed socket while the feed is busier than one
// packet per BusyPoll, so it is off by default; it never delays Close by
// more than MaxBusyPoll. The repair sockets never spin. mdbus bench
// --busy-poll measures it (mdbus and the raw baseline alike).
//
// # UDP GRO
//
// The feed sockets (Group, Secondary) receive with UDP_GRO unless
// Config.Receive.DisableGRO is set: the kernel may hand over a run of a
// publisher's equal-size packets as one train in one read, as it does
// with a GSO publisher's send looped back on this host (up to 64 packets
// per train) or with a flow's packets coalesced by a NIC's GRO. The socket
// layer splits every train back into one datagram per packet before the
// subscriber sees it, so parsing, ordering, the per-feed datagram counters
// and Wrap hooks are unchanged; what changes is that the kernel's
// per-datagram receive cost (the part that bounds a subscriber on lo) is
// paid once per train. Each GRO socket keeps 512 KiB of receive slots.
// Where the kernel refuses UDP_GRO (before Linux 5.0) the socket reads
// plain. One difference shows in Stats: the kernel's drop counter
// (SO_RXQ_OVFL, Stats.KernelDrops) counts a dropped train once however
// many packets it held, so it is a lower bound; the gaps the drops leave
// are still detected and repaired packet by packet.
//
// The repair sockets (RepairGroup and the unicast repair socket) read
// plain: repairs come from a retransmitter one datagram at a time, a
// trickle beside the feed, so GRO would only cost them the memory and
// fewer unmerged datagrams per recvmmsg (8 slots instead of the batch).
// DisableGRO is the switch for comparing (mdbus sub and mdbus bench take
// --no-gro) and for a kernel whose GRO misbehaves.
//
// # Streams
//
// A stream is one incarnation of one session from one source address
// and port (StreamID), so several publishers on one group, and successive
// sessions of one publisher, are sequenced independently. A new session
// from a source that had another starts a new stream and is counted
// (Stats.SessionChanges); the old stream is marked superseded. (With A/B
// feeds a stream is a session alone; see A/B arbitration.)
//
// Incarnations: a publisher restarted under the same session name sends
// sequence 1 again. Repairs name only the session and the sequence, so a
// subscriber (or a rewinder) that took the new run for the old one would
// deliver one run's bytes as the other's. A new incarnation
// (the next StreamID.Incarnation, counted from 1; Stats.Incarnations) starts when:
//
//   - a new source port sends a session whose current stream has ended or
//     has been silent for a second (a live publisher heartbeats); while the
//     current one is live, the new source's stream delivers its own
//     packets but neither asks for repairs nor receives them, so a stray
//     or forged packet of a session cannot take a live stream's repairs
//     (its gaps wait, their NAK deadline a second behind, and are asked
//     for when it takes over);
//   - the stream's own source goes back, in a way reordering does not
//     explain (to sequence 1, in a heartbeat, or more than 65,536
//     messages back), and a second packet of that source continues the
//     first (Stats.SuspectRestarts counts the first). The first is
//     delivered in the new incarnation. Duplicates, even of the first
//     packet, never start one.
//   - a session whose stream was forgotten (evicted for room, or idle
//     past StreamIdleTimeout) sends again: its new stream is the next
//     incarnation, never the forgotten one's StreamID again, since the
//     application has seen that one's sequences. The core remembers the
//     numbers of the 16 x MaxStreams (at least 1,024) sessions forgotten
//     last; one forgotten longer ago starts over at incarnation 1.
//
// Only the current incarnation of a session asks for repairs and receives
// them. The one it replaced gives up what it was still missing (reported
// through OnLoss) and asks for nothing more. A rewinder keyed by session
// must drop its cached messages when the incarnation changes, and it
// learns of the change from its own copy of the feed, possibly later
// than this subscriber: so a new incarnation that takes its
// predecessor's place at once asks for nothing during its first 50 ms
// (restartGrace), and its gaps found meanwhile are asked for then. A
// rewinder still that far behind would answer with the previous run's
// bytes: MoldUDP64's re-request names only the session, so nothing on
// the wire can tell the two runs apart.
//
// The stream table is bounded: at most Config.Limits.MaxStreams streams, at
// most MaxStreamsPerSource of one source address. A stream silent for
// StreamIdleTimeout is forgotten (Stats.StreamsExpired). To start one
// more, the least recently active stream that is done (ended, stopped,
// superseded, replaced) is forgotten, else one that has delivered nothing
// (heartbeats only, as forged ones are), else one silent for a second (a
// crashed publisher) (Stats.StreamsEvicted); when there is none the
// packet is dropped (DropTooManyStreams). A live stream that delivers is
// never forgotten.
//
// Each stream keeps the next sequence to deliver and a horizon, one past
// the highest sequence seen or reported missing:
//
//	  delivered        next                                  horizon
//	-------------------+--[held]---gap---[held]--gap----------+-----------> seq
//	 (duplicates)       reorder buffer (at most                not yet seen
//	                    ReorderPackets packets)
//
// Every sequence in [next, horizon) is in a held packet or has been
// reported in a Gap. A packet is handled by where it falls:
//
//   - at or before next, reaching past it: its new messages are delivered
//     (the part already delivered is skipped and counted as duplicates),
//     then held packets that became in order are delivered;
//   - entirely before next: a duplicate (DropDuplicate; its messages add
//     to Stats.Duplicates);
//   - after next: copied into the stream's reorder buffer, kept sorted by
//     sequence, and whatever part of [horizon, its first sequence) is new
//     is reported to OnGap. A packet covered by one already held is a
//     duplicate. When the buffer is full, the stream gives up its oldest
//     gap as a Loss to make room (Stats.ReorderOverflows): the buffer is
//     the budget of waiting for a repair, and dropping newer packets
//     instead would cascade. A subscriber with a Retransmitter first
//     drops the newer packet (DropReorderFull; its messages are reported
//     missing and asked for) while the oldest gap is younger than two NAK
//     retry intervals, since its repair is likely under way. A new
//     incarnation waiting for its predecessor to go quiet (see Streams)
//     cannot ask yet, so it gives up no gap for room, nor, once current,
//     until it has caught up with the backlog it then asks for at once;
//     the NAK deadline bounds both.
//
// A heartbeat announcing a sequence beyond the horizon reveals lost
// packets at the tail: the difference is reported as a gap. An end of
// session records where the session ends (packets reaching past it are
// dropped, DropAfterEnd) and, once everything before it is delivered,
// ends the stream: OnEnd is called once with the sequence after the last
// message.
//
// Each sequence is reported in at most one Gap, and never after it was
// delivered; a gap is reported once and not repeated. Filling it is the
// job of the recovery layer below: repairs are ordinary packets, handled
// as above (they fill the reorder buffer like any packet ahead of next).
//
// Config.StartSeq 0 joins live: the first packet of a stream sets where
// delivery starts, and anything earlier is a duplicate. A positive
// StartSeq is the first sequence expected of every stream: later first
// packets leave a gap from it, earlier sequences are stale.
//
// # Recovery
//
// Every gap a stream reports goes to the stream's nak.LossDetector (made
// on its first gap), which decides when to ask and when to give up:
//
//	gap found --back-off--> NAK --Retry--> NAK --2*Retry--> NAK ... --Deadline--> lost: OnLoss, then skip (or stop)
//	    |      filled at any point (feed, other feed, repair): NAKs cancelled, recovery time recorded
//	    |      confirmed by the retransmitter (another subscriber asked): not asked, retried only if overdue
//	    +----- filled before the first NAK: it is never sent (suppression)
//
// The timing is nak's (see its package documentation for the reasoning
// behind the LAN defaults): retries after NAK.Retry = 10 ms doubling to
// NAK.MaxRetry = 100 ms, lost NAK.Deadline = 1 s after the gap was found,
// at most NAK.MaxPending = 65536 messages tracked per stream.
//
// The back-off before the first NAK is, by default (NAK.Delay and
// NAK.Generator unset, a Retransmitter configured), a nak.GroupBackoff
// shared by the streams: NORM's truncated exponential over a window sized
// by the group (the retransmitter's count of its requesters, in every
// wire.Confirm) and the measured repair round trip, scaled down to the
// share of the group that misses what this subscriber misses (estimated
// from the confirms it hears: independent losses are asked at once, a loss
// the group shares is asked by about one). Confirms heard on the repair
// group or the repair socket postpone or suppress this subscriber's own
// requests for the ranges they name (nak.LossDetector.OnConfirm). Setting
// NAK.Delay uses a uniform delay in [0, NAK.Delay) instead.
//
// Requests are sized to one answer packet: the stream's recent average
// message size gives the messages a retransmitter's packet holds
// (nak.LossDetector.SetMaxRequest), so a MoldUDP64 server, which answers
// a request with one packet, answers each whole, and a long gap is asked
// as a window of such requests in flight (NAK.Window, 256).
//
// With a non-zero NAK.Seed every stream's delays are drawn from a seed
// derived from it and the stream's creation index, so a test replays;
// leave it zero in production, or receivers that share a seed draw the
// same delays and defeat suppression.
//
// A timer goroutine sleeps until the earliest time any detector has work
// (a new gap due sooner moves its alarm), then, under the subscriber's
// mutex, polls every stream with gaps. The alarm (internal/alarm) is a Go
// timer backed, on Linux, by a timerfd read through Go's network poller:
// on a Go timer alone, a re-request due 100 µs after its gap left a
// millisecond or more later in an idle program, because Go's poller waits
// in whole milliseconds (gap found to repaired p50 1.16-1.28 ms at
// 50,000-1,000,000 messages a second, 0.28-0.32 ms with the timerfd). The re-requests
// due (wire.Request, one per range) are sent after the mutex is released,
// from preallocated buffers, on the repair socket to the retransmitter
// asked (Config.Recovery.Retransmitter, or a backup after a failover);
// the answers arrive on the repair socket (or, when the retransmitter
// multicasts them, on the repair group) and fill the stream. Whatever
// arrives for a tracked gap, by any socket, cancels its NAKs and records
// the gap's age in the stream's recovery histogram (HdrHistogram, µs,
// 1 µs to 60 s) and in the subscriber's total, which Stats summarises and
// RecoveryHistogram copies (for .hgrm output). RepairAddr tells where the
// repair socket is bound.
//
// On one Go processor (GOMAXPROCS=1: a feed handler pinned to one core,
// or a container limited to one CPU), while a gap waits (packets held
// behind it, or a NAK out), each feed reader also reads the repair sockets
// after its batch, without waiting (packetconn.TryReader), handing what it
// finds to the core as their own reader would, and sends the re-requests
// that fell due in the timer goroutine's stead. Go polls the network only
// when a processor has nothing else to run, or every 10 ms from its
// monitor thread, and runs a goroutine whose timer fired only when one is
// free: a feed reader kept busy by the feed held the one processor, so
// repairs and re-requests waited, and every packet behind the gap with
// them. Measured with `mdbus bench throughput --procs --recovery
// --with-loss --loss 0.01 --rate 7M`, the subscriber's process on one
// processor, three runs each: gap-to-repair p50 0.47-1.3 ms and p99 8-40
// ms, and in one run 990 messages lost, without; p50 0.19-0.24 ms and p99
// 4.8-8.1 ms, none lost, with. With more processors an idle one waits in
// the poller and wakes those goroutines at once, and the polls' system
// calls cost more than they saved (in the demo's small batches they pushed
// subscribers into a backlog), so there they are off after a batch. But a
// feed reader handed more than 32 datagrams in one batch (a busy feed,
// trains of a GSO publisher) holds the core's lock for all of them, about
// half a millisecond for 256 datagrams of 22 messages, and a woken repair
// reader or timer goroutine waits for the lock and then for a CPU: on any
// number of processors such a batch is handled 32 datagrams at a time,
// with the same repair reads and re-requests between the chunks while a
// gap waits. At a fixed 7M msgs/s with 1% loss (same command, two
// processors, three interleaved pairs) gap-to-repair p50 fell from
// 0.7-1.6 ms to 0.36-0.52 ms, p99 from 7.3-11.6 ms to 6.6-7.4 ms, at the
// same CPU per message. A WrapRepair hook
// that does not forward TryReadBatch turns the repair reads off: its
// socket is read by its own reader only.
//
// A library does not choose its program's processors. "mdbus sub" runs on
// one per feed reader unless --procs says otherwise (its package doc,
// "Go processors"): a program that embeds this package and shares its
// cores with a publisher or other busy processes should consider the
// same (runtime.GOMAXPROCS, or the GOMAXPROCS variable).
//
// Backups and failover: with Config.Recovery.Backups, the re-requests go to one
// retransmitter at a time, the Retransmitter first. When the one asked
// has sent nothing back for Config.Recovery.Failover (default five NAK.Retry, 50
// ms) while re-requests to it were outstanding, the next in [Retransmitter,
// Backups...] is asked, round robin, and the switch is logged and counted
// (Stats.Failovers; Stats.Asking names the one asked). "Sent back" is any
// trusted datagram from it on the repair socket, or any on the repair
// group. The detector's retries carry the gaps over: a range asked of a
// dead retransmitter is asked of the next at its next retry, so the
// deadline must leave room for Failover plus a retry interval (the
// defaults leave 900 ms). A pause in re-requests longer than the NAK
// deadline starts afresh: no gap outlives it. One retransmitter that is up
// but no longer holds a range is left as well, since a backup (a rewinder
// with a journal) may hold more; one that answers slower than Failover is
// left too, which costs a round of asking and nothing else. Every one
// listed is trusted for repairs, asked or not (see Who may repair).
//
// Each source's own retransmitter: on a bus with several publishers, each
// running its retransmitter on its own host (StatsD relays; "mdbus pub
// --retransmit HOSTADDR:PORT"), one Retransmitter cannot repair the
// others' streams. With Config.Recovery.RetransmitPort instead, a stream's
// re-requests go to its source's address at that port, and an answer on
// the repair socket is used only if it comes from that port at the
// address of the stream it repairs: one publisher's retransmitter cannot
// repair, or forge, another's stream (DropUntrustedRepair).
//
// Tail loss, the last packets before a pause, leaves no later packet to
// reveal it: the publisher's heartbeats carry the next sequence, so a
// heartbeat beyond the horizon reports the gap and it is recovered like
// any other.
//
// Suppression: when many receivers miss the same packet, the one whose
// random delay expires first asks; a retransmitter that answers on the
// repair group (retransmit.ServerConfig.RepairGroup) serves every
// receiver at once, and each one's pending NAK for the range is
// cancelled when the repair fills its gap before its own delay expires
// (Stats.Suppressed). This keeps one retransmitter alive behind hundreds
// of receivers.
//
// A range still missing at its deadline is given up. When next reaches it
// (everything before it delivered), OnLoss is called with exactly the
// sequences that will never be delivered, in order with the deliveries:
// after the message before it, before the message after it. Parts of a
// given-up range that still arrive before next reaches it are delivered
// and left out of the Loss. Then, with LossContinue (the default),
// delivery continues after the range; with LossStop the stream stops:
// nothing more of it is delivered, its held packets are discarded, its
// later packets are dropped (DropStopped) and OnEnd is not called.
//
// Without a Retransmitter nothing is asked for, but gaps still go to a
// detector, so a gap that nothing fills is declared lost NAK.Deadline
// after it was found and delivery continues (DefaultReorderWindow, 20 ms,
// when the deadline is not set and no repair group or second feed could
// fill it: then waiting longer only stalls delivery). This is how an A/B
// subscriber without a retransmitter reports true losses, and how a
// subscriber that cannot recover avoids stalling forever.
//
// # A/B arbitration
//
// With Config.Secondary the subscriber also joins a second group carrying
// the same sessions (exchanges publish a primary and a secondary feed
// from different sources over different paths). Both sockets feed the
// same streams, keyed by session alone (StreamID.Source is the zero
// AddrPort, and a new session never supersedes another). Whichever copy
// of a sequence arrives first is delivered; the other is a duplicate and
// dropped (Stats.FeedMessages says which feed won how often). A packet
// missing from one feed is filled by the other: it is reported as a gap
// when the leading feed skips it, and the NAK delay is the arbitration
// window: if the lagging feed brings it before the first NAK falls due,
// no NAK is sent (Stats.Suppressed). So a sequence is requested, and in
// the end declared lost, only when both feeds missed it. Set NAK.Delay
// (or NAK.Generator) to cover the usual skew between the feeds.
//
// # The bounded-gap rule
//
// No count or sequence read off the wire sizes anything. Two bounds apply,
// in this order:
//
//  1. A packet, heartbeat or end of session more than Config.Limits.MaxGap
//     messages (default 2^20) ahead of the next expected sequence is a
//     suspect, dropped (DropSeqJump, Stats.SuspectJumps): a sequence that
//     jumps by 2^40 is neither a gap of 2^40 messages nor a reason to wait
//     for them, and it reports nothing and requests nothing. A second
//     packet or heartbeat from the stream's own source (repairs never
//     count) that continues the first (at or after its end, within MaxGap
//     of it) shows the stream has fallen behind a live publisher: the
//     stream delivers what it held (the gaps between held packets are a
//     Loss), skips to the first suspect, reports the skip to OnResync
//     (Stats.Resyncs; not counted as lost messages, its size comes off
//     the wire), and delivers the suspect and what follows.
//  2. A gap within MaxGap whose new messages would take the messages
//     tracked missing for the stream above NAK.MaxPending (default 65536)
//     is declared lost at once and never requested (nak's rule); when next
//     reaches it, it is reported through OnLoss like any loss, minus
//     whatever arrived meanwhile. Larger outages are for a journal replay,
//     not for a retransmit cache.
//
// So the requests outstanding for a stream never total more than
// NAK.MaxPending messages, in requests of at most NAK.MaxRequest, and one
// poll sends at most that much however far a header claims to be ahead.
// A header forged with the publisher's own source address and port
// within MaxGap can make a stream skip up to MaxGap messages; lower MaxGap
// to bound that, and use source-specific joins (Source, SecondarySource)
// where the network allows. With A/B feeds any sender on either group
// reaches the stream, so there source-specific joins matter most.
//
// Held packets are bounded by Config.Receive.ReorderPackets and ReorderBytes per
// stream and
// copied into slot buffers that are reused, so the packets held take at
// most MaxStreams * ReorderBytes, and the idle slot buffers kept for reuse
// at most 64 MiB more per subscriber. Each
// stream's detector holds at most one 48-byte entry per missing range
// (at most NAK.MaxPending), and each stream that recovered something a
// 136 KiB histogram.
//
// # Drop reasons
//
// Every datagram that is not used is counted once, by reason, in
// Stats.Drops (index with a DropReason; String gives a stable name). None
// of them stops the subscriber or affects other streams.
//
//	DropTruncatedDatagram  larger than DatagramSize (MSG_TRUNC)
//	DropWrongGroup         destination is not the group (Go issue 73484, unicast)
//	DropWrongSource        SSM: not from Config.Source
//	DropShortHeader        under 20 bytes                       wire.ErrShortHeader
//	DropTruncated          a length runs past the datagram      wire.ErrTruncatedMessage
//	DropTrailingBytes      the count disagrees with the bytes   wire.ErrTrailingBytes
//	DropEndOfSessionData   count 0xFFFF with messages           wire.ErrEndOfSessionData
//	DropHeartbeatData      count 0 with bytes                   wire.ErrHeartbeatData
//	DropZeroSeq            sequence 0                           wire.ErrZeroSeq
//	DropSeqOverflow        sequence + count overflows           wire.ErrSeqOverflow
//	DropBadSession         session not printable ASCII          wire.ErrBadSession
//	DropMalformed          any other decoding error
//	DropTooManyStreams     would start a stream beyond MaxStreams
//	DropSeqJump            more than MaxGap ahead
//	DropReorderFull        ahead, and the reorder buffer is full
//	DropDuplicate          nothing new: delivered, held or before StartSeq
//	DropAfterEnd           reaches past the end of session
//	DropBadEndOfSession    end of session below what was delivered, or changed
//	DropUnknownRepair      a repair for a session no stream has
//	DropStopped            the stream was stopped by a loss (LossStop)
//	DropUntrustedRepair    a repair from a sender not trusted to repair it
//
// # Concurrency
//
// A Subscriber's methods are safe for concurrent use. It owns one receive
// goroutine per socket (one to four) and the NAK timer goroutine, all
// started by New and stopped by Close, which waits for them. A failed read
// is counted (Stats.ReadErrors), kept for Err (the first), passed to
// OnError and retried after a backoff (1 ms doubling to 100 ms); only a
// socket closed under the subscriber stops its reader
// (Stats.ReadersStopped). Close returns the first read error; a second
// Close returns ErrClosed. The stream
// state is guarded by one mutex, taken once per batch of datagrams and
// once per timer wake-up; the callbacks (OnMessage, OnGap, OnLoss, OnEnd)
// run on whichever of those goroutines holds the mutex (a loss reported
// by the timer releases the held packets after it, on the timer
// goroutine), one at a time, never concurrently. They must therefore not
// call the Subscriber's methods (Stats, Streams, RecoveryHistogram and
// Close would deadlock), and should return quickly: while a callback runs
// nothing is read, and datagrams that overflow a socket's receive buffer
// meanwhile are lost and counted in Stats.KernelDrops.
//
// # Buffer lifetime
//
// Message.Data is a sub-slice of a receive buffer (or of a reorder slot)
// that is reused as soon as the callback returns: copy what you keep.
// Nothing on the delivery path allocates per message or per packet; a
// packet that must be held allocates only until the reorder slots have
// grown to the largest packet held. Recovery allocates a stream's
// detector on its first gap and its histogram on its first recovery;
// after that, finding gaps, filling them, polling and sending re-requests
// allocate nothing but the growth of slices to the most ranges in flight.
//
// BUG(mdbus): with A/B feeds, OnGap and Stats.Gaps count what either feed
// skipped first, including what the other feed then delivered
// (Stats.Recovered); only a NAK or a Loss means both feeds missed it.
//
// BUG(mdbus): batched receive is Linux-only (see internal/sock).
package subscriber

// The code, by concern (a map for maintainers; not part of the package
// documentation):
//
//   - subscriber.go, reader.go, timer.go: the sockets and goroutines. A
//     reader turns each datagram into an arrival (its time, source, feed
//     and whether it is a repair), decides whether a repair is trusted
//     (reader.trusted, the only place), and hands the datagram to the
//     core; the timer goroutine polls the core with its own time.
//   - core.go: the core and dispatch: a datagram to its stream by kind
//     (handleDatagram, handlePacket, handleIn), and the counters.
//   - table.go: the stream table: lookup and admission, the current
//     incarnation of each session, restarts, eviction and forgetting.
//   - stream.go: one stream's ordering: delivering in order, holding
//     early packets, gaps, jumps beyond MaxGap, the end of session.
//   - recovery.go, failover.go: gaps to re-requests and losses, and which
//     retransmitter is asked.
//
// A datagram's context is passed down as an arrival value, never kept on
// the core between datagrams, so every function's inputs are in its
// signature.
