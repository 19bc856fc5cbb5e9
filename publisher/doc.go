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
// preallocated buffers (wire.Encoder) under a mutex and, if the sending
// goroutine is idle, wakes it through a capacity-1 channel. The sender takes
// every sealed packet and the open one (sealing it), hands them to the
// kernel with one sendmmsg (up to BatchPackets), offers each to the Sinks,
// frees the buffers and looks again:
//
//	Publish ──append──▶ [ ring: in flight | sealed | open ] ──take all──▶ sender ──sendmmsg──▶ group
//	   │                                                      ▲    │
//	   └──── wake (only if idle) ─────────────────────────────┘    └──▶ Sinks (cache, journal)
//
// This is group commit, as in pebble's LogWriter flusher: there is no timer
// and no minimum fill. At a low rate each message leaves alone, at once; at
// a high rate messages pile up while a send is under way, so packets fill
// and go out many per system call. When every buffer is taken, Publish
// blocks (backpressure) rather than dropping or growing.
//
// When nothing has been sent for HeartbeatInterval (default 1 s), the
// sender sends a heartbeat. Close publishes what is pending, then the end
// of session, and repeats it for Config.Grace (by default 1 s when there
// are Sinks) before it returns: a subscriber that lost the last packets
// learns of it only from an end of session or heartbeat, and needs the
// retransmit server fed by the Sinks to be up while it asks, so close that
// server after the Publication.
//
// # Inline sends
//
// Waking the sending goroutine costs a goroutine (and often a thread)
// wake-up. With Config.Inline, a Publish that finds the sender idle and the
// publication quiet (the last send ended longer ago than a send takes)
// sends on its own goroutine instead. Measured on the lab's loopback, one
// 64-byte message every 50 µs, from Publish until a receiver on the host
// has it (BenchmarkLatency, 2 shared vCPUs, noisy):
//
//	bare sendmmsg      10-27 µs
//	Inline             11-17 µs
//	sending goroutine  23-58 µs
//
// The price: such a Publish takes a system call's time (about 10 µs here
// instead of about 130 ns) and Sinks run on the publishing goroutine. In a
// burst (a publisher back within one send's time) Publish does not send
// inline, so packing and throughput stay as without Inline.
//
// # Linger
//
// The opposite trade. Sending what is pending as soon as the sender is free
// keeps latency low, but a publisher only a little ahead of its sender then
// sends many small packets, and each costs the kernel and every subscriber
// about as much as a full one. With Config.Linger, the sending goroutine
// leaves a partly filled packet open until it fills or its first message
// has waited Linger; full packets, Flush and Close never wait. One timer
// per open packet, armed by the sending goroutine, and no wake-up per
// Publish. Measured in the lab at 4M 64-byte msgs/s offered in bursts of
// 256 (mdbus bench throughput): 18.4 messages per 1472-byte packet without
// Linger, 22.0 (full) with 500 µs; 36 and 134 per 8972-byte packet; the
// fewer packets took the subscriber from kernel drops to none.
//
// # UDP GSO
//
// The kernel's cost of a datagram is mostly per send, not per byte: socket
// lookup, route, buffer, queueing. Where the kernel offers UDP generic
// segmentation offload (UDP_SEGMENT, Linux 4.18 and later), the sender
// hands each run of consecutive packets of one size (the last may be
// shorter) to the kernel as one "train" of up to 64 packets and 65,507
// bytes (65,527 over IPv6), and the kernel cuts it into the same datagrams
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
// moves cost from the publisher to the subscribers' host: in the lab
// (BenchmarkWriteBatchGSO in internal/sock, 64 packets of 1472 bytes per
// call to a multicast group on lo) the sender's time per packet fell from
// 8.3 to 2.0 µs, while one plain receiver then read only 72-86% of what
// was sent. Subscribers receiving with UDP_GRO take the train whole. In
// the lab on a loaded 2-core VM (mdbus bench capacity, 1472-byte packets,
// one plain subscriber, 2026-12-01, three runs each way), 1024-byte
// messages went from 0.58-1.19x raw UDP's capacity without GSO to
// 1.53-2.21x with it (on lo, raw UDP measured in the same run), and from
// 0.76x to 1.99x on a veth; 64-byte messages from 0.95-1.85M to 2.32-3.68M
// msgs/s. With GSO the subscriber, not the publisher, became the limit.
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
// RateMessages and RateBytes are token buckets on the monotonic clock,
// holding 10 ms of rate (at least one message). Publish sleeps until the
// message fits (a rate-limited PublishBatch paces message by message), so
// packets leave paced, not in bursts. Close interrupts the sleep.
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
// sequences are contiguous. Sinks are called by one goroutine at a time.
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
