package pcap

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/wire"
)

// The test frames are built with gopacket's layers (an encoder this
// package does not share), so the decoder is checked against an
// independent implementation of the headers.

var (
	src4 = netip.MustParseAddrPort("10.1.2.3:40000")
	dst4 = netip.MustParseAddrPort("239.192.0.1:31001")
	src6 = netip.MustParseAddrPort("[fd00::1]:40000")
	dst6 = netip.MustParseAddrPort("[ff15::1234]:31001")
)

// moldPacket returns a MoldUDP64 packet of session s starting at seq with
// the given messages.
func moldPacket(t testing.TB, s string, seq wire.Seq, msgs ...string) []byte {
	t.Helper()
	sess, err := wire.ParseSession(s)
	require.NoError(t, err)
	var e wire.Encoder
	e.Reset(nil, sess, seq, wire.MaxPayloadSize)
	for _, m := range msgs {
		require.NoError(t, e.Add([]byte(m)))
	}
	return e.Bytes()
}

// ipUDP serializes an IP (v4 or v6, by dst) + UDP datagram with gopacket,
// checksums computed; extra IPv6 extension layers go between IPv6 and UDP.
func ipUDP(t testing.TB, src, dst netip.AddrPort, payload []byte, ext ...gopacket.SerializableLayer) []byte {
	t.Helper()
	udp := &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())}
	var ls []gopacket.SerializableLayer
	if dst.Addr().Is4() {
		ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 1, Protocol: layers.IPProtocolUDP, SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice(), Id: 7}
		require.NoError(t, udp.SetNetworkLayerForChecksum(ip))
		ls = append(ls, ip)
	} else {
		next := layers.IPProtocolUDP
		if len(ext) > 0 {
			switch ext[0].(type) {
			case *layers.IPv6HopByHop:
				next = layers.IPProtocolIPv6HopByHop
			case *layers.IPv6Destination:
				next = layers.IPProtocolIPv6Destination
			}
		}
		ip := &layers.IPv6{Version: 6, HopLimit: 1, NextHeader: next, SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
		require.NoError(t, udp.SetNetworkLayerForChecksum(ip))
		ls = append(ls, ip)
		ls = append(ls, ext...)
	}
	ls = append(ls, udp, gopacket.Payload(payload))
	buf := gopacket.NewSerializeBuffer()
	require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...))
	return bytes.Clone(buf.Bytes())
}

// ethernet wraps ip in an Ethernet frame with the given VLAN tag TPIDs
// (outermost first).
func ethernet(ip []byte, tpids ...uint16) []byte {
	et := uint16(etherTypeIPv4)
	if ip[0]>>4 == 6 {
		et = etherTypeIPv6
	}
	b := []byte{0x01, 0x00, 0x5e, 0x40, 0x00, 0x01, 0x02, 0, 0, 0, 0, 2}
	for i, tp := range tpids {
		b = binary.BigEndian.AppendUint16(b, tp)
		b = binary.BigEndian.AppendUint16(b, uint16(100+i)) // VLAN id
	}
	b = binary.BigEndian.AppendUint16(b, et)
	return append(b, ip...)
}

func etherTypeOf(ip []byte) uint16 {
	if ip[0]>>4 == 6 {
		return etherTypeIPv6
	}
	return etherTypeIPv4
}

// sll wraps ip in a Linux cooked v1 header.
func sll(ip []byte) []byte {
	b := []byte{0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 2, 0, 0}
	b = binary.BigEndian.AppendUint16(b, etherTypeOf(ip))
	return append(b, ip...)
}

// sll2 wraps ip in a Linux cooked v2 header.
func sll2(ip []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, etherTypeOf(ip))
	b = append(b, 0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 2, 0, 0, 0, 0, 2, 0, 0)
	return append(b, ip...)
}

// frag4 splits an IPv4 datagram into fragments carrying at most size
// payload bytes each (size a multiple of 8).
func frag4(ip []byte, size int) [][]byte {
	hl := int(ip[0]&0x0F) * 4
	payload := ip[hl:]
	var out [][]byte
	for off := 0; off < len(payload); off += size {
		end := min(off+size, len(payload))
		f := bytes.Clone(ip[:hl])
		binary.BigEndian.PutUint16(f[2:], uint16(hl+end-off))
		flags := uint16(off / 8)
		if end < len(payload) {
			flags |= 0x2000
		}
		binary.BigEndian.PutUint16(f[6:], flags)
		binary.BigEndian.PutUint16(f[10:], 0)
		binary.BigEndian.PutUint16(f[10:], ^fold(sum(0, f[:hl])))
		out = append(out, append(f, payload[off:end]...))
	}
	return out
}

// frag6 splits an IPv6 datagram (fixed header then UDP) into fragments
// with a fragment header, each carrying at most size bytes.
func frag6(ip []byte, size int, id uint32) [][]byte {
	next := ip[6]
	payload := ip[ipv6HeaderLen:]
	var out [][]byte
	for off := 0; off < len(payload); off += size {
		end := min(off+size, len(payload))
		f := bytes.Clone(ip[:ipv6HeaderLen])
		f[6] = protoFragment
		binary.BigEndian.PutUint16(f[4:], uint16(8+end-off))
		fo := uint16(off/8) << 3
		if end < len(payload) {
			fo |= 1
		}
		f = append(f, next, 0)
		f = binary.BigEndian.AppendUint16(f, fo)
		f = binary.BigEndian.AppendUint32(f, id)
		out = append(out, append(f, payload[off:end]...))
	}
	return out
}

// frame is one packet of a synthetic capture.
type frame struct {
	ts      time.Time
	data    []byte
	origLen int // 0: len(data)
	iface   int // pcapng interface
}

// writePcap writes frames as a pcap of link type lt.
func writePcap(t testing.TB, lt LinkType, nano bool, frames ...frame) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := pcapgo.NewWriter(&buf)
	if nano {
		w = pcapgo.NewWriterNanos(&buf)
	}
	require.NoError(t, w.WriteFileHeader(65535, layers.LinkType(lt)))
	for _, f := range frames {
		ol := f.origLen
		if ol == 0 {
			ol = len(f.data)
		}
		require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: f.ts, CaptureLength: len(f.data), Length: ol}, f.data))
	}
	return buf.Bytes()
}

// readAll reads every event of a capture, copying the packets.
func readAll(t testing.TB, data []byte, cfg Config) ([]Event, Stats) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data), cfg)
	require.NoError(t, err)
	var evs []Event
	for {
		ev, err := r.Next()
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
		ev.Packet = bytes.Clone(ev.Packet)
		evs = append(evs, ev)
	}
	st := r.Stats()
	require.Equal(t, st.Frames, st.Events+st.SkippedTotal(), "every frame counted once")
	return evs, st
}
