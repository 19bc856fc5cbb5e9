package bench

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// Paths packets take from the sender to the receivers (Config.Path).
const (
	// PathLo: every socket in this namespace, packets over lo. A GSO
	// train reaches a UDP_GRO socket whole, never cut into packets.
	PathLo = "lo"
	// PathVeth: the sender in one network namespace of the lab, the
	// receivers in another, joined by veth pairs through the lab's
	// bridge (Config.PathHosts), so that every packet crosses devices as
	// it would cross a NIC. See "Paths" in the package documentation.
	PathVeth = "veth"
)

// PathHost is a host of the veth path: a network namespace of its own,
// with a link to the other host. The lab's hosts (internal/netlab's
// NICPair) are PathHosts.
type PathHost interface {
	// Do runs f on a thread in the host's network namespace and returns
	// when f does; the thread is discarded afterwards.
	Do(f func()) error
	// LinkName is the host's interface to the other host, and LinkAddr
	// its IPv4 address there.
	LinkName() string
	LinkAddr() netip.Addr
	// Close removes the host.
	Close() error
}

// labPath is the two hosts of the veth path.
type labPath struct {
	snd, rcv *labHost
}

// labHost is a host of the path with one thread of its own that stays in
// the host's namespace until close: what runs there opens the host's
// sockets and starts processes in the host's namespace, and a child
// started there with Pdeathsig (killWithParent) lives until that thread
// ends, which a thread per call (PathHost.Do) would end at once.
type labHost struct {
	PathHost
	work chan func()
	done chan error
}

// newLabHost starts h's thread.
func newLabHost(h PathHost) (*labHost, error) {
	l := &labHost{PathHost: h, work: make(chan func()), done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() {
		l.done <- h.Do(func() {
			close(ready)
			for f := range l.work {
				f()
			}
		})
	}()
	select {
	case <-ready:
		return l, nil
	case err := <-l.done:
		return nil, err
	}
}

// do runs f on the host's thread and returns its error.
func (l *labHost) do(f func() error) error {
	errc := make(chan error, 1)
	l.work <- func() { errc <- f() }
	return <-errc
}

// close ends the host's thread (and so kills the children it started
// with Pdeathsig) and removes the host.
func (l *labHost) close() error {
	close(l.work)
	return errors.Join(<-l.done, l.PathHost.Close())
}

// openPath makes the hosts of path with make; nil for lo.
func openPath(path string, make func() (snd, rcv PathHost, err error)) (*labPath, error) {
	if path != PathVeth {
		return nil, nil
	}
	snd, rcv, err := make()
	if err != nil {
		return nil, fmt.Errorf("bench: veth path: %w", err)
	}
	p := &labPath{}
	if p.snd, err = newLabHost(snd); err == nil {
		p.rcv, err = newLabHost(rcv)
	}
	if err != nil {
		if p.snd != nil {
			p.snd.close()
		} else {
			snd.Close()
		}
		rcv.Close()
		return nil, fmt.Errorf("bench: veth path: %w", err)
	}
	return p, nil
}

func (p *labPath) close() error {
	if p == nil {
		return nil
	}
	return errors.Join(p.snd.close(), p.rcv.close())
}

// sendHost and recvHost are the hosts of the sending and receiving sides;
// nil on lo.
func (p *labPath) sendHost() *labHost {
	if p == nil {
		return nil
	}
	return p.snd
}

func (p *labPath) recvHost() *labHost {
	if p == nil {
		return nil
	}
	return p.rcv
}

// on runs f in h's namespace, on h's thread, or here when h is nil.
// Sockets f opens belong to h whichever goroutine uses them afterwards,
// and a process f starts runs in h's namespace.
func on(h *labHost, f func() error) error {
	if h == nil {
		return f()
	}
	return h.do(f)
}

// hostIfi is the multicast interface inside h (its link to the other
// host), or def on lo. Call it inside on(h, ...).
func hostIfi(h *labHost, def *net.Interface) (*net.Interface, error) {
	if h == nil {
		return def, nil
	}
	ifi, err := net.InterfaceByName(h.LinkName())
	if err != nil {
		return nil, fmt.Errorf("bench: path host: %w", err)
	}
	return ifi, nil
}

// hostSend completes p for a sender in h: the host's link, a TTL of 1 (the
// packets cross the lab's bridge, which leads nowhere else), and a
// retransmitter on the host's address, which the other host reaches.
func hostSend(h *labHost, p sendParams) (sendParams, error) {
	if h == nil {
		return p, nil
	}
	ifi, err := hostIfi(h, nil)
	if err != nil {
		return p, err
	}
	p.ifi, p.ttl, p.rtxAddr = ifi, max(p.ttl, 1), h.LinkAddr()
	return p, nil
}

// pathName is the suffix of a run's name on path ("" on lo).
func pathName(path string) string {
	if path == PathVeth {
		return " over veth"
	}
	return ""
}

// rtxListen is where a retransmit server of p listens.
func (p sendParams) rtxListen() netip.AddrPort {
	a := netip.AddrFrom4([4]byte{127, 0, 0, 1})
	if p.rtxAddr.IsValid() {
		a = p.rtxAddr
	}
	return netip.AddrPortFrom(a, 0)
}
