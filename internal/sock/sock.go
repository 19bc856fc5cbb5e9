package sock

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/mdbus/mdbus/internal/cfgcheck"
	"github.com/mdbus/mdbus/packetconn"
)

// Message, Batch and PacketConn are the public socket-hook types; the
// aliases let the bus's own code name them from here.
type (
	Message    = packetconn.Message
	Batch      = packetconn.Batch
	PacketConn = packetconn.PacketConn
)

// NewBatch returns a batch of n messages with bufSize-byte buffers; see
// packetconn.NewBatch.
func NewBatch(n, bufSize int) *Batch { return packetconn.NewBatch(n, bufSize) }

// Config describes a socket to open.
//
// One rule for the values of every field: the zero value means the
// default (the kernel's). No field has a "none": a negative value is
// invalid, and Open returns an error wrapping ErrConfig that names it.
type Config struct {
	// Local is the address to bind. For a receiver of a group it is the
	// wildcard address with the group's port; for a sender, the source
	// address (optionally) and port 0.
	Local netip.AddrPort
	// Interface is the multicast interface (sending and joining). Nil
	// leaves the kernel's choice, which only unicast sockets should do.
	Interface *net.Interface
	// ReusePort sets SO_REUSEADDR and SO_REUSEPORT so several receivers
	// can bind one port.
	ReusePort bool
	// TTL is the multicast TTL (IPv4) or hop limit (IPv6). 0 keeps
	// packets on this host.
	TTL int
	// Loopback enables IP_MULTICAST_LOOP, so receivers on this host hear
	// what this socket sends.
	Loopback bool
	// ReadBuffer and WriteBuffer request SO_RCVBUF and SO_SNDBUF bytes;
	// 0 keeps the kernel default. The kernel caps a request at
	// net.core.rmem_max (wmem_max); when it does and the process holds
	// CAP_NET_ADMIN in the host's user namespace, Open asks again with
	// SO_RCVBUFFORCE (SO_SNDBUFFORCE), which is not capped, as a feed
	// handler run with that capability does. Without it the capped size
	// stays.
	ReadBuffer, WriteBuffer int
	// Timestamps asks for kernel receive timestamps (SO_TIMESTAMPNS).
	Timestamps bool
	// BusyPoll makes ReadBatch retry a non-blocking recvmmsg for up to
	// this long before it waits: a datagram that arrives meanwhile is
	// read by a goroutine already on a CPU instead of one the OS
	// scheduler must wake (the tail of the receive path on a busy
	// machine). It costs a CPU spinning while the feed is quiet for less
	// than BusyPoll. 0 (the default) never spins; at most MaxBusyPoll. A
	// busy-polling socket is kept off Go's network poller (see "Off the
	// poller" in the package documentation): a ReadBatch that waits holds
	// a thread.
	BusyPoll time.Duration
	// SendOnly keeps a socket that is only written to off Go's network
	// poller (see "Off the poller"): the kernel's "writable again" event
	// after each datagram then wakes no idle thread. Reads still work,
	// each waiting one holding a thread.
	SendOnly bool
	// GRO turns on UDP_GRO for receiving: the kernel may hand over a
	// train of equal-size datagrams of one flow in one read, and
	// ReadBatch splits it back into one Message per datagram. Where the
	// kernel refuses UDP_GRO, the socket reads plain (Conn.GRO reports
	// which). It costs 512 KiB of receive slots per socket. See "UDP GRO"
	// in the package documentation.
	GRO bool
	// GSO makes WriteBatch send runs of equal-length datagrams to one
	// address as UDP GSO trains (UDP_SEGMENT) where the kernel offers it,
	// and fall back to one datagram per sendmmsg slot for good when it
	// does not; see the package doc and Conn.GSOStats. Default off.
	GSO bool
}

// MaxBusyPoll bounds Config.BusyPoll: Close waits for a spinning
// ReadBatch to give up, so the spin must stay short.
const MaxBusyPoll = 10 * time.Millisecond

// Conn is a UDP socket with batched I/O.
type Conn struct {
	uc  *net.UDPConn // closed once the Conn left Go's poller (detached)
	v6  bool
	sys connSys
	// local is the bound address, kept when the Conn is detached.
	local netip.AddrPort
	// ReadBufferGranted and WriteBufferGranted are the buffer sizes the
	// kernel granted (it doubles the request and caps it at
	// net.core.rmem_max / wmem_max unless forced, see Config); read back
	// after Open.
	ReadBufferGranted, WriteBufferGranted int
}

// ErrClosed is returned by operations on a closed Conn.
var ErrClosed = net.ErrClosed

// ErrConfig marks a Config that Open refuses. Match with errors.Is.
var ErrConfig = errors.New("sock: invalid config")

// Open opens a UDP socket bound to cfg.Local.
func Open(cfg Config) (*Conn, error) {
	if err := cfgcheck.Negative(ErrConfig, cfgcheck.F("TTL", cfg.TTL), cfgcheck.F("ReadBuffer", cfg.ReadBuffer),
		cfgcheck.F("WriteBuffer", cfg.WriteBuffer)); err != nil {
		return nil, err
	}
	if cfg.TTL > 255 {
		return nil, fmt.Errorf("%w: TTL %d out of range [0, 255]", ErrConfig, cfg.TTL)
	}
	if cfg.BusyPoll < 0 || cfg.BusyPoll > MaxBusyPoll {
		return nil, fmt.Errorf("%w: BusyPoll %v: the busy poll must be within [0, %v]", ErrConfig, cfg.BusyPoll, MaxBusyPoll)
	}
	if !cfg.Local.IsValid() {
		return nil, fmt.Errorf("sock: open: invalid local address")
	}
	return open(cfg)
}

// Join joins group on ifi, from any source, or only from source when it is
// valid (source-specific multicast).
func (c *Conn) Join(ifi *net.Interface, group, source netip.Addr) error {
	if !group.IsMulticast() {
		return fmt.Errorf("sock: join %s: not a multicast address", group)
	}
	if err := c.join(ifi, group, source); err != nil {
		name := "default interface"
		if ifi != nil {
			name = ifi.Name
		}
		return fmt.Errorf("sock: join %s on %s: %w", group, name, err)
	}
	return nil
}

// LocalAddr is the address the socket is bound to.
func (c *Conn) LocalAddr() netip.AddrPort {
	if c.detached() {
		return c.local
	}
	return c.uc.LocalAddr().(*net.UDPAddr).AddrPort()
}

// IPv6 reports whether the socket is IPv6.
func (c *Conn) IPv6() bool { return c.v6 }

// SetReadDeadline sets the deadline for ReadBatch; a zero t means none.
// A busy-polling ReadBatch stops spinning at the deadline.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.setDeadline(t)
	if c.detached() {
		return nil
	}
	return c.uc.SetReadDeadline(t)
}

// WriteTo sends one datagram, for the rare non-batched send (re-requests).
func (c *Conn) WriteTo(b []byte, to netip.AddrPort) error {
	if c.detached() {
		return c.rawWriteTo(b, to)
	}
	_, err := c.uc.WriteToUDPAddrPort(b, to)
	return err
}

// Close closes the socket, unblocking a pending ReadBatch or WriteBatch.
func (c *Conn) Close() error {
	if c.detached() {
		return c.closeRaw()
	}
	return c.uc.Close()
}

// IsTimeout reports whether err is a deadline expiry.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Unmap returns a with an IPv4-mapped IPv6 address turned to IPv4.
func Unmap(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

var _ PacketConn = (*Conn)(nil)
