package pcap

// Reason says why a captured frame produced no Event. Every frame read is
// counted once: either as an Event or in Stats.Skipped under one Reason.
type Reason uint8

// Skip reasons. The values index Stats.Skipped; new reasons are added
// before NumReasons, so the names and numbers stay stable.
const (
	// ReasonLinkType: the frame's link type is not one the decoder knows
	// (see LinkType).
	ReasonLinkType Reason = iota
	// ReasonNotIP: the link layer carries something other than IPv4 or
	// IPv6 (ARP, LLDP, 802.3 LLC, ...).
	ReasonNotIP
	// ReasonNotUDP: the IP datagram carries something other than UDP
	// (TCP, ICMP, IGMP, ESP, an IPv6 "no next header", ...).
	ReasonNotUDP
	// ReasonTruncated: the capture cut the frame (caplen < len) before the
	// end of the UDP datagram.
	ReasonTruncated
	// ReasonMalformed: a link, IP or UDP header is inconsistent (wrong IP
	// version, a length that does not fit, too many VLAN tags or IPv6
	// extension headers), or the frame is shorter than its headers while
	// the capture did not cut it.
	ReasonMalformed
	// ReasonFragment: an IP fragment whose bytes went to reassembly. The
	// datagram it belongs to is counted on the frame that completes it.
	ReasonFragment
	// ReasonFragmentLost: an IP fragment that reassembly could not use:
	// reassembly is off, a limit was reached, or it overlaps another.
	ReasonFragmentLost
	// ReasonFiltered: the destination address or port did not match the
	// filter (Config.Ports, Config.Dsts).
	ReasonFiltered
	// ReasonRequest: the UDP payload is a MoldUDP64 re-request, not
	// downstream data.
	ReasonRequest
	// ReasonNotMoldUDP64: the UDP payload is not a valid MoldUDP64
	// downstream packet (wire.ParsePacket refused it).
	ReasonNotMoldUDP64
	// NumReasons is the number of reasons (the length of Stats.Skipped).
	NumReasons
)

var reasonNames = [NumReasons]string{
	ReasonLinkType:     "unknown-link-type",
	ReasonNotIP:        "not-ip",
	ReasonNotUDP:       "not-udp",
	ReasonTruncated:    "truncated",
	ReasonMalformed:    "malformed",
	ReasonFragment:     "fragment",
	ReasonFragmentLost: "fragment-lost",
	ReasonFiltered:     "filtered",
	ReasonRequest:      "moldudp64-request",
	ReasonNotMoldUDP64: "not-moldudp64",
}

// String returns the reason's stable name, as the summary prints it.
func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// Stats counts what a Reader saw.
type Stats struct {
	// Frames is the number of captured packets read from the file.
	Frames uint64
	// Events is the number of MoldUDP64 datagrams delivered.
	Events uint64
	// Skipped counts the frames that gave no Event, by reason (index with
	// a Reason). Frames == Events + the sum of Skipped.
	Skipped [NumReasons]uint64
	// Truncated counts frames the capture cut (caplen < len), whether or
	// not the UDP datagram survived whole.
	Truncated uint64
	// Reassembled counts IP datagrams rebuilt from fragments.
	Reassembled uint64
	// ReassemblyDropped counts partly received IP datagrams given up:
	// timed out, evicted at a limit, overlapping, or incomplete at the
	// end of the file.
	ReassemblyDropped uint64
}

// Skip returns the count of frames skipped for r.
func (s Stats) Skip(r Reason) uint64 {
	if r < NumReasons {
		return s.Skipped[r]
	}
	return 0
}

// SkippedTotal is the sum of Skipped.
func (s Stats) SkippedTotal() uint64 {
	var n uint64
	for _, v := range s.Skipped {
		n += v
	}
	return n
}

// Add adds o's counts to s (to sum over several files).
func (s *Stats) Add(o Stats) {
	s.Frames += o.Frames
	s.Events += o.Events
	for i := range s.Skipped {
		s.Skipped[i] += o.Skipped[i]
	}
	s.Truncated += o.Truncated
	s.Reassembled += o.Reassembled
	s.ReassemblyDropped += o.ReassemblyDropped
}
