// Package retransmit keeps recent MoldUDP64 messages and answers
// re-requests for them: a Cache of the latest messages of a few sessions,
// filled through the publisher's Sink hook (SentPacket) or one message at a
// time (Add, for the rewinder), and a Server that answers re-requests
// (NASDAQ "MoldUDP64 Protocol Specification" 1.00, the request packet)
// with ordinary downstream packets, to the requester or on a multicast
// repair group.
//
// The rule above all others: a small request never buys unbounded bytes.
// Every answer is capped in messages and bytes, paid for from two token
// buckets, and sent only to a plausible unicast source or the configured
// group.
//
// # Cache
//
// The cache is one FIFO of writes shared by all its sessions: a packet
// given to SentPacket is one write, all its messages stored and evicted
// together, and a message given to Add is a write of its own. It is
// bounded by CacheConfig.MaxMessages and CacheConfig.MaxBytes for the
// whole cache; when either bound is reached the oldest write, whichever
// its session, is evicted. Three structures hold it:
//
//	chunks  message blocks (a 2-byte length, then the message, as on the
//	        wire) in a ring of chunks allocated as needed (64 KiB,
//	        64 KiB, 128 KiB ... then 1 MiB each, up to MaxBytes); a write
//	        never straddles two chunks: the rest of a chunk is skipped
//	        instead (that slack counts as used until reclaimed)
//	        +-----------------+  +-----------------+  +-----------------+
//	        | ..free.. a41 a42|->| b7 a43 ... slack|->| a98 a99 ..free..|
//	        +-----------------+  +-----------------+  +-----------------+
//	                 ^ head (oldest)                           ^ tail
//	        (a41: message 41 of session a; b7: of session b)
//
//	log     blocks of 512 entries {first sequence, count, chunk, offset,
//	        size, session slot}, one per write, numbered g = 0, 1, 2 ...
//	        (the FIFO; its oldest entry is evicted first)
//
//	idx     per session range, blocks of 512 log numbers by sequence:
//	        idx[seq] = g, the entry holding seq, for seq in [first, next);
//	        noEntry in a hole
//
// Storing a packet is one parse (the packet is validated, so that reading
// its blocks back needs no checks), one copy, one log entry and one index
// slot per message; evicting it is one step, whatever its message count.
// Lookup by sequence is a few array reads (idx, then log) and a walk over
// the length fields of the messages before it in its packet (at most a
// packet's worth; reading consecutive messages walks each packet once),
// then a copy. Storage grows one piece at a time and nothing stored ever
// moves, so a write never waits for the cache to be copied: below
// MaxBytes a new chunk is linked in after the tail's when the next one
// still holds live messages; at MaxBytes the ring is fixed and the oldest
// writes are evicted. A packet of more messages than MaxMessages is stored
// one message per write, so that the bound holds. Freed log and index
// blocks are reused. Memory stays below MaxBytes plus 8 bytes per
// MaxMessages in the index and 32 bytes per write in the log (index slots
// of holes count too, and the oldest writes are evicted to keep them
// within twice MaxMessages plus 65,536) plus up to 32 KiB per session and
// 16 KiB; a write waits at most for one piece's allocation (at most about
// 1 MiB), and once the cache has reached its working size, SentPacket and
// Add allocate nothing.
//
// # Holes and incarnations
//
// Messages of a session come in sequence order. A sequence below the next
// one is a duplicate and is ignored. A sequence above it is a jump over
// messages lost before they reached the cache (a kernel drop under a
// rewinder, say): what was held before the jump stays held, since one lost
// packet must never discard history. A jump of up to 65,536 sequences
// leaves a hole in the session's range; a longer one starts a separate
// range, and a session keeps at most 4 ranges (the oldest goes). Bounds
// spans them all; NextHeld and the Server skip what is not held.
//
// A session name names a stream only for one run of its publisher: a
// publisher restarted under the same name starts a new incarnation at its
// first sequence again, and re-requests (which carry only the name) must
// never be answered with the previous run's bytes. The publisher's Sink
// sees its packets in order, so SentPacket takes a sequence that goes down
// (and is not the same packet offered again) as a new incarnation; a role
// that learns of one otherwise (a rewinder, from its subscriber) calls
// Restart. Either way the previous incarnation's messages are dropped at
// once and counted (CacheStats.Incarnations). The messages of dropped
// ranges and incarnations, like those of a session evicted to admit a new
// one (beyond MaxSessions, the least recently written goes), stay in the
// FIFO as dead entries until they reach its head.
//
// # Server
//
// A Server owns one goroutine that reads requests from its unicast socket
// in batches (recvmmsg), handles each and sends the answers in batches
// (sendmmsg). Each request goes through these steps, and the first that
// fails refuses it (counted in ServerStats.Refused by Reason, nothing sent):
//
//  1. the source must be a unicast address with a non-zero port (never
//     answer a multicast, broadcast or unspecified "source");
//  2. the source must be inside ServerConfig.Allow, when set;
//  3. the datagram must be a valid re-request (wire.ParseRequest: exactly
//     20 bytes, printable session, sequence > 0, count 1..0xFFFE, no
//     overflow); each wire error has its own counter;
//  4. a Source must know the session;
//  5. the count is capped to MaxPerRequest (counted as Capped);
//  6. coalescing (below);
//  7. packets are built for [seq, seq+count) ∩ held, each from the first
//     Source that holds its first sequence; ranges no Source holds are
//     skipped; nothing held at all refuses with ReasonOutOfRange, a
//     message too large for the payload size with ReasonTooLarge, another
//     Source failure with ReasonSourceError (a failure after the first
//     packet ends the answer there);
//  8. each packet is paid for, in bytes of UDP payload, by the global
//     bucket (RateBytes) and the requester's bucket (RequesterRateBytes,
//     keyed by source address without port, an IPv6 source by its /64,
//     in a bounded LRU table), and
//     by the request's budget (MaxRequestBytes). The answer stops at the
//     first packet that cannot be paid for: it is truncated (counted as
//     Partial) or, when not even its first packet can be paid for,
//     refused (ReasonRateLimited). Buckets never go negative, so the
//     bytes sent in any interval T are at most RateBytes×T plus the
//     bucket depth, RateBytes×Burst (at least one packet).
//
// # The repair group, confirms and coalescing
//
// With RepairGroup set, every answer goes to the group (UnicastFirst
// restores the old rule: a range's first answer unicast, the group only
// when a second requester asks), where it silences every subscriber that
// misses the same range. Now and then (at most every 10 ms, and whenever
// the count changes) an answer is preceded by a NAK confirm (wire.Confirm,
// PGM's NCF, 30 bytes) naming the messages answered and the number of
// distinct requesters (address and port) heard in the last 10 s, by which
// the subscribers size their NAK back-off (nak.GroupBackoff). A confirm
// before every answer told the others nothing the answer, microseconds
// behind it, does not, and doubled the packets every subscriber reads.
// The server remembers, for CoalesceWindow, each answered range (session,
// sequence, capped count), who asked and whether it went multicast.
// Within the window the same range is not answered again when it was
// already multicast or when the same requester asks again: such requests
// count as Coalesced, not as refused (their answer is on its way).
// Without RepairGroup a different requester gets its own unicast answer.
// The first answer is never delayed.
//
// # Held back, not refused
//
// A request the buckets cannot pay for now is held (at most MaxDeferred,
// and one requester address at most a quarter of them, so a flood from a
// few addresses cannot shut the others out) and confirmed at once as
// wire.ConfirmLater with the time until the buckets pay for what is held
// before it; it is answered as they refill, oldest first, skipping a
// requester whose own bucket is dry. A request for messages a source
// does not hold yet but expects next (a subscriber can see a gap before
// a rewinder beside it has cached the packets after it), or of a session
// no source has seen yet, is held up to a second (the NAK deadline) too.
// Only a full queue, or a range that is gone, refuses; except that a
// request for messages a source expects next that finds the queue (or its
// address's quarter) full is confirmed "later" without being held, and
// its requester asks again after its retry interval (ServerStats.ToldLater):
// a rewinder that falls behind the subscribers it serves gets these by
// the thousand, and several subscribers on one host share one quarter.
//
// The buckets follow the feed: every 100 ms the server measures the bytes
// its caches were given (the feed's rate) and raises the global rate to
// at least 4 times that and each requester's to at least 2 times that,
// never below RateBytes and RequesterRateBytes, so the repair bandwidth a
// subscriber needs to catch up grows with what it lost. The bounds per
// request do not move.
//
// # Anti-amplification
//
//   - an answer is at most min(MaxPerRequest messages, MaxRequestBytes,
//     the requester's bucket) for one 20-byte request; by default one
//     packet, as a MoldUDP64 server's, plus one 30-byte confirm (at most
//     about 76 bytes out per byte in), and a requester asks for a long gap
//     as several one-packet requests;
//   - one source address (IPv6: one /64) receives at most Rr×(T+Burst)
//     bytes of repairs in T, Rr the larger of RequesterRateBytes and twice
//     the feed's rate (unless its bucket is evicted from the table by more
//     than MaxRequesters other sources, which the global bucket bounds),
//     plus at most one 30-byte confirm per request sent from it: confirms
//     are paid from the global bucket only, so that a requester whose own
//     bucket is dry still learns to wait rather than ask again;
//   - the whole server sends at most R×(T+Burst) bytes in T, confirms
//     included, where R is RateBytes or 4 times the feed's rate, whichever
//     is larger;
//   - malformed, unknown, disallowed and spoofed-looking requests cost
//     one parse and a counter, and are never answered; datagrams longer
//     than 64 bytes are truncated by the kernel into a 64-byte buffer.
//
// # Concurrency
//
// A Cache is safe for concurrent use: writers serialize on its mutex, one
// lock per packet (SentPacket) or message (Add); readers share a read lock
// taken once per packet they build, so a writer waits at most for one
// packet's copy. A Server's methods are safe for concurrent use; its state
// (buckets, tables, send buffers) is guarded by a lock its goroutine takes
// once per batch of requests, and Stats reads atomic counters.
//
// # Who reads the requests
//
// The server's goroutine parks in the network poller until a request
// arrives; the OS must then schedule its thread. On a host whose cores
// are busy with the feed that is the slow part of a repair: with the
// publisher and a subscriber filling both cores of the benchmark host at
// 6M msgs/s, a NAK took 0.5 ms to be answered at the median and 3 ms at
// the 90th percentile, while the subscriber held every packet behind its
// gap. So, as Aeron's sender polls its control channel for NAKs between
// sends, a Cache that a publisher feeds reads, after each send of at
// least 8 packets since it last looked (Cache.AfterSend, on the
// publisher's sending goroutine, once the packets are in the kernel),
// whatever requests are queued on the request socket of each server it
// serves, without waiting (packetconn.TryReader), and answers them there
// (ServerStats.Polled).
// Only while requests come (one within the last 100 ms: a feed without
// loss pays nothing), at most 4 requests a time, and never while the
// server's goroutine is answering a batch; every bound below (buckets,
// caps, tables) holds whichever goroutine reads. Measured on the same
// host, a NAK's answer took 0.14 ms at the median and 1.3-1.9 ms at the
// 90th percentile, and the time from a gap's detection to its repair
// fell from 0.6-1.2 ms to 0.26-0.42 ms at the median (bench throughput
// --procs --with-loss --rate 6M). A failed read of the request socket is latched (Err,
// ServerStats.ReadErrors) and retried with a backoff; a socket closed
// under the server stops it (ServerStats.Stopped), and Close returns the
// latched error. Close stops the goroutine, closes the sockets and waits;
// a second Close returns ErrClosed.
//
// # Buffers
//
// AppendPacket and AppendPackets append into caller-owned buffers and do
// not allocate when those have payloadSize bytes of room; the bytes are a
// copy, valid after the call. The Server builds its packets straight into
// its preallocated send batch and allocates nothing per request or message.
//
// # Usage
//
//	cache := retransmit.NewCache(retransmit.CacheConfig{})
//	// publisher.Config{Sinks: []publisher.Sink{cache}, ...}
//	srv, err := retransmit.NewServer(retransmit.ServerConfig{
//		Listen:  netip.MustParseAddrPort("127.0.0.1:0"),
//		Sources: []retransmit.Source{cache},
//	})
//	if err != nil { ... }
//	defer srv.Close()
//	// subscribers send re-requests to srv.Addr()
package retransmit
