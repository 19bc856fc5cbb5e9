package netlab

import (
	"errors"
	"fmt"
	"net/netip"
)

// LinkName is the host's interface to the lab's bridge (HostLink).
func (h *Host) LinkName() string { return HostLink }

// LinkAddr is the host's IPv4 address on its link.
func (h *Host) LinkAddr() netip.Addr { return h.IPv4 }

// NICPair makes two hosts of the lab, named snd and rcv, whose links treat
// UDP as a NIC and its driver do: segmentation offload off on snd's link,
// so a UDP GSO train is cut into datagrams as it leaves (in software
// here, in hardware on a NIC), and GRO on at rcv's, whose NAPI receive
// path coalesces them again for a UDP_GRO socket. A veth left as it is
// passes a train whole through the bridge to the socket, as lo does.
// Close both hosts.
func NICPair(snd, rcv string) (*Host, *Host, error) {
	s, err := NewHost(snd)
	if err != nil {
		return nil, nil, err
	}
	r, err := NewHost(rcv)
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	var serr, rerr error
	sdo := s.Do(func() { serr = SetFeature(HostLink, FeatureUDPSegmentation, false) })
	rdo := r.Do(func() { rerr = SetFeature(HostLink, FeatureGRO, true) })
	if err := errors.Join(sdo, serr, rdo, rerr); err != nil {
		s.Close()
		r.Close()
		return nil, nil, fmt.Errorf("netlab: hosts %s and %s: %w", snd, rcv, err)
	}
	return s, r, nil
}
