package pcap

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"
	"github.com/stretchr/testify/require"
)

func TestDecodeLinkTypes(t *testing.T) {
	pkt := moldPacket(t, "ABC", 5, "hello", "world")
	v4 := ipUDP(t, src4, dst4, pkt)
	v6 := ipUDP(t, src6, dst6, pkt)
	null := func(fam uint32, ip []byte) []byte {
		return append(binary.LittleEndian.AppendUint32(nil, fam), ip...)
	}
	loop := func(fam uint32, ip []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, fam), ip...)
	}
	for _, tc := range []struct {
		name  string
		lt    LinkType
		frame []byte
		v6    bool
	}{
		{"ethernet/ipv4", LinkEthernet, ethernet(v4), false},
		{"ethernet/ipv6", LinkEthernet, ethernet(v6), true},
		{"ethernet/802.1Q/ipv4", LinkEthernet, ethernet(v4, etherTypeVLAN), false},
		{"ethernet/QinQ/ipv4", LinkEthernet, ethernet(v4, etherTypeQinQ, etherTypeVLAN), false},
		{"ethernet/QinQ-9100/ipv6", LinkEthernet, ethernet(v6, etherTypeQinQ1, etherTypeVLAN), true},
		{"sll/ipv4", LinkSLL, sll(v4), false},
		{"sll/ipv6", LinkSLL, sll(v6), true},
		{"sll2/ipv4", LinkSLL2, sll2(v4), false},
		{"sll2/ipv6", LinkSLL2, sll2(v6), true},
		{"raw/ipv4", LinkRaw, v4, false},
		{"raw/ipv6", LinkRaw, v6, true},
		{"raw12/ipv4", LinkRawAlt12, v4, false},
		{"ipv4", LinkIPv4, v4, false},
		{"ipv6", LinkIPv6, v6, true},
		{"null/ipv4", LinkNull, null(2, v4), false},
		{"null/ipv6-darwin", LinkNull, null(30, v6), true},
		{"loop/ipv6", LinkLoop, loop(24, v6), true},
		{"ethernet/ipv4-padded", LinkEthernet, append(ethernet(v4), 0, 0, 0, 0), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder(Reassembly{})
			dg, r, ok := d.Decode(tc.lt, tc.frame, len(tc.frame), 0)
			require.True(t, ok, "reason %v", r)
			require.Equal(t, pkt, dg.Payload)
			if tc.v6 {
				require.Equal(t, src6, dg.Src)
				require.Equal(t, dst6, dg.Dst)
			} else {
				require.Equal(t, src4, dg.Src)
				require.Equal(t, dst4, dg.Dst)
			}
		})
	}
}

func TestDecodeIPv6ExtensionHeaders(t *testing.T) {
	pkt := moldPacket(t, "EXT", 1, "m")
	hbh := &layers.IPv6HopByHop{}
	hbh.NextHeader = layers.IPProtocolIPv6Destination
	hbh.Options = []*layers.IPv6HopByHopOption{{OptionType: 5, OptionData: []byte{0, 0}}, {OptionType: 1, OptionData: []byte{}}} // router alert, PadN
	dest := &layers.IPv6Destination{}
	dest.NextHeader = layers.IPProtocolUDP
	dest.Options = []*layers.IPv6DestinationOption{{OptionType: 1, OptionData: []byte{0, 0, 0, 0}}} // PadN
	ip := ipUDP(t, src6, dst6, pkt, hbh, dest)
	d := NewDecoder(Reassembly{})
	dg, r, ok := d.Decode(LinkRaw, ip, len(ip), 0)
	require.True(t, ok, "reason %v", r)
	require.Equal(t, pkt, dg.Payload)
	require.Equal(t, dst6, dg.Dst)

	// A routing header (type 0 with no addresses) then UDP, built by hand.
	ip = ipUDP(t, src6, dst6, pkt)
	rh := []byte{protoUDP, 0, 0, 0, 0, 0, 0, 0}
	withRH := append(append(append([]byte{}, ip[:40]...), rh...), ip[40:]...)
	withRH[6] = protoRouting
	binary.BigEndian.PutUint16(withRH[4:], uint16(len(withRH)-40))
	dg, r, ok = d.Decode(LinkIPv6, withRH, len(withRH), 0)
	require.True(t, ok, "reason %v", r)
	require.Equal(t, pkt, dg.Payload)

	// An atomic fragment (offset 0, no more fragments) is a whole datagram.
	atomic := frag6(ip, 4096, 9)
	require.Len(t, atomic, 1)
	dg, r, ok = d.Decode(LinkIPv6, atomic[0], len(atomic[0]), 0)
	require.True(t, ok, "reason %v", r)
	require.Equal(t, pkt, dg.Payload)
}

func TestDecodeSkipReasons(t *testing.T) {
	pkt := moldPacket(t, "R", 1, "x")
	v4 := ipUDP(t, src4, dst4, pkt)
	tcp := append([]byte{}, v4...)
	tcp[9] = 6
	arp := append([]byte{}, ethernet(v4)...)
	binary.BigEndian.PutUint16(arp[12:], 0x0806)
	badVer := append([]byte{}, v4...)
	badVer[0] = 0x55
	badUDPLen := append([]byte{}, v4...)
	binary.BigEndian.PutUint16(badUDPLen[20+4:], 4000)
	noNext := append([]byte{}, ipUDP(t, src6, dst6, pkt)...)
	noNext[6] = protoNoNext
	tooManyTags := ethernet(v4, etherTypeVLAN, etherTypeVLAN, etherTypeVLAN, etherTypeVLAN, etherTypeVLAN, etherTypeVLAN, etherTypeVLAN, etherTypeVLAN, etherTypeVLAN)
	for _, tc := range []struct {
		name    string
		lt      LinkType
		frame   []byte
		origLen int
		want    Reason
	}{
		{"unknown link type", LinkType(147), v4, 0, ReasonLinkType},
		{"arp", LinkEthernet, arp, 0, ReasonNotIP},
		{"raw not ip", LinkRaw, []byte{0x10, 1, 2}, 0, ReasonNotIP},
		{"tcp", LinkRaw, tcp, 0, ReasonNotUDP},
		{"ipv6 no next header", LinkRaw, noNext, 0, ReasonNotUDP},
		{"bad ip version", LinkIPv4, badVer, 0, ReasonMalformed},
		{"udp length past end", LinkRaw, badUDPLen, 0, ReasonMalformed},
		{"short ethernet", LinkEthernet, []byte{1, 2, 3}, 0, ReasonMalformed},
		{"empty", LinkRaw, nil, 0, ReasonMalformed},
		{"too many vlan tags", LinkEthernet, tooManyTags, 0, ReasonMalformed},
		{"cut by capture", LinkEthernet, ethernet(v4)[:30], len(ethernet(v4)), ReasonTruncated},
		{"cut inside udp", LinkRaw, v4[:len(v4)-3], len(v4), ReasonTruncated},
		{"short without cut", LinkRaw, v4[:len(v4)-3], 0, ReasonMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ol := tc.origLen
			if ol == 0 {
				ol = len(tc.frame)
			}
			_, r, ok := NewDecoder(Reassembly{}).Decode(tc.lt, tc.frame, ol, 0)
			require.False(t, ok)
			require.Equal(t, tc.want, r, "got %v", r)
		})
	}
}

// A frame cut only after the UDP datagram (trailing Ethernet padding or
// FCS) still yields the datagram.
func TestDecodeCutAfterDatagram(t *testing.T) {
	pkt := moldPacket(t, "R", 1, "x")
	f := ethernet(ipUDP(t, src4, dst4, pkt))
	dg, r, ok := NewDecoder(Reassembly{}).Decode(LinkEthernet, f, len(f)+4, 0)
	require.True(t, ok, "reason %v", r)
	require.Equal(t, pkt, dg.Payload)
}

func TestDecodeFragments(t *testing.T) {
	msgs := make([]string, 40)
	for i := range msgs {
		msgs[i] = string(make([]byte, 100+i))
	}
	pkt := moldPacket(t, "FRAG", 100, msgs...)
	require.Greater(t, len(pkt), 4000)
	for _, tc := range []struct {
		name  string
		frags [][]byte
	}{
		{"ipv4", frag4(ipUDP(t, src4, dst4, pkt), 1480)},
		{"ipv6", frag6(ipUDP(t, src6, dst6, pkt), 1448, 77)},
	} {
		for _, order := range []string{"in order", "reversed", "middle first"} {
			t.Run(tc.name+"/"+order, func(t *testing.T) {
				fs := append([][]byte{}, tc.frags...)
				switch order {
				case "reversed":
					for i, j := 0, len(fs)-1; i < j; i, j = i+1, j-1 {
						fs[i], fs[j] = fs[j], fs[i]
					}
				case "middle first":
					fs[0], fs[1] = fs[1], fs[0]
				}
				require.Greater(t, len(fs), 2)
				d := NewDecoder(Reassembly{})
				for i, f := range fs {
					dg, r, ok := d.Decode(LinkRaw, f, len(f), int64(i))
					if i < len(fs)-1 {
						require.False(t, ok)
						require.Equal(t, ReasonFragment, r)
						continue
					}
					require.True(t, ok, "reason %v", r)
					require.Equal(t, pkt, dg.Payload)
				}
				require.EqualValues(t, 1, d.frag.rebuilt)
				require.Empty(t, d.frag.parts)
				require.Zero(t, d.frag.bytes)
			})
		}
	}
}

func TestDecodeFragmentLimits(t *testing.T) {
	pkt := moldPacket(t, "FRAG", 1, string(make([]byte, 3000)))
	ip := ipUDP(t, src4, dst4, pkt)
	fs := frag4(ip, 1480)
	require.Len(t, fs, 3)

	t.Run("overlap drops the datagram", func(t *testing.T) {
		d := NewDecoder(Reassembly{})
		_, r, _ := d.Decode(LinkRaw, fs[0], len(fs[0]), 0)
		require.Equal(t, ReasonFragment, r)
		_, r, _ = d.Decode(LinkRaw, fs[0], len(fs[0]), 0)
		require.Equal(t, ReasonFragmentLost, r)
		require.EqualValues(t, 1, d.frag.dropped)
		require.Zero(t, d.frag.bytes)
	})
	t.Run("timeout", func(t *testing.T) {
		d := NewDecoder(Reassembly{Timeout: time.Second})
		d.Decode(LinkRaw, fs[0], len(fs[0]), 0)
		d.Decode(LinkRaw, fs[1], len(fs[1]), int64(500*time.Millisecond))
		_, r, ok := d.Decode(LinkRaw, fs[2], len(fs[2]), int64(2*time.Second))
		require.False(t, ok)
		require.Equal(t, ReasonFragment, r, "the late last fragment starts a new datagram")
		require.EqualValues(t, 1, d.frag.dropped)
	})
	t.Run("max datagrams evicts the oldest", func(t *testing.T) {
		d := NewDecoder(Reassembly{MaxDatagrams: 2})
		for id := range 3 {
			f := append([]byte{}, fs[0]...)
			binary.BigEndian.PutUint16(f[4:], uint16(id))
			d.Decode(LinkRaw, f, len(f), 0)
		}
		require.Len(t, d.frag.parts, 2)
		require.EqualValues(t, 1, d.frag.dropped)
	})
	t.Run("max bytes", func(t *testing.T) {
		d := NewDecoder(Reassembly{MaxBytes: 2000})
		d.Decode(LinkRaw, fs[0], len(fs[0]), 0)
		_, r, _ := d.Decode(LinkRaw, fs[1], len(fs[1]), 0)
		require.Equal(t, ReasonFragmentLost, r)
		require.LessOrEqual(t, d.frag.bytes, 2000)
	})
	t.Run("off", func(t *testing.T) {
		d := NewDecoder(Reassembly{Off: true})
		_, r, _ := d.Decode(LinkRaw, fs[0], len(fs[0]), 0)
		require.Equal(t, ReasonFragmentLost, r)
	})
	t.Run("bad fragment size", func(t *testing.T) {
		odd := frag4(ip, 1480)[0]
		odd = odd[:len(odd)-1] // a non-final fragment must carry a multiple of 8
		binary.BigEndian.PutUint16(odd[2:], uint16(len(odd)))
		_, r, _ := NewDecoder(Reassembly{}).Decode(LinkRaw, odd, len(odd), 0)
		require.Equal(t, ReasonFragmentLost, r)
	})
}

func TestDecodeAllocs(t *testing.T) {
	pkt := moldPacket(t, "ALLOC", 1, "hello", "world")
	f4 := ethernet(ipUDP(t, src4, dst4, pkt), etherTypeVLAN)
	f6 := sll2(ipUDP(t, src6, dst6, pkt))
	d := NewDecoder(Reassembly{})
	allocs := testing.AllocsPerRun(1000, func() {
		if _, _, ok := d.Decode(LinkEthernet, f4, len(f4), 0); !ok {
			panic("decode")
		}
		if _, _, ok := d.Decode(LinkSLL2, f6, len(f6), 0); !ok {
			panic("decode")
		}
	})
	require.Zero(t, allocs)
}

func BenchmarkDecode(b *testing.B) {
	pkt := moldPacket(b, "BENCH", 1, string(make([]byte, 1400)))
	f := ethernet(ipUDP(b, src4, dst4, pkt), etherTypeVLAN)
	d := NewDecoder(Reassembly{})
	b.ReportAllocs()
	b.SetBytes(int64(len(f)))
	for b.Loop() {
		d.Decode(LinkEthernet, f, len(f), 0)
	}
}
