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
// # UDP GSO
//
// With Config.GSO, WriteBatch sends runs of consecutive datagrams to one
// address whose lengths are equal (the last may be shorter) as one
// message each: a "train" with one iovec per datagram, pointing at the
// callers' buffers (nothing is copied), and a UDP_SEGMENT control message
// carrying the segment size, at most 64 datagrams (UDP_MAX_SEGMENTS) and
// 65,507 bytes (IPv4; 65,527 for IPv6) per train. Several trains and
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
// # Concurrency
//
// ReadBatch must not be called concurrently with itself, nor WriteBatch with
// itself; one reader and one writer may run at once. Close is safe at any
// time and unblocks both.
//
// BUG(mdbus): batched I/O is implemented for Linux only; elsewhere Open
// returns an error.
package sock
