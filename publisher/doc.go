// Package publisher publishes a MoldUDP64 session to a UDP multicast group:
// it numbers messages, packs them into packets no larger than the payload
// size, sends them with sendmmsg, sends heartbeats while idle and the end of
// session on Close, and offers every data packet to a cache or journal.
// The packet format is in package wire (NASDAQ "MoldUDP64 Protocol
// Specification" 1.00).
//
// # Usage
//
//	p, err := publisher.New(publisher.Config{
//		Group:     netip.MustParseAddrPort("239.1.1.1:30001"),
//		Interface: "lo",            // the default; TTL 0 keeps packets on this host
//		Session:   "FEED1",         // default: random
//		Sinks:     []publisher.Sink{cache, journal},
//	})
//	if err != nil { ... }
//	defer p.Close()                 // flushes, then ends the session
//	seq, err := p.Publish(msg)      // msg is copied; seq counts from 1
//	first, err := p.PublishBatch(msgs)
//	err = p.Flush(ctx)              // everything so far is with the kernel
//
// # Sequencing
//
// Each Publication is one session: the first message gets Config.FirstSeq
// (default 1) and every message the next number, across packets, with no
// gaps. A packet carries the sequence of its first message:
//
//	 packet k                          packet k+1
//	+--------+----+----+----+         +--------+----+----+
//	| hdr 41 | 41 | 42 | 43 |         | hdr 44 | 44 | 45 | ...
//	+--------+----+----+----+         +--------+----+----+
//
// A heartbeat (count 0) carries the next sequence to be sent, so a
// subscriber that missed the tail of a burst learns of the gap; the end of
// session (count 0xFFFF) does too. A restarted publisher is a new session;
// give it a new Session name (the default, a random one, does), since
// re-requests carry only the name: a retransmit cache drops what it held
// under a name whose sequence starts again, but a subscriber still
// repairing the previous run cannot tell the runs apart by name alone.
//
// # How messages travel
//
// Publish appends the message to the open packet in a ring of QueuePackets
// preallocated buffers (wire.Encoder) under a mutex; a packet that cannot
// take another message is sealed. Whoever holds the sending role (one
// goroutine at a time) hands pending packets to the kernel with one
// sendmmsg (up to BatchPackets), offers each to the Sinks and frees the
// buffers:
//
//	Publish ──append──▶ [ ring: in flight | sealed | open ] ──take──▶ sendmmsg ──▶ group
//	   │                                                        ▲          └──▶ Sinks
//	   ├── full packets, role free: the caller sends them ───────┤
//	   └── else wake (only if parked) ──▶ sending goroutine ─────┘
//
// Who sends is Config.Send (SendMode):
//
//   - the caller itself, when the sending role is free and it sealed whole
//     packets (SendAuto, the default) or appended anything (SendInline): it
//     takes the sending role and sends on its own goroutine, including the
//     open packet unless that may linger;
//   - otherwise the sending goroutine (always, with SendBackground), which
//     the caller wakes through a capacity-1 channel if it is parked, and
//     which takes every sealed packet and the open one (sealing it);
//   - nobody yet, when the only pending packet is a lingering one
//     (Config.Linger): the caller sets the sending goroutine's timer, and
//     the goroutine sends the packet when it fires, unless it filled first.
//
// A Publish that arrives while a send is in progress only appends: the
// holder of the role looks for more work before it lets go, and what piled
// up meanwhile (a burst) goes to the sending goroutine, not to the next
// caller. This is group commit, as in pebble's LogWriter flusher: there is
// no minimum fill. At a low rate each message leaves alone, at once; at a
// high rate messages pile up while a send is under way, so packets fill
// and go out many per system call. When every buffer is taken, Publish
// blocks (backpressure) rather than dropping or growing.
//
// # Send state
//
// Under the Publication's mutex, three small pieces of state say what
// happens next (state.go): the ring of packets (done ≤ taken ≤ sealed,
// and maybe one open packet being filled), the sending role, and the
// phase. The role moves so:
//
//	         take                    a Publish appends
//	free ───────────────▶ busy ─────────────────────────▶ busyBurst
//	  ▲                  │  ▲                                 │
//	  └──── finished ────┘  │ the sending goroutine           │ finished
//	                        │ takes the pile                  ▼
//	                        └─────────────────────────── handedOff
//
// A Publish decides in one place (dispatchLocked): role held → mark
// busyBurst; role free and the mode lets it → take it and send inline;
// else hand off (wake the goroutine, or set its timer for a lingering
// packet). While the role is handedOff no Publish sends inline, so a
// burst stays with the goroutine that packs it. A heartbeat or end of
// session holds the role too, and leaves a handedOff pile the goroutine's.
//
// The sending goroutine takes the first transition that applies, top to
// bottom: packets to send now → send them; draining → end of session,
// grace, exit; nothing sent for HeartbeatInterval → heartbeat; else park
// on its wake channel and its one timer (the next heartbeat or the
// lingering packet, whichever is first). The phase goes live → closing
// (Close called: new calls fail, calls under way finish, a rate wait is
// interrupted) → draining (nothing lingers; the goroutine ends the
// session and exits).
//
// When nothing has been sent for HeartbeatInterval (default 1 s), the
// sender sends a heartbeat. Close publishes what is pending, then the end
// of session, and repeats it for Config.Grace (by default 1 s when there
// are Sinks) before it returns: a subscriber that lost the last packets
// learns of it only from an end of session or heartbeat, and needs the
// retransmit server fed by the Sinks to be up while it asks, so close that
// server after the Publication.
//
// # Full packets leave with the call that filled them
//
// A packet is sealed (whole) when the message just added leaves less room
// than its own length: in a feed of similar sizes the next message would
// not fit either, so the packet does not wait for it (or for Linger) to
// find out. A 1,024-byte message thus fills a 1,472-byte packet by
// itself. A smaller message that would still have fitted goes in the next
// packet: less than one message's room is given up.
//
// By default a Publish or PublishBatch that seals whole packets while the
// sending role is free sends them itself, all of them (in rounds of
// BatchPackets) unless another publisher comes meanwhile. Waking the
// sending goroutine instead costs a goroutine (and often a thread) wake-up
// per batch and, worse on a machine with few cores, a third busy thread
// beside the publisher and its subscribers: at one message per packet
// (1024-byte messages, 1472-byte packets) on 2 vCPUs mdbus reached
// 0.64-1.16x the capacity of plain UDP with the sending goroutine and
// 1.10-1.46x sending inline, in five alternating runs each, and with UDP
// GSO 1.31-2.09x with the sending goroutine against 1.96-2.97x inline
// (BENCHMARKS.md, "Publisher sends inline"). The price: such a call takes
// the system call's time (about 10 µs per 1472-byte packet on lo without
// GSO, including the delivery to local subscribers) and Sinks run on the
// publishing goroutine. SendBackground leaves every send to the sending
// goroutine, for callers that must never wait for the kernel and have a
// core to spare.
//
// # Inline sends
//
// SendInline sends a partly filled packet on the caller's goroutine too: a
// lone message leaves at once without a goroutine wake-up. Measured
// on the lab's loopback, one 64-byte message every 50 µs, from Publish
// until a receiver on the host has it (BenchmarkLatency, 2 shared vCPUs,
// noisy):
//
//	bare sendmmsg      10-27 µs
//	SendInline         11-17 µs
//	sending goroutine  23-58 µs
//
// A burst is decided by what happened, not by the clock: messages that
// other goroutines publish while a send is in progress pile up, and what
// piled up goes to the sending goroutine, which packs it; the next call
// after a send that nobody interrupted sends inline again. So a closed
// loop (publish, wait for the answer, publish the next) sends every
// message inline, and so does a ping-pong with busy-polling subscribers,
// where any hand-off to another goroutine would wait for a CPU that the
// two spinning processes hold. (An earlier rule, inline only when the
// last send ended longer ago than a send takes, sent 62% of a ping-pong's
// messages inline: on lo a send includes the receiver's wake-up, about
// what a round trip leaves between sends. Any rule by time confuses a
// fast closed loop with a tight loop.) The price: a single goroutine
// publishing in a tight loop never publishes during its own send, so with
// SendInline it sends one packet per Publish, as a plain UDP socket
// would; PublishBatch packs, and so does SendAuto.
//
// # Linger
//
// The opposite trade. Sending what is pending as soon as the sender is free
// keeps latency low, but a publisher only a little ahead of its sender then
// sends many small packets, and each costs the kernel and every subscriber
// about as much as a full one. With Config.Linger, a partly filled packet
// stays open until it fills or its first message has waited Linger (from
// the end of the call that left it open: a packet sealed within the call
// that opened it never reads the clock); full
// packets, Flush and Close never wait. The sending goroutine's timer is
// set for the open packet by whoever leaves it open (the publisher, without
// waking the sending goroutine), and wakes the goroutine only if it fires.
// A Go timer alone fires up to a millisecond late in an idle program (Go's
// network poller waits in whole milliseconds), so a packet meant to linger
// 200 µs left after 1.05-1.1 ms; beside it, for times under 5 ms, the
// kernel's timer (internal/alarm's Nudge, a timerfd 50 µs after the Go
// timer's time) wakes the goroutine, and the packet leaves after 0.25-0.3
// ms (TestLingerOnTime). Arming it is one system call per lingering packet
// (1-2 µs), paid only with Linger. Fuller packets mean fewer of them for every subscriber to receive, which
// is what keeps a subscriber near its limit free of kernel drops (figures
// in BENCHMARKS.md, "Figures behind the package docs").
//
// # UDP GSO
//
// The kernel's cost of a datagram is mostly per send, not per byte: socket
// lookup, route, buffer, queueing. Where the kernel offers UDP generic
// segmentation offload (UDP_SEGMENT, Linux 4.18 and later), the sender
// hands each run of consecutive packets of one size (the last may be
// shorter) to the kernel as one "train" of up to 64 packets and 64,000
// bytes (below the protocol's 65,507; larger trains took a slower kernel
// path, see internal/sock), and the kernel cuts it into the same datagrams
// a plain send makes, as late as it can: in the NIC, just before the
// driver, or on lo and veth when the train reaches a receiving socket.
// Full packets are all PayloadSize long, so a busy publication sends
// nearly everything in trains; single packets and packets of varying
// length take plain slots of the same sendmmsg. Nothing changes on the
// wire, and nothing is copied: each packet of a train is one iovec into
// the ring.
//
// A receiving socket that did not ask for UDP_GRO gets the train cut into
// datagrams and pays the kernel's per-datagram cost itself, so GSO alone
// moves cost from the publisher to the subscribers' host: the sender's
// time per packet falls several-fold (BenchmarkWriteBatchGSO in
// internal/sock) while a plain receiver on the same host may fall behind.
// Subscribers receiving with UDP_GRO take the train whole. With GSO the
// subscriber, not the publisher, is the limit of a feed's capacity
// (figures in BENCHMARKS.md, "Figures behind the package docs").
//
// GSO falls back by itself: if the kernel lacks UDP_SEGMENT, or refuses a
// train for want of it (EIO from a device without checksum offload,
// EINVAL, EOPNOTSUPP, or EMSGSIZE when PayloadSize exceeds the
// interface's MTU, which GSO cannot fragment), the publication turns GSO
// off for good, sends that train's packets one per slot, and goes on;
// Stats.GSO, GSOTrains, GSOPackets and GSOFallbacks tell what happened.
// Config.DisableGSO turns it off from the start (mdbus pub --no-gso).
//
// # Rate limit
//
// RateMessages and RateBytes are token buckets on the monotonic clock
// (internal/ratelimit), holding 10 ms of rate (at least one message).
// Publish and PublishBatch share one rate path: each message waits until
// it fits (a rate-limited PublishBatch paces message by message), so
// packets leave paced, not in bursts; a message that opens a packet also
// pays its header, after the fact, as a debt the next message waits for.
// Close interrupts the wait.
//
// # Errors
//
// New checks the Config: a missing or non-multicast group (ErrBadGroup,
// naming the address), an interface that does not exist (ErrNoInterface,
// listing those that do), other fields (ErrConfig). A message that can
// never fit a packet fails with an error matching ErrMessageTooLarge (and
// wire.ErrMessageTooLarge) that states the limit. A send the kernel refuses
// is counted (Stats.SendErrors), the rest of the batch still goes, the
// packet is still offered to the Sinks (its sequences are spent; a cache
// lets subscribers repair the hole), and the error is latched: the next
// Publish, PublishBatch or Flush returns it, once, and publishes nothing.
// Close returns one not yet reported.
//
// # Concurrency
//
// A Publication is safe for concurrent use. Concurrent Publish calls are
// serialized; each returns its own sequence, and a PublishBatch's
// sequences are contiguous. Sinks are called by one goroutine at a time
// (the holder of the sending role).
// Close stops the sending goroutine and waits for it; a second Close waits
// for the first and returns ErrClosed, as other calls afterwards do.
//
// # Buffer lifetime
//
// Publish and PublishBatch copy the message bytes before they return: the
// caller may reuse msg at once. A Sink's pkt points into the ring and is
// valid only during SentPacket.
//
// # Allocation
//
// With a warm Publication (every ring buffer used once), Publish,
// PublishBatch and the sending path allocate nothing: the ring, the
// sendmmsg headers and the wake channel are made by New
// (TestZeroAllocs, BenchmarkPublish).
package publisher
