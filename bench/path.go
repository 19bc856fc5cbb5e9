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
	snd, rcv *netlab.Host
}

// openPath makes the hosts of path; nil for lo.
func openPath(path string) (*labPath, error) {
	if path != PathVeth {
		return nil, nil
	}
	if !netlab.Inside() {
		return nil, fmt.Errorf("%w: the veth path needs the private network lab (run with --netns)", ErrConfig)
	}
	snd, err := netlab.NewHost("bsnd")
	if err != nil {
		return nil, fmt.Errorf("bench: veth path: sending host: %w", err)
	}
	rcv, err := netlab.NewHost("brcv")
	if err != nil {
		snd.Close()
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
	return errors.Join(p.snd.Close(), p.rcv.Close())
}

// sendHost and recvHost are the hosts of the sending and receiving sides;
// nil on lo.
func (p *labPath) sendHost() *netlab.Host {
	if p == nil {
		return nil
	}
	return p.snd
}

func (p *labPath) recvHost() *netlab.Host {
	if p == nil {
		return nil
	}
	return p.rcv
}

// on runs f in h's namespace, or here when h is nil. Sockets f opens
// belong to h whichever goroutine uses them afterwards, and a process f
// starts runs in h's namespace.
func on(h *netlab.Host, f func() error) error {
	if h == nil {
		return f()
	}
	var err error
	if derr := h.Do(func() { err = f() }); derr != nil {
		return derr
	}
	return err
}

// hostIfi is the multicast interface inside h (its link to the bridge),
// or def on lo. Call it inside on(h, ...).
func hostIfi(h *netlab.Host, def *net.Interface) (*net.Interface, error) {
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
func hostSend(h *netlab.Host, p sendParams) (sendParams, error) {
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
