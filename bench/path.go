package bench

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/mdbus/mdbus/internal/netlab"
)

// Paths packets take from the sender to the receivers (Config.Path).
const (
	// PathLo: every socket in this namespace, packets over lo. A GSO
	// train reaches a UDP_GRO socket whole, never cut into packets.
	PathLo = "lo"
	// PathVeth: the sender in one network namespace of the lab, the
	// receivers in another, joined by veth pairs through the lab's
	// bridge (netlab.NewHost), so that every packet crosses devices as
	// it would cross a NIC. See "Paths" in the package documentation.
	PathVeth = "veth"
)

// labPath is the two hosts of the veth path.
type labPath struct {
	snd, rcv *labHost
}

// labHost is a host of the lab with one thread of its own that stays in
// the host's namespace until close: what runs there opens the host's
// sockets and starts processes in the host's namespace, and a child
// started there with Pdeathsig (killWithParent) lives until that thread
// ends, which a thread per call (netlab.Host.Do) would end at once.
type labHost struct {
	*netlab.Host
	work chan func()
	done chan error
}

// newLabHost makes the host name and starts its thread.
func newLabHost(name string) (*labHost, error) {
	h, err := netlab.NewHost(name)
	if err != nil {
		return nil, err
	}
	l := &labHost{Host: h, work: make(chan func()), done: make(chan error, 1)}
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
		h.Close()
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
	return errors.Join(<-l.done, l.Host.Close())
}

// openPath makes the hosts of path; nil for lo.
func openPath(path string) (*labPath, error) {
	if path != PathVeth {
		return nil, nil
	}
	if !netlab.Inside() {
		return nil, fmt.Errorf("%w: the veth path needs the private network lab (run with --netns)", ErrConfig)
	}
	snd, err := newLabHost("bsnd")
	if err != nil {
		return nil, fmt.Errorf("bench: veth path: sending host: %w", err)
	}
	rcv, err := newLabHost("brcv")
	if err != nil {
		snd.close()
		return nil, fmt.Errorf("bench: veth path: receiving host: %w", err)
	}
	p := &labPath{snd: snd, rcv: rcv}
	// As on a NIC: a GSO train is cut into datagrams as it leaves the
	// sender's device, and the receiver's driver coalesces them again
	// for a UDP_GRO socket. A veth left as it is passes the train whole
	// through the bridge to the socket, as lo does.
	err = errors.Join(
		on(snd, func() error { return netlab.SetFeature(netlab.HostLink, netlab.FeatureUDPSegmentation, false) }),
		on(rcv, func() error { return netlab.SetFeature(netlab.HostLink, netlab.FeatureGRO, true) }),
	)
	if err != nil {
		p.close()
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

// hostIfi is the multicast interface inside h (its link to the bridge),
// or def on lo. Call it inside on(h, ...).
func hostIfi(h *labHost, def *net.Interface) (*net.Interface, error) {
	if h == nil {
		return def, nil
	}
	ifi, err := net.InterfaceByName(netlab.HostLink)
	if err != nil {
		return nil, fmt.Errorf("bench: host %s: %w", h.Name, err)
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
	p.ifi, p.ttl, p.rtxAddr = ifi, max(p.ttl, 1), h.IPv4
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
