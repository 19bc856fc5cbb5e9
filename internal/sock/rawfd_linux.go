package sock

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"

	"github.com/mdbus/mdbus/internal/monotime"
)

// Off Go's network poller: see "Off the poller" in the package doc.

// rawFD is a syscall.RawConn over a descriptor outside Go's poller.
type rawFD struct {
	fd int
	// efd is an eventfd in semaphore mode: a waiting poll that wakes on
	// it takes one count. SetReadDeadline adds one (one waiter looks at
	// the new deadline); close adds closeCount, which no number of
	// waiters uses up, so no waiter can miss it.
	efd int
	// mu is held for reading by every operation on fd and for writing by
	// close, so that fd is not closed (and its number reused) under one.
	mu       sync.RWMutex
	closed   atomic.Bool
	deadline *atomic.Int64 // the Conn's read deadline (monotime.Time, 0: none)
}

// leavePoller moves c off Go's network poller (package doc, "Off the
// poller"). c.uc is closed; c.sys.rc is the rawFD from then on.
func (c *Conn) leavePoller() error {
	dup, err := dupFD(c.sys.rc)
	if err != nil {
		return err
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK|unix.EFD_SEMAPHORE)
	if err != nil {
		unix.Close(dup)
		return os.NewSyscallError("eventfd", err)
	}
	c.local = c.uc.LocalAddr().(*net.UDPAddr).AddrPort()
	c.uc.Close()
	r := &rawFD{fd: dup, efd: efd, deadline: &c.sys.deadline}
	c.sys.raw, c.sys.rc = r, r
	return nil
}

// Control calls f with the descriptor.
func (r *rawFD) Control(f func(fd uintptr)) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed.Load() {
		return net.ErrClosed
	}
	f(uintptr(r.fd))
	return nil
}

// Read calls f until it returns true, waiting for the socket to be
// readable in between, until the read deadline or Close.
func (r *rawFD) Read(f func(fd uintptr) bool) error {
	return r.wait(f, unix.POLLIN, true)
}

// Write calls f until it returns true, waiting for the socket to be
// writable in between, until Close.
func (r *rawFD) Write(f func(fd uintptr) bool) error {
	return r.wait(f, unix.POLLOUT, false)
}

func (r *rawFD) wait(f func(fd uintptr) bool, events int16, deadline bool) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	fds := [2]unix.PollFd{{Fd: int32(r.fd), Events: events}, {Fd: int32(r.efd), Events: unix.POLLIN}}
	for {
		if r.closed.Load() {
			return net.ErrClosed
		}
		if f(uintptr(r.fd)) {
			return nil
		}
		timeout := -1
		if d := monotime.Time(r.deadline.Load()); deadline && d != 0 {
			left := d.Sub(monotime.Now())
			if left <= 0 {
				return os.ErrDeadlineExceeded
			}
			timeout = int((left + time.Millisecond - 1) / time.Millisecond)
		}
		fds[0].Revents, fds[1].Revents = 0, 0
		if _, err := unix.Poll(fds[:], timeout); err != nil && err != unix.EINTR {
			return os.NewSyscallError("poll", err)
		}
		if fds[1].Revents != 0 {
			var b [8]byte
			unix.Read(r.efd, b[:]) // take one count; EAGAIN: another waiter did
		}
	}
}

// wake makes a waiting poll look again (the deadline moved).
func (r *rawFD) wake() { r.signal(1) }

// closeCount is what close adds to the eventfd: every waiter wakes.
const closeCount = 1 << 40

func (r *rawFD) signal(n uint64) {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], n)
	unix.Write(r.efd, b[:])
}

// close closes the descriptor once no operation is using it.
func (r *rawFD) close() error {
	if r.closed.Swap(true) {
		return net.ErrClosed
	}
	r.signal(closeCount)
	r.mu.Lock()
	defer r.mu.Unlock()
	unix.Close(r.efd)
	return os.NewSyscallError("close", unix.Close(r.fd))
}

// closeRaw is Close on a detached Conn.
func (c *Conn) closeRaw() error { return c.sys.raw.close() }

// detached reports whether c was moved off Go's network poller.
func (c *Conn) detached() bool { return c.sys.raw != nil }

// rawWriteTo is WriteTo on a detached Conn.
func (c *Conn) rawWriteTo(b []byte, to netip.AddrPort) error {
	sa := sockaddr(to, c.v6)
	var serr error
	err := c.sys.raw.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), b, unix.MSG_DONTWAIT, sa)
		return serr != unix.EAGAIN && serr != unix.EINTR
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return &net.OpError{Op: "sendto", Net: "udp", Addr: net.UDPAddrFromAddrPort(to), Err: err}
	}
	return nil
}

// sockaddr is to as a unix.Sockaddr of the socket's family.
func sockaddr(to netip.AddrPort, v6 bool) unix.Sockaddr {
	if !v6 {
		return &unix.SockaddrInet4{Port: int(to.Port()), Addr: to.Addr().Unmap().As4()}
	}
	sa := &unix.SockaddrInet6{Port: int(to.Port()), Addr: to.Addr().As16()}
	if z := to.Addr().Zone(); z != "" {
		if ifi, err := net.InterfaceByName(z); err == nil {
			sa.ZoneId = uint32(ifi.Index)
		}
	}
	return sa
}

// tempConn is a net.UDPConn on a duplicate of a detached Conn's
// descriptor, for the x/net calls that need one (joins). It is on Go's
// poller while it lives; closing it leaves the socket open.
func (c *Conn) tempConn() (*net.UDPConn, error) {
	dup, err := dupFD(c.sys.raw)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "udp")
	defer f.Close()
	pc, err := net.FilePacketConn(f) // a duplicate of its own
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}

// joinDetached joins on a temporary conn: memberships belong to the
// socket, not to the descriptor.
func (c *Conn) joinDetached(ifi *net.Interface, g, s *net.UDPAddr) error {
	uc, err := c.tempConn()
	if err != nil {
		return err
	}
	defer uc.Close()
	switch {
	case c.v6 && s != nil:
		return ipv6.NewPacketConn(uc).JoinSourceSpecificGroup(ifi, g, s)
	case c.v6:
		return ipv6.NewPacketConn(uc).JoinGroup(ifi, g)
	case s != nil:
		return ipv4.NewPacketConn(uc).JoinSourceSpecificGroup(ifi, g, s)
	}
	return ipv4.NewPacketConn(uc).JoinGroup(ifi, g)
}

// dupFD duplicates rc's descriptor (close-on-exec).
func dupFD(rc syscall.RawConn) (int, error) {
	dup, derr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) {
		dup, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, os.NewSyscallError("dup", derr)
	}
	return dup, nil
}
