// Package sock opens the UDP sockets of the bus (multicast senders and
// receivers, unicast request sockets) and moves datagrams in batches with
// recvmmsg and sendmmsg.
//
// # Why not x/net's ReadBatch
//
// golang.org/x/net/ipv4 and ipv6 do the group joins and multicast options
// here, but their ReadBatch parses every source address into a fresh
// *net.UDPAddr (internal/socket unpack), two allocations per datagram. The
// bus promises zero allocations on its receive path, so this package keeps
// its own preallocated mmsghdr, iovec, sockaddr and control-message arrays and
// calls recvmmsg/sendmmsg through syscall.RawConn, which still parks on Go's
// network poller and honours deadlines. Source addresses come back as
// netip.AddrPort values.
//
// # Control messages
//
// Receiving sockets ask for IP_PKTINFO / IPV6_RECVPKTINFO (the datagram's
// destination address, so a subscriber can drop other groups' traffic that
// reaches a wildcard-bound socket, Go issue 73484), SO_RXQ_OVFL (the kernel's
// exact count of datagrams dropped for want of buffer space) and optionally
// SO_TIMESTAMPNS (kernel receive time).
//
// # UDP GRO
//
// With Config.GRO the socket sets UDP_GRO (Linux 5.0+): the kernel may queue
// a train of datagrams of one flow, all of one size but the last (which may
// be shorter), as one skb, and hand it over in one read with a UDP_GRO
// control message giving the segment size. A GSO sender's train (one sendmsg
// with UDP_SEGMENT) looped back to a socket on this host arrives this way
// whole, up to 64 datagrams and 64 KiB; from a NIC, the kernel's GRO
// coalesces a flow's datagrams that arrive in one NAPI poll. The kernel's
// per-datagram receive cost (queueing, wake-up, the recvmmsg slot) is then
// paid once per train instead of once per datagram (BenchmarkReadBatchGRO
// against the same trains to a plain socket, which the kernel segments;
// figures in BENCHMARKS.md, "Figures behind the package docs").
//
// ReadBatch hides the trains: it reads up to 8 trains per recvmmsg into the
// socket's own 64 KiB slots (8 x 64 KiB = 512 KiB per GRO socket, made at
// Open), splits each at the segment size and hands out every datagram as
// one Message, carrying the train's source, destination, interface and
// kernel time. So the layers above (the subscriber's core and its
// per-datagram counters, a Wrap such as packetconn/impair) see exactly
// what a plain socket gives. A train that does not fit into the caller's
// batch is kept: the next ReadBatch hands out the rest before it reads
// again (without a syscall), so nothing is lost or reordered (even after
// Close, which the next ReadBatch reports once those are handed out). A
// datagram longer than the caller's b.Buffer(i) is copied there, cut and
// marked Truncated, as the kernel's MSG_TRUNC does on a plain socket. It
// does not allocate.
//
// A datagram that fits is not copied: its Buf is the slot's bytes (capped
// at the datagram's end), which PacketConn.ReadBatch allows: they stay as
// they are until the next recvmmsg, and that comes only in a later
// ReadBatch, after every datagram of the trains read before has been
// handed out. The copy into the caller's buffers that this replaced cost a
// subscriber about 5 ns of its 93-112 ns per 64-byte message (CPU per
// message at 7M msgs/s, three interleaved runs; BENCHMARKS.md, "The copy
// out of the GRO slots"). A caller or wrapper that keeps a datagram past
// its next ReadBatch copies it (packetconn/impair copies what it delays
// when it reads it).
//
// Caveats. A plain datagram takes a whole slot too, so a GRO socket reads at
// most 8 unmerged datagrams per recvmmsg (a plain one up to len(b.Msgs));
// the syscall's fixed cost is small beside the per-datagram one
// (BenchmarkReadBatchPlainSender compares GRO and plain sockets reading 64
// plain datagrams), and a GSO sender's
// trains come up to 64 datagrams to a slot. SO_RXQ_OVFL counts skbs, so a
// train dropped for want of buffer space counts once however many datagrams
// it held: with GRO, Batch.Drops is a lower bound of the datagrams lost (a
// gap in the sequence still shows every one). Where setsockopt(UDP_GRO)
// fails (an old kernel), Conn.GRO reports false and the socket reads plain.
// Conn.GROStats counts the skbs read and the datagrams handed out: their
// ratio is the average train length, 1 where nothing coalesces.
//
// # UDP GSO
//
// With Config.GSO, WriteBatch sends runs of consecutive datagrams to one
// address whose lengths are equal (the last may be shorter) as one
// message each: a "train" with one iovec per datagram, pointing at the
// callers' buffers (nothing is copied), and a UDP_SEGMENT control message
// carrying the segment size, at most 64 datagrams (UDP_MAX_SEGMENTS) and
// 64,000 bytes per train (the protocol allows 65,507 over IPv4 and 65,527
// over IPv6, but trains past about 64,900 bytes took a kernel path three
// times slower per packet: see gsoTrainBytes). Several trains and
// single datagrams still go in one sendmmsg. The kernel cuts a train into
// datagrams as late as it can (in the NIC with hardware segmentation,
// else just before the driver; on lo and veth when it reaches a receiving
// socket that did not ask for UDP_GRO), so its per-datagram cost of
// socket, route and queueing is paid once per train. The datagrams on the
// wire are the ones a plain sendmmsg sends.
//
// WriteBatch keeps its contract: it counts datagrams, not trains; a train
// is sent or refused whole, so on an error b.Msgs[sent] is the first
// datagram of the refused train. Open probes the socket for UDP_SEGMENT
// (kernel 4.18 and later); when the kernel refuses a train for want of GSO
// (EIO from a device without checksum offload, EINVAL from a socket that
// cannot segment, EMSGSIZE when a segment exceeds the route's MTU,
// EOPNOTSUPP), the Conn turns GSO off for good and sends that train's
// datagrams and the rest one per slot. Conn.GSOStats says whether GSO is
// active, how many trains and datagrams went, and why it fell back.
//
// # Off the poller
//
// Go registers every socket with its epoll instance (edge-triggered), and a
// process's idle Go processor waits in epoll_wait. Each datagram that
// reaches a registered socket, and each "writable again" event after a
// datagram sent from one, wakes that thread, which finds no goroutine
// waiting on the socket (a busy poll is spinning on it; a sender is not
// waiting at all) and sleeps again: a thread wake-up on another core per
// datagram, paid inside the sender's and the receiver's system calls. In a
// busy-polling ping-pong on lo (BENCHMARKS.md, "Busy-poll ping-pong") it
// made the round trip p50 12 µs instead of 9.5 and p90 45 µs instead of
// 11.5, and halved the round trips a second. So Open keeps a socket with
// Config.BusyPoll or Config.SendOnly off the poller: it takes a duplicate
// of the descriptor and closes the net.UDPConn, which removes the socket
// from epoll (memberships and options belong to the socket and stay). The
// Conn then waits in poll(2) on the socket and on an eventfd that Close
// and SetReadDeadline write, on a thread of its own while it waits; a
// Join opens a short-lived net.UDPConn on another duplicate. Sockets read
// by goroutines that wait most of the time (a repair socket, a request
// socket) stay on the poller, where a waiting read costs no thread.
//
// # Concurrency
//
// ReadBatch must not be called concurrently with itself, nor WriteBatch with
// itself; one reader and one writer may run at once. Close is safe at any
// time and unblocks both.
//
// BUG(mdbus): batched I/O is implemented for Linux only. Elsewhere the
// package builds (so does everything above it), and Open returns an error
// matching ErrUnsupported and errors.ErrUnsupported that names the OS.
package sock
