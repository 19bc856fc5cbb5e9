package pcap

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/stretchr/testify/require"
)

// TestAppendFrameMatchesGopacket: the frames Writer builds are byte for
// byte what gopacket serializes with checksums computed, so the IPv4
// header and UDP checksums are right.
func TestAppendFrameMatchesGopacket(t *testing.T) {
	for _, tc := range []struct {
		name     string
		src, dst netip.AddrPort
		payload  []byte
	}{
		{"ipv4", src4, dst4, moldPacket(t, "W", 1, "hello", "world")},
		{"ipv4 odd length", src4, dst4, moldPacket(t, "W", 1, "odd")},
		{"ipv6", src6, dst6, moldPacket(t, "W", 7, "six")},
		{"ipv4 unicast", src4, netip.MustParseAddrPort("10.9.9.9:5"), moldPacket(t, "W", 1, "u")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AppendFrame(nil, tc.src, tc.dst, 42, tc.payload)
			require.NoError(t, err)

			eth := &layers.Ethernet{SrcMAC: srcMAC[:], DstMAC: func() []byte { m := dstMAC(tc.dst.Addr()); return m[:] }()}
			udp := &layers.UDP{SrcPort: layers.UDPPort(tc.src.Port()), DstPort: layers.UDPPort(tc.dst.Port())}
			var ip gopacket.SerializableLayer
			if tc.dst.Addr().Is4() {
				eth.EthernetType = layers.EthernetTypeIPv4
				ip4 := &layers.IPv4{Version: 4, IHL: 5, Id: 42, Flags: layers.IPv4DontFragment, TTL: exportTTL, Protocol: layers.IPProtocolUDP,
					SrcIP: tc.src.Addr().AsSlice(), DstIP: tc.dst.Addr().AsSlice()}
				require.NoError(t, udp.SetNetworkLayerForChecksum(ip4))
				ip = ip4
			} else {
				eth.EthernetType = layers.EthernetTypeIPv6
				ip6 := &layers.IPv6{Version: 6, HopLimit: exportTTL, NextHeader: layers.IPProtocolUDP,
					SrcIP: tc.src.Addr().AsSlice(), DstIP: tc.dst.Addr().AsSlice()}
				require.NoError(t, udp.SetNetworkLayerForChecksum(ip6))
				ip = ip6
			}
			buf := gopacket.NewSerializeBuffer()
			require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
				eth, ip, udp, gopacket.Payload(tc.payload)))
			require.Equal(t, buf.Bytes(), got)

			dg, r, ok := NewDecoder(Reassembly{}).Decode(LinkEthernet, got, len(got), 0)
			require.True(t, ok, "reason %v", r)
			require.Equal(t, tc.payload, dg.Payload)
			require.Equal(t, tc.src, dg.Src)
			require.Equal(t, tc.dst, dg.Dst)
		})
	}
	_, err := AppendFrame(nil, src4, dst6, 1, nil)
	require.Error(t, err, "mixed families")
}

// TestWriterTshark: a capture written by Writer decodes in tshark with no
// expert warnings (bad checksums, malformed packets).
func TestWriterTshark(t *testing.T) {
	tshark := needTshark(t)
	file := filepath.Join(t.TempDir(), "w.pcap")
	f, err := os.Create(file)
	require.NoError(t, err)
	w, err := NewWriter(f)
	require.NoError(t, err)
	pkts := [][]byte{moldPacket(t, "TSK", 1, "a", "bb"), moldPacket(t, "TSK", 3, "ccc"), moldPacket(t, "TSK6", 1, "six")}
	require.NoError(t, w.WritePacket(time.Unix(5, 1).UnixNano(), src4, dst4, pkts[0]))
	require.NoError(t, w.WritePacket(time.Unix(5, 2).UnixNano(), src4, dst4, pkts[1]))
	require.NoError(t, w.WritePacket(time.Unix(5, 3).UnixNano(), src6, dst6, pkts[2]))
	require.NoError(t, f.Close())

	want := eventView(t, []Event{{Packet: pkts[0]}, {Packet: pkts[1]}, {Packet: pkts[2]}})
	require.Equal(t, want, tsharkDecode(t, file, dst4.Port()))
	out, err := runTshark(tshark, "-r", file, "-d", "udp.port==31001,moldudp64", "-o", "udp.check_checksum:TRUE",
		"-o", "ip.check_checksum:TRUE", "-Y", "_ws.expert || _ws.malformed", "-T", "fields", "-e", "frame.number")
	require.NoError(t, err)
	require.Empty(t, bytes.TrimSpace(out), "frames with expert warnings")
}

func BenchmarkWritePacket(b *testing.B) {
	pkt := moldPacket(b, "B", 1, string(make([]byte, 1400)))
	var sink bytes.Buffer
	w, err := NewWriter(&sink)
	require.NoError(b, err)
	b.ReportAllocs()
	b.SetBytes(int64(len(pkt)))
	for b.Loop() {
		sink.Reset()
		if err := w.WritePacket(1, src4, dst4, pkt); err != nil {
			b.Fatal(err)
		}
	}
}
