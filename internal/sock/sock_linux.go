//go:build linux

package sock

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/mdbus/mdbus/internal/monotime"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// oobSize fits PKTINFO, RXQ_OVFL and TIMESTAMPNS control messages.
const oobSize = 128

type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
	_   [4]byte
}

type batchSys struct {
	hdrs  []mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6
	oob   []byte
}

// sysOf returns the kernel structures kept in b.Impl, made on the batch's
// first use (and again if its message count changed).
func sysOf(b *Batch) *batchSys {
	if s, ok := b.Impl.(*batchSys); ok && len(s.hdrs) == len(b.Msgs) {
		return s
	}
	s := new(batchSys)
	s.init(len(b.Msgs))
	b.Impl = s
	return s
}

func (s *batchSys) init(n int) {
	s.hdrs = make([]mmsghdr, n)
	s.iovs = make([]unix.Iovec, n)
	s.names = make([]unix.RawSockaddrInet6, n)
	s.oob = make([]byte, n*oobSize)
}

type connSys struct {
	rc syscall.RawConn
	p4 *ipv4.PacketConn
	p6 *ipv6.PacketConn

	// State for the RawConn callbacks, made once so that calls do not
	// allocate a closure.
	readFn, writeFn func(fd uintptr) bool
	rHdrs           []mmsghdr
	gro             *groReader // nil: plain reads (see gro_linux.go)
	busyPoll        time.Duration
	// deadline is the read deadline as a monotime.Time (0: none), so a
	// busy poll stops spinning when it passes.
	deadline atomic.Int64
	rN       int
	rErr     syscall.Errno
	wHdrs    []mmsghdr
	wN       int
	wErr     syscall.Errno
	gso      gsoState

	// raw is set when the socket was moved off Go's network poller (a
	// busy-polling or send-only socket, see rawfd_linux.go); rc is then
	// raw.
	raw *rawFD

	// TryReadBatch's state, apart from ReadBatch's: the two may run at
	// once. tryMu makes concurrent TryReadBatch calls give way.
	tryMu sync.Mutex
	tryFn func(fd uintptr)
	tHdrs []mmsghdr
	tN    int
	tErr  syscall.Errno
}

func open(cfg Config) (*Conn, error) {
	network := "udp4"
	v6 := cfg.Local.Addr().Is6() && !cfg.Local.Addr().Is4In6()
	if v6 {
		network = "udp6"
	}
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			if cfg.ReusePort {
				if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); serr != nil {
					return
				}
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}}
	pc, err := lc.ListenPacket(context.Background(), network, cfg.Local.String())
	if err != nil {
		// net's error names the operation and the address already
		// ("listen udp4 127.0.0.1:5000: bind: address already in use").
		return nil, fmt.Errorf("sock: %w", err)
	}
	uc := pc.(*net.UDPConn)
	c := &Conn{uc: uc, v6: v6}
	if err := c.setup(cfg); err != nil {
		uc.Close()
		return nil, err
	}
	if cfg.BusyPoll > 0 || cfg.SendOnly {
		if err := c.leavePoller(); err != nil {
			uc.Close()
			return nil, fmt.Errorf("sock: leave the poller: %w", err)
		}
	}
	return c, nil
}

func (c *Conn) setup(cfg Config) error {
	rc, err := c.uc.SyscallConn()
	if err != nil {
		return err
	}
	c.sys.rc = rc
	c.sys.readFn = c.recvmmsg
	c.sys.tryFn = c.tryRecvmmsg
	c.sys.busyPoll = cfg.BusyPoll
	c.sys.writeFn = c.sendmmsg
	if c.v6 {
		c.sys.p6 = ipv6.NewPacketConn(c.uc)
	} else {
		c.sys.p4 = ipv4.NewPacketConn(c.uc)
	}
	var opts []sockopt
	if c.v6 {
		opts = append(opts,
			sockopt{unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1, "IPV6_RECVPKTINFO"},
			sockopt{unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_ALL, 0, "IPV6_MULTICAST_ALL"},
			sockopt{unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_HOPS, cfg.TTL, "IPV6_MULTICAST_HOPS"},
			sockopt{unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_LOOP, b2i(cfg.Loopback), "IPV6_MULTICAST_LOOP"},
		)
	} else {
		opts = append(opts,
			sockopt{unix.IPPROTO_IP, unix.IP_PKTINFO, 1, "IP_PKTINFO"},
			sockopt{unix.IPPROTO_IP, unix.IP_MULTICAST_ALL, 0, "IP_MULTICAST_ALL"},
			sockopt{unix.IPPROTO_IP, unix.IP_MULTICAST_TTL, cfg.TTL, "IP_MULTICAST_TTL"},
			sockopt{unix.IPPROTO_IP, unix.IP_MULTICAST_LOOP, b2i(cfg.Loopback), "IP_MULTICAST_LOOP"},
		)
	}
	opts = append(opts, sockopt{unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1, "SO_RXQ_OVFL"})
	if cfg.Timestamps {
		opts = append(opts, sockopt{unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1, "SO_TIMESTAMPNS"})
	}
	if cfg.ReadBuffer > 0 {
		opts = append(opts, sockopt{unix.SOL_SOCKET, unix.SO_RCVBUF, cfg.ReadBuffer, "SO_RCVBUF"})
	}
	if cfg.WriteBuffer > 0 {
		opts = append(opts, sockopt{unix.SOL_SOCKET, unix.SO_SNDBUF, cfg.WriteBuffer, "SO_SNDBUF"})
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		for _, o := range opts {
			if e := unix.SetsockoptInt(int(fd), o.level, o.name, o.val); e != nil {
				serr = fmt.Errorf("sock: set %s=%d: %w", o.desc, o.val, e)
				return
			}
		}
		c.sys.gso.init(int(fd), cfg.GSO, c.v6)
		c.ReadBufferGranted = forceBuffer(int(fd), unix.SO_RCVBUF, unix.SO_RCVBUFFORCE, cfg.ReadBuffer)
		c.WriteBufferGranted = forceBuffer(int(fd), unix.SO_SNDBUF, unix.SO_SNDBUFFORCE, cfg.WriteBuffer)
		if cfg.GRO && enableGRO(int(fd)) {
			c.sys.gro = newGROReader()
		}
	})
	if err != nil {
		return err
	}
	if serr != nil {
		return serr
	}
	if cfg.Interface != nil {
		if c.v6 {
			err = c.sys.p6.SetMulticastInterface(cfg.Interface)
		} else {
			err = c.sys.p4.SetMulticastInterface(cfg.Interface)
		}
		if err != nil {
			return fmt.Errorf("sock: set multicast interface %s: %w", cfg.Interface.Name, err)
		}
	}
	return nil
}

type sockopt struct {
	level, name, val int
	desc             string
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (c *Conn) join(ifi *net.Interface, group, source netip.Addr) error {
	g := &net.UDPAddr{IP: group.AsSlice()}
	if c.detached() {
		var s *net.UDPAddr
		if source.IsValid() {
			s = &net.UDPAddr{IP: source.AsSlice()}
		}
		return c.joinDetached(ifi, g, s)
	}
	if source.IsValid() {
		s := &net.UDPAddr{IP: source.AsSlice()}
		if c.v6 {
			return c.sys.p6.JoinSourceSpecificGroup(ifi, g, s)
		}
		return c.sys.p4.JoinSourceSpecificGroup(ifi, g, s)
	}
	if c.v6 {
		return c.sys.p6.JoinGroup(ifi, g)
	}
	return c.sys.p4.JoinGroup(ifi, g)
}

// ReadBatch receives up to len(b.Msgs) datagrams, blocking until at least
// one arrives, the read deadline passes or the Conn is closed. It returns
// how many of b.Msgs were filled. It does not allocate.
func (c *Conn) ReadBatch(b *Batch) (int, error) {
	if c.sys.gro != nil {
		return c.readGRO(b)
	}
	s := prepareRead(b)
	c.sys.rHdrs = s.hdrs
	if err := c.sys.rc.Read(c.sys.readFn); err != nil {
		return 0, &net.OpError{Op: "recvmmsg", Net: "udp", Err: err}
	}
	if c.sys.rErr != 0 {
		return 0, &net.OpError{Op: "recvmmsg", Net: "udp", Err: c.sys.rErr}
	}
	return finishRead(b, s, c.sys.rN), nil
}

// TryReadBatch is ReadBatch without the wait: one non-blocking recvmmsg
// of what is queued already, 0 when nothing is. It may run while another
// goroutine is blocked in ReadBatch on the same Conn (it does not take
// the read lock that goroutine holds while parked), which lets a busy
// goroutine pick up a socket's datagrams without waiting for the parked
// one to be scheduled; a concurrent TryReadBatch returns 0 at once. On a
// UDP_GRO Conn it returns errors.ErrUnsupported. It does not allocate.
func (c *Conn) TryReadBatch(b *Batch) (int, error) {
	if c.sys.gro != nil {
		return 0, fmt.Errorf("sock: TryReadBatch on a UDP_GRO socket: %w", errors.ErrUnsupported)
	}
	if !c.sys.tryMu.TryLock() {
		return 0, nil
	}
	defer c.sys.tryMu.Unlock()
	s := prepareRead(b)
	c.sys.tHdrs = s.hdrs
	if err := c.sys.rc.Control(c.sys.tryFn); err != nil {
		return 0, &net.OpError{Op: "recvmmsg", Net: "udp", Err: err}
	}
	switch c.sys.tErr {
	case 0:
		return finishRead(b, s, c.sys.tN), nil
	case unix.EAGAIN, unix.EINTR:
		return 0, nil
	}
	return 0, &net.OpError{Op: "recvmmsg", Net: "udp", Err: c.sys.tErr}
}

// tryRecvmmsg is TryReadBatch's RawConn.Control callback.
func (c *Conn) tryRecvmmsg(fd uintptr) {
	h := c.sys.tHdrs
	n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&h[0])), uintptr(len(h)), unix.MSG_DONTWAIT, 0, 0)
	c.sys.tN, c.sys.tErr = int(n), e
}

// prepareRead points b's message headers at its buffers for a recvmmsg.
func prepareRead(b *Batch) *batchSys {
	s := sysOf(b)
	for i := range b.Msgs {
		buf := b.Buffer(i)
		s.iovs[i] = unix.Iovec{Base: unsafe.SliceData(buf), Len: uint64(len(buf))}
		s.hdrs[i] = mmsghdr{hdr: unix.Msghdr{
			Name:       (*byte)(unsafe.Pointer(&s.names[i])),
			Namelen:    unix.SizeofSockaddrInet6,
			Iov:        &s.iovs[i],
			Iovlen:     1,
			Control:    &s.oob[i*oobSize],
			Controllen: oobSize,
		}}
	}
	return s
}

// finishRead fills b.Msgs[:n] from the headers a recvmmsg filled and
// returns n.
func finishRead(b *Batch, s *batchSys, n int) int {
	for i := range n {
		h := &s.hdrs[i]
		m := &b.Msgs[i]
		m.Buf = b.Buffer(i)[:h.n]
		m.Truncated = h.hdr.Flags&unix.MSG_TRUNC != 0
		m.Addr = parseName(&s.names[i])
		m.Dst, m.IfIndex, m.KernelTime = netip.Addr{}, 0, 0
		parseOOB(s.oob[i*oobSize:i*oobSize+int(h.hdr.Controllen)], m, b)
	}
	return n
}

// recvmmsg is the RawConn read callback: false means "nothing yet, park
// until readable". With a busy poll it retries until the poll time has
// passed since the first empty try.
func (c *Conn) recvmmsg(fd uintptr) bool {
	h := c.sys.rHdrs
	var until monotime.Time
	for {
		n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&h[0])), uintptr(len(h)), unix.MSG_DONTWAIT, 0, 0)
		if e != unix.EAGAIN && e != unix.EINTR {
			c.sys.rN, c.sys.rErr = int(n), e
			return true
		}
		if c.sys.busyPoll <= 0 {
			return false
		}
		now := monotime.Now()
		switch {
		case until == 0:
			until = now.Add(c.sys.busyPoll)
			if d := monotime.Time(c.sys.deadline.Load()); d != 0 && d < until {
				until = d // park at the deadline: the poller then reports the timeout
			}
		case now >= until:
			return false
		}
	}
}

// WriteBatch sends b.Msgs[:n], each to its Addr, with as few sendmmsg
// calls as the kernel allows, and returns how many were sent: on an error,
// b.Msgs[sent] is the datagram the kernel refused. With Config.GSO, runs
// of equal-length datagrams to one Addr go as GSO trains (see writeGSO).
// It does not allocate.
func (c *Conn) WriteBatch(b *Batch, n int) (int, error) {
	s := sysOf(b)
	if n > 1 && c.sys.gso.on.Load() {
		return c.writeGSO(b, s, n)
	}
	return c.writePlain(b, s, 0, n)
}

// writePlain sends b.Msgs[from:n] one datagram per mmsghdr and returns how
// many of them were sent.
func (c *Conn) writePlain(b *Batch, s *batchSys, from, n int) (int, error) {
	for i := from; i < n; i++ {
		m := &b.Msgs[i]
		s.iovs[i] = unix.Iovec{Base: unsafe.SliceData(m.Buf), Len: uint64(len(m.Buf))}
		nl := putName(&s.names[i], m.Addr, c.v6)
		s.hdrs[i] = mmsghdr{hdr: unix.Msghdr{
			Name:    (*byte)(unsafe.Pointer(&s.names[i])),
			Namelen: nl,
			Iov:     &s.iovs[i],
			Iovlen:  1,
		}}
	}
	sent := from
	for sent < n {
		c.sys.wHdrs = s.hdrs[sent:n]
		if err := c.sys.rc.Write(c.sys.writeFn); err != nil {
			return sent - from, &net.OpError{Op: "sendmmsg", Net: "udp", Err: err}
		}
		if c.sys.wErr != 0 {
			return sent - from, &net.OpError{Op: "sendmmsg", Net: "udp", Err: c.sys.wErr}
		}
		sent += c.sys.wN
	}
	return sent - from, nil
}

func (c *Conn) sendmmsg(fd uintptr) bool {
	h := c.sys.wHdrs
	n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&h[0])), uintptr(len(h)), unix.MSG_DONTWAIT, 0, 0)
	if e == unix.EAGAIN || e == unix.EINTR {
		return false
	}
	c.sys.wN, c.sys.wErr = int(n), e
	return true
}

func parseName(rsa *unix.RawSockaddrInet6) netip.AddrPort {
	switch rsa.Family {
	case unix.AF_INET:
		r4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(rsa))
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&r4.Port))[:])
		return netip.AddrPortFrom(netip.AddrFrom4(r4.Addr), port)
	case unix.AF_INET6:
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&rsa.Port))[:])
		a := netip.AddrFrom16(rsa.Addr)
		if rsa.Scope_id != 0 && a.IsLinkLocalUnicast() {
			a = a.WithZone(zoneCache(int(rsa.Scope_id)))
		}
		return netip.AddrPortFrom(a, port)
	}
	return netip.AddrPort{}
}

func putName(rsa *unix.RawSockaddrInet6, a netip.AddrPort, v6 bool) uint32 {
	*rsa = unix.RawSockaddrInet6{}
	addr := a.Addr()
	if !v6 {
		r4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(rsa))
		r4.Family = unix.AF_INET
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&r4.Port))[:], a.Port())
		r4.Addr = addr.Unmap().As4()
		return unix.SizeofSockaddrInet4
	}
	rsa.Family = unix.AF_INET6
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&rsa.Port))[:], a.Port())
	rsa.Addr = addr.As16()
	if z := addr.Zone(); z != "" {
		if ifi, err := net.InterfaceByName(z); err == nil {
			rsa.Scope_id = uint32(ifi.Index)
		}
	}
	return unix.SizeofSockaddrInet6
}

// zones names interfaces by index for link-local sources: the first
// datagram from an interface looks its name up (a netlink dump), later
// ones read it from the cache without allocating. Readers of different
// sockets share it, so it is guarded. Indexes are not reused while the
// interface exists; the cache is bounded, and once full an uncached index
// is looked up each time instead.
var zones struct {
	sync.RWMutex
	names map[int]string
}

// maxZones bounds the zone cache.
const maxZones = 4096

func zoneCache(idx int) string {
	zones.RLock()
	name, ok := zones.names[idx]
	zones.RUnlock()
	if ok {
		return name
	}
	name = strconv.Itoa(idx)
	if ifi, err := net.InterfaceByIndex(idx); err == nil {
		name = ifi.Name
	}
	zones.Lock()
	if zones.names == nil {
		zones.names = make(map[int]string)
	}
	if len(zones.names) < maxZones {
		zones.names[idx] = name
	}
	zones.Unlock()
	return name
}

func parseOOB(oob []byte, m *Message, b *Batch) {
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(oob) {
			return
		}
		data := oob[unix.SizeofCmsghdr:l]
		switch {
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_PKTINFO && len(data) >= 12:
			m.IfIndex = int(int32(binary.NativeEndian.Uint32(data)))
			m.Dst = netip.AddrFrom4([4]byte(data[8:12]))
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_PKTINFO && len(data) >= 20:
			m.Dst = netip.AddrFrom16([16]byte(data[:16]))
			m.IfIndex = int(binary.NativeEndian.Uint32(data[16:]))
		case h.Level == unix.SOL_SOCKET && h.Type == unix.SO_RXQ_OVFL && len(data) >= 4:
			b.Drops = binary.NativeEndian.Uint32(data)
		case h.Level == unix.SOL_SOCKET && h.Type == unix.SO_TIMESTAMPNS && len(data) >= 16:
			sec := int64(binary.NativeEndian.Uint64(data))
			nsec := int64(binary.NativeEndian.Uint64(data[8:]))
			m.KernelTime = sec*1e9 + nsec
		}
		next := (l + 7) &^ 7
		if next >= len(oob) {
			return
		}
		oob = oob[next:]
	}
}

// forceBuffer returns the size of the buffer option opt after a request of
// want bytes was made with it. When the kernel capped the request (it
// grants twice the request, up to net.core.rmem_max or wmem_max), it asks
// again with force (SO_RCVBUFFORCE, SO_SNDBUFFORCE), which only a process
// holding CAP_NET_ADMIN in the host's user namespace may use; EPERM leaves
// the capped size.
func forceBuffer(fd, opt, force, want int) int {
	got, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, opt)
	if want <= 0 || got >= 2*want {
		return got
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, force, want) == nil {
		got, _ = unix.GetsockoptInt(fd, unix.SOL_SOCKET, opt)
	}
	return got
}

// setDeadline records t for the busy poll.
func (c *Conn) setDeadline(t time.Time) {
	var d monotime.Time
	if !t.IsZero() {
		d = monotime.Now().Add(time.Until(t))
		if d == 0 {
			d = 1
		}
	}
	c.sys.deadline.Store(int64(d))
	if c.sys.raw != nil {
		c.sys.raw.wake() // a waiting read looks at the new deadline
	}
}
