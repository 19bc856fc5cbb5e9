package pcap

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Frame layout of what Writer writes. Part of the export format.
const (
	// snapLen is the snap length the exported file declares: the largest
	// frame Writer builds (an IPv6 header, UDP and the largest payload).
	snapLen = ethHeaderLen + ipv6HeaderLen + udpHeaderLen + 65535
	// exportTTL is the IPv4 TTL / IPv6 hop limit written: 1, as a sender
	// on the local segment (tshark flags 0 as suspicious for multicast).
	exportTTL = 1
)

// srcMAC is a locally administered unicast address: the exported frames
// did not come from a real interface.
var srcMAC = [6]byte{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}

// Writer writes UDP datagrams as a nanosecond pcap of Ethernet frames,
// with valid IPv4 header and UDP checksums, so Wireshark and tshark decode
// them without complaint. Not safe for concurrent use; WritePacket
// allocates nothing once its buffer has grown to the largest frame.
type Writer struct {
	w    *pcapgo.Writer
	buf  []byte
	ipID uint16
}

// NewWriter writes the pcap file header (nanosecond timestamps, link type
// Ethernet) to w.
func NewWriter(w io.Writer) (*Writer, error) {
	pw := pcapgo.NewWriterNanos(w)
	if err := pw.WriteFileHeader(snapLen, layers.LinkTypeEthernet); err != nil {
		return nil, fmt.Errorf("pcap: write file header: %w", err)
	}
	return &Writer{w: pw}, nil
}

// WritePacket writes one UDP datagram from src to dst carrying payload,
// captured at ts (ns since the Unix epoch). src and dst must be of one
// address family; dst decides IPv4 or IPv6.
func (w *Writer) WritePacket(ts int64, src, dst netip.AddrPort, payload []byte) error {
	var err error
	w.ipID++
	w.buf, err = AppendFrame(w.buf[:0], src, dst, w.ipID, payload)
	if err != nil {
		return err
	}
	ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, ts), CaptureLength: len(w.buf), Length: len(w.buf)}
	if err := w.w.WritePacket(ci, w.buf); err != nil {
		return fmt.Errorf("pcap: write packet: %w", err)
	}
	return nil
}

// AppendFrame appends an Ethernet frame holding an IPv4 or IPv6 UDP
// datagram from src to dst with payload, checksums filled in. id is the
// IPv4 identification. The destination MAC is the multicast MAC of dst
// when dst is a group (RFC 1112, RFC 2464), else a broadcast.
func AppendFrame(b []byte, src, dst netip.AddrPort, id uint16, payload []byte) ([]byte, error) {
	sa, da := src.Addr().Unmap(), dst.Addr().Unmap()
	if sa.Is4() != da.Is4() || !sa.IsValid() || !da.IsValid() {
		return b, fmt.Errorf("pcap: frame from %s to %s: addresses of different families", src, dst)
	}
	v6 := !da.Is4()
	ipLen := ipv4MinLen
	if v6 {
		ipLen = ipv6HeaderLen
	}
	udpLen := udpHeaderLen + len(payload)
	if udpLen > 0xFFFF || (!v6 && ipLen+udpLen > 0xFFFF) {
		return b, fmt.Errorf("pcap: frame from %s to %s: payload of %d bytes too large for one datagram", src, dst, len(payload))
	}
	// Ethernet.
	mac := dstMAC(da)
	b = append(b, mac[:]...)
	b = append(b, srcMAC[:]...)
	if v6 {
		b = binary.BigEndian.AppendUint16(b, etherTypeIPv6)
	} else {
		b = binary.BigEndian.AppendUint16(b, etherTypeIPv4)
	}
	ipOff := len(b)
	if v6 {
		b = append(b, 0x60, 0, 0, 0)
		b = binary.BigEndian.AppendUint16(b, uint16(udpLen))
		b = append(b, protoUDP, exportTTL)
		s, d := sa.As16(), da.As16()
		b = append(b, s[:]...)
		b = append(b, d[:]...)
	} else {
		b = append(b, 0x45, 0)
		b = binary.BigEndian.AppendUint16(b, uint16(ipLen+udpLen))
		b = binary.BigEndian.AppendUint16(b, id)
		b = append(b, 0x40, 0, exportTTL, protoUDP, 0, 0) // DF, checksum below
		s, d := sa.As4(), da.As4()
		b = append(b, s[:]...)
		b = append(b, d[:]...)
		binary.BigEndian.PutUint16(b[ipOff+10:], ^fold(sum(0, b[ipOff:ipOff+ipv4MinLen])))
	}
	udpOff := len(b)
	b = binary.BigEndian.AppendUint16(b, src.Port())
	b = binary.BigEndian.AppendUint16(b, dst.Port())
	b = binary.BigEndian.AppendUint16(b, uint16(udpLen))
	b = append(b, 0, 0)
	b = append(b, payload...)
	// UDP checksum over the pseudo-header (RFC 768, RFC 8200 8.1).
	var c uint32
	if v6 {
		c = sum(c, b[ipOff+8:ipOff+40])
	} else {
		c = sum(c, b[ipOff+12:ipOff+20])
	}
	c += protoUDP + uint32(udpLen)
	c = sum(c, b[udpOff:])
	ck := ^fold(c)
	if ck == 0 {
		ck = 0xFFFF // 0 means "no checksum"
	}
	binary.BigEndian.PutUint16(b[udpOff+6:], ck)
	return b, nil
}

func dstMAC(a netip.Addr) [6]byte {
	switch {
	case a.Is4() && a.IsMulticast():
		v := a.As4()
		return [6]byte{0x01, 0x00, 0x5e, v[1] & 0x7f, v[2], v[3]}
	case a.Is6() && a.IsMulticast():
		v := a.As16()
		return [6]byte{0x33, 0x33, v[12], v[13], v[14], v[15]}
	}
	return [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
}

// sum adds b as big-endian 16-bit words to c (the Internet checksum,
// RFC 1071, before folding).
func sum(c uint32, b []byte) uint32 {
	for len(b) >= 2 {
		c += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		c += uint32(b[0]) << 8
	}
	return c
}

func fold(c uint32) uint16 {
	for c > 0xFFFF {
		c = c&0xFFFF + c>>16
	}
	return uint16(c)
}
