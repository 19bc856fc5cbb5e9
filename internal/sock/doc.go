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
// # Concurrency
//
// ReadBatch must not be called concurrently with itself, nor WriteBatch with
// itself; one reader and one writer may run at once. Close is safe at any
// time and unblocks both.
//
// BUG(mdbus): batched I/O is implemented for Linux only; elsewhere Open
// returns an error.
package sock
