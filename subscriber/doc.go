// Package subscriber receives a MoldUDP64 multicast group (see package
// wire) and delivers each stream's messages to the application in
// sequence order, once per sequence, reporting what is missing.
//
// # Usage
//
//	s, err := subscriber.New(subscriber.Config{
//		Group:     netip.MustParseAddrPort("239.1.1.1:30001"),
//		Interface: "eth1",
//		OnMessage: func(m subscriber.Message) { handle(m.Stream, m.Seq, m.Data) }, // copy m.Data to keep it
//		OnGap:     func(g subscriber.Gap) { log.Printf("missing %d..%d", g.From, g.To-1) },
//	})
//	if err != nil { ... }
//	defer s.Close()
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
// Datagrams are read in batches (recvmmsg, Config.BatchSize at a time)
// into preallocated buffers. The receive buffer (SO_RCVBUF) is requested
// from Config.ReadBuffer; Linux doubles the request and caps it at twice
// net.core.rmem_max, so New reads back what was granted, logs a warning
// when it was capped and reports it in Stats. The kernel's exact count of
// datagrams it dropped for want of buffer space (SO_RXQ_OVFL) is
// Stats.KernelDrops.
//
// # Streams
//
// A stream is the packets of one session from one source address and
// port (StreamID), so several publishers on one group, and successive
// sessions of one publisher, are sequenced independently. A new session
// from a source that had another starts a new stream and is counted
// (Stats.SessionChanges); the old stream is marked superseded. At most
// Config.MaxStreams streams are tracked: to start another, the least
// recently active ended or superseded stream is forgotten; when there is
// none the packet is dropped (DropTooManyStreams). Live streams are never
// forgotten.
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
//     duplicate. When the buffer is full the packet is dropped
//     (DropReorderFull) and its own messages are reported missing too.
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
// job of the repair layer (package nak, with a retransmitter): repairs
// are ordinary packets, handled as above.
//
// Config.StartSeq 0 joins live: the first packet of a stream sets where
// delivery starts, and anything earlier is a duplicate. A positive
// StartSeq is the first sequence expected of every stream: later first
// packets leave a gap from it, earlier sequences are stale.
//
// # The bounded-gap rule
//
// No count or sequence read off the wire sizes anything. A packet,
// heartbeat or end of session more than Config.MaxGap messages ahead of
// the next expected sequence is dropped (DropSeqJump): a sequence that
// jumps by 2^40 is neither a gap of 2^40 messages nor a reason to wait for
// them. Held packets are bounded by Config.ReorderPackets per stream and
// copied into slot buffers that are reused, so memory is bounded by
// MaxStreams * ReorderPackets * the largest datagram (DatagramSize).
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
//
// # Concurrency
//
// A Subscriber's methods are safe for concurrent use. It owns one receive
// goroutine, started by New and stopped by Close, which waits for it.
// The stream state is guarded by one mutex, taken once per batch of
// datagrams; the callbacks (OnMessage, OnGap, OnEnd) run on the receive
// goroutine with that mutex held, one at a time, never concurrently.
// They must therefore not call the Subscriber's methods (Stats, Streams
// and Close would deadlock), and should return quickly: while a callback
// runs nothing is read, and datagrams that overflow the socket's receive
// buffer meanwhile are lost and counted in Stats.KernelDrops.
//
// # Buffer lifetime
//
// Message.Data is a sub-slice of a receive buffer (or of a reorder slot)
// that is reused as soon as the callback returns: copy what you keep.
// Nothing on the delivery path allocates per message or per packet; a
// packet that must be held allocates only until the reorder slots have
// grown to the largest packet held.
//
// BUG(mdbus): a stream that falls more than MaxGap messages behind its
// publisher (for instance after a long outage) drops every later packet as
// a sequence jump; the repair and late-join layer is to resynchronise it.
//
// BUG(mdbus): batched receive is Linux-only (see internal/sock).
package subscriber
