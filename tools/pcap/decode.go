package pcap

import (
	"encoding/binary"
	"net/netip"
)

// LinkType is a pcap LINKTYPE_ value (tcpdump.org/linktypes.html): the
// header in front of each captured frame.
type LinkType uint32

// The link types the decoder understands. Part of the pcap format; do not
// change.
const (
	LinkNull     LinkType = 0   // BSD loopback: 4-byte address family, host byte order
	LinkEthernet LinkType = 1   // Ethernet II, with 802.1Q / 802.1ad (QinQ) tags
	LinkRawAlt12 LinkType = 12  // raw IP (DLT_RAW on some BSDs)
	LinkRawAlt14 LinkType = 14  // raw IP (DLT_RAW on OpenBSD)
	LinkRaw      LinkType = 101 // raw IP: IPv4 or IPv6 by the version nibble
	LinkLoop     LinkType = 108 // OpenBSD loopback: 4-byte address family, big endian
	LinkSLL      LinkType = 113 // Linux cooked capture v1 (16-byte header)
	LinkIPv4     LinkType = 228 // raw IPv4
	LinkIPv6     LinkType = 229 // raw IPv6
	LinkSLL2     LinkType = 276 // Linux cooked capture v2 (20-byte header)
)

// Header sizes and protocol numbers. Part of the formats; do not change.
const (
	ethHeaderLen  = 14
	vlanTagLen    = 4
	sllHeaderLen  = 16
	sll2HeaderLen = 20
	nullHeaderLen = 4
	ipv4MinLen    = 20
	ipv6HeaderLen = 40
	udpHeaderLen  = 8

	etherTypeIPv4  = 0x0800
	etherTypeIPv6  = 0x86DD
	etherTypeVLAN  = 0x8100 // 802.1Q
	etherTypeQinQ  = 0x88A8 // 802.1ad service tag
	etherTypeQinQ1 = 0x9100 // pre-standard QinQ
	etherTypeQinQ2 = 0x9200

	protoHopByHop = 0
	protoUDP      = 17
	protoRouting  = 43
	protoFragment = 44
	protoAH       = 51
	protoNoNext   = 59
	protoDestOpts = 60

	// maxVLANTags bounds the tag stack walked (QinQ is 2; real frames
	// never carry more than a few).
	maxVLANTags = 8
	// maxExtHeaders bounds the IPv6 extension headers walked.
	maxExtHeaders = 16
)

// Datagram is one UDP datagram decoded from a frame. Payload refers to the
// frame (or to the reassembly buffer) and is valid until the next Decode.
type Datagram struct {
	Src, Dst netip.AddrPort
	Payload  []byte
}

// ipPacket is what the link layer hands to the IP layer.
type ipPacket struct {
	v6        bool
	src, dst  netip.Addr
	proto     uint8
	payload   []byte // the bytes after the IP header (and extension headers)
	fragment  bool
	fragOff   int // bytes
	fragMore  bool
	fragID    uint32
	truncated bool // the capture cut the frame
}

// Decoder turns captured frames into UDP datagrams, reassembling IP
// fragments. A Decoder is not safe for concurrent use. Decoding a frame
// that is not a fragment allocates nothing.
type Decoder struct {
	frag reassembler
}

// NewDecoder returns a Decoder with the reassembly limits of cfg. It
// cannot fail: check cfg with Reassembly.Check first.
func NewDecoder(cfg Reassembly) *Decoder {
	d := &Decoder{}
	d.frag.init(cfg.withDefaults())
	return d
}

// Decode decodes one frame of link type lt, captured at ts (ns) from a
// packet of origLen bytes on the wire (origLen > len(frame) means the
// capture cut it). ok is false when the frame gave no datagram; reason
// says why. A frame completing a fragmented datagram returns the whole
// datagram.
func (d *Decoder) Decode(lt LinkType, frame []byte, origLen int, ts int64) (dg Datagram, reason Reason, ok bool) {
	cut := origLen > len(frame)
	ip, r, ok := d.link(lt, frame)
	if !ok {
		return dg, truncOr(r, cut), false
	}
	ip.truncated = cut
	if ip, r, ok = parseIP(ip); !ok {
		return dg, truncOr(r, cut), false
	}
	if ip.fragment {
		if cut {
			return dg, ReasonTruncated, false
		}
		full, r, ok := d.frag.add(&ip, ts)
		if !ok {
			return dg, r, false
		}
		ip.payload = full // add set ip.proto from the first fragment
	}
	if ip.proto != protoUDP {
		return dg, ReasonNotUDP, false
	}
	return parseUDP(&ip)
}

// truncOr turns a malformed verdict into truncated when the capture cut
// the frame: the headers may simply be missing their end.
func truncOr(r Reason, cut bool) Reason {
	if r == ReasonMalformed && cut {
		return ReasonTruncated
	}
	return r
}

// link strips the link-layer header. It returns the IP bytes in
// ip.payload with ip.v6 set from the link layer's protocol field (checked
// against the version nibble by parseIP).
func (d *Decoder) link(lt LinkType, b []byte) (ipPacket, Reason, bool) {
	var ip ipPacket
	switch lt {
	case LinkEthernet:
		if len(b) < ethHeaderLen {
			return ip, ReasonMalformed, false
		}
		et := binary.BigEndian.Uint16(b[12:])
		b = b[ethHeaderLen:]
		for tags := 0; isVLAN(et); tags++ {
			if len(b) < vlanTagLen || tags == maxVLANTags {
				return ip, ReasonMalformed, false
			}
			et = binary.BigEndian.Uint16(b[2:])
			b = b[vlanTagLen:]
		}
		return etherIP(et, b)
	case LinkSLL:
		if len(b) < sllHeaderLen {
			return ip, ReasonMalformed, false
		}
		return etherIP(binary.BigEndian.Uint16(b[14:]), b[sllHeaderLen:])
	case LinkSLL2:
		if len(b) < sll2HeaderLen {
			return ip, ReasonMalformed, false
		}
		return etherIP(binary.BigEndian.Uint16(b[0:]), b[sll2HeaderLen:])
	case LinkRaw, LinkRawAlt12, LinkRawAlt14:
		if len(b) < 1 {
			return ip, ReasonMalformed, false
		}
		switch b[0] >> 4 {
		case 4:
			return ipPacket{payload: b}, 0, true
		case 6:
			return ipPacket{v6: true, payload: b}, 0, true
		}
		return ip, ReasonNotIP, false
	case LinkIPv4:
		return ipPacket{payload: b}, 0, true
	case LinkIPv6:
		return ipPacket{v6: true, payload: b}, 0, true
	case LinkNull, LinkLoop:
		if len(b) < nullHeaderLen {
			return ip, ReasonMalformed, false
		}
		fam := binary.BigEndian.Uint32(b)
		if lt == LinkNull && fam > 0xFFFF { // written in host order by a little-endian machine
			fam = binary.LittleEndian.Uint32(b)
		}
		b = b[nullHeaderLen:]
		switch fam {
		case 2: // AF_INET everywhere
			return ipPacket{payload: b}, 0, true
		case 10, 24, 28, 30: // AF_INET6: Linux, NetBSD/OpenBSD, FreeBSD, Darwin
			return ipPacket{v6: true, payload: b}, 0, true
		}
		return ip, ReasonNotIP, false
	}
	return ip, ReasonLinkType, false
}

func isVLAN(et uint16) bool {
	return et == etherTypeVLAN || et == etherTypeQinQ || et == etherTypeQinQ1 || et == etherTypeQinQ2
}

func etherIP(et uint16, b []byte) (ipPacket, Reason, bool) {
	switch et {
	case etherTypeIPv4:
		return ipPacket{payload: b}, 0, true
	case etherTypeIPv6:
		return ipPacket{v6: true, payload: b}, 0, true
	}
	return ipPacket{}, ReasonNotIP, false
}

// parseIP decodes the IPv4 or IPv6 header (and IPv6 extension headers) at
// ip.payload, trims link-layer padding and sets the fragment fields.
func parseIP(ip ipPacket) (ipPacket, Reason, bool) {
	b := ip.payload
	if len(b) < 1 {
		return ip, ReasonMalformed, false
	}
	if !ip.v6 {
		if b[0]>>4 != 4 || len(b) < ipv4MinLen {
			return ip, ReasonMalformed, false
		}
		hl := int(b[0]&0x0F) * 4
		total := int(binary.BigEndian.Uint16(b[2:]))
		if hl < ipv4MinLen || total < hl {
			return ip, ReasonMalformed, false
		}
		if total > len(b) {
			return ip, ReasonMalformed, false // truncOr makes it truncated when cut
		}
		ip.src = netip.AddrFrom4([4]byte(b[12:16]))
		ip.dst = netip.AddrFrom4([4]byte(b[16:20]))
		ip.proto = b[9]
		flags := binary.BigEndian.Uint16(b[6:])
		ip.fragMore = flags&0x2000 != 0
		ip.fragOff = int(flags&0x1FFF) * 8
		ip.fragment = ip.fragMore || ip.fragOff != 0
		ip.fragID = uint32(binary.BigEndian.Uint16(b[4:]))
		ip.payload = b[hl:total]
		return ip, 0, true
	}
	if b[0]>>4 != 6 || len(b) < ipv6HeaderLen {
		return ip, ReasonMalformed, false
	}
	plen := int(binary.BigEndian.Uint16(b[4:]))
	if plen == 0 { // a jumbogram (RFC 2675) or nothing: no UDP datagram here
		return ip, ReasonMalformed, false
	}
	if ipv6HeaderLen+plen > len(b) {
		return ip, ReasonMalformed, false
	}
	ip.src = netip.AddrFrom16([16]byte(b[8:24]))
	ip.dst = netip.AddrFrom16([16]byte(b[24:40]))
	next := b[6]
	p := b[ipv6HeaderLen : ipv6HeaderLen+plen]
	for range maxExtHeaders {
		switch next {
		case protoHopByHop, protoRouting, protoDestOpts:
			if len(p) < 8 {
				return ip, ReasonMalformed, false
			}
			n := (int(p[1]) + 1) * 8
			if n > len(p) {
				return ip, ReasonMalformed, false
			}
			next, p = p[0], p[n:]
		case protoAH:
			if len(p) < 8 {
				return ip, ReasonMalformed, false
			}
			n := (int(p[1]) + 2) * 4
			if n > len(p) {
				return ip, ReasonMalformed, false
			}
			next, p = p[0], p[n:]
		case protoFragment:
			if len(p) < 8 || ip.fragment { // a second fragment header is malformed
				return ip, ReasonMalformed, false
			}
			off := binary.BigEndian.Uint16(p[2:])
			ip.fragOff = int(off>>3) * 8
			ip.fragMore = off&1 != 0
			ip.fragID = binary.BigEndian.Uint32(p[4:])
			// An atomic fragment (offset 0, no more; RFC 6946) is a whole
			// datagram.
			ip.fragment = ip.fragOff != 0 || ip.fragMore
			next, p = p[0], p[8:]
		default:
			ip.proto, ip.payload = next, p
			return ip, 0, true
		}
	}
	return ip, ReasonMalformed, false
}

// parseUDP decodes the UDP header at ip.payload.
func parseUDP(ip *ipPacket) (Datagram, Reason, bool) {
	b := ip.payload
	if len(b) < udpHeaderLen {
		return Datagram{}, truncOr(ReasonMalformed, ip.truncated), false
	}
	n := int(binary.BigEndian.Uint16(b[4:]))
	if n < udpHeaderLen || n > len(b) {
		return Datagram{}, truncOr(ReasonMalformed, ip.truncated), false
	}
	return Datagram{
		Src:     netip.AddrPortFrom(ip.src, binary.BigEndian.Uint16(b[0:])),
		Dst:     netip.AddrPortFrom(ip.dst, binary.BigEndian.Uint16(b[2:])),
		Payload: b[udpHeaderLen:n:n],
	}, 0, true
}
