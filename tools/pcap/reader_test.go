package pcap

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// sharedCapture is the real NASDAQ capture kept beside the wire package.
const sharedCapture = "../../wire/testdata/nasdaq-itch50-multiple-packets.pcap"

func TestReadPcapResolutions(t *testing.T) {
	pkt := moldPacket(t, "RES", 1, "a", "b")
	f := ethernet(ipUDP(t, src4, dst4, pkt))
	ts := time.Unix(1700000000, 123456789)
	for _, nano := range []bool{false, true} {
		t.Run(fmt.Sprintf("nano=%v", nano), func(t *testing.T) {
			evs, st := readAll(t, writePcap(t, LinkEthernet, nano, frame{ts: ts, data: f}), Config{})
			require.Len(t, evs, 1)
			want := ts.UnixNano()
			if !nano {
				want = ts.Truncate(time.Microsecond).UnixNano()
			}
			require.Equal(t, want, evs[0].Time)
			require.Equal(t, pkt, evs[0].Packet)
			require.Equal(t, src4, evs[0].Src)
			require.Equal(t, dst4, evs[0].Dst)
			require.EqualValues(t, 1, evs[0].Frame)
			require.EqualValues(t, 1, st.Events)
		})
	}
	t.Run("big-endian", func(t *testing.T) {
		// A big-endian microsecond pcap written by hand (pcapgo writes
		// little-endian only).
		var b []byte
		b = binary.BigEndian.AppendUint32(b, magicPcapMicro)
		b = binary.BigEndian.AppendUint16(b, 2)
		b = binary.BigEndian.AppendUint16(b, 4)
		b = append(b, make([]byte, 8)...)
		b = binary.BigEndian.AppendUint32(b, 65535)
		b = binary.BigEndian.AppendUint32(b, uint32(LinkEthernet))
		b = binary.BigEndian.AppendUint32(b, uint32(ts.Unix()))
		b = binary.BigEndian.AppendUint32(b, 123456)
		b = binary.BigEndian.AppendUint32(b, uint32(len(f)))
		b = binary.BigEndian.AppendUint32(b, uint32(len(f)))
		b = append(b, f...)
		evs, _ := readAll(t, b, Config{})
		require.Len(t, evs, 1)
		require.Equal(t, time.Unix(ts.Unix(), 123456000).UnixNano(), evs[0].Time)
	})
	t.Run("gzip", func(t *testing.T) {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		_, err := zw.Write(writePcap(t, LinkEthernet, true, frame{ts: ts, data: f}))
		require.NoError(t, err)
		require.NoError(t, zw.Close())
		evs, _ := readAll(t, z.Bytes(), Config{})
		require.Len(t, evs, 1)
		require.Equal(t, pkt, evs[0].Packet)
	})
}

// ngBlock appends a pcapng block (little-endian) of type typ with body.
func ngBlock(b []byte, typ uint32, body []byte) []byte {
	for len(body)%4 != 0 {
		body = append(body, 0)
	}
	n := uint32(12 + len(body))
	b = binary.LittleEndian.AppendUint32(b, typ)
	b = binary.LittleEndian.AppendUint32(b, n)
	b = append(b, body...)
	return binary.LittleEndian.AppendUint32(b, n)
}

// ngIDB is an interface description block body: link type and, when
// tsresol is not 0, an if_tsresol option (absent means microseconds).
func ngIDB(lt LinkType, tsresol byte) []byte {
	b := binary.LittleEndian.AppendUint16(nil, uint16(lt))
	b = append(b, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, 0)
	if tsresol != 0 {
		b = append(b, 9, 0, 1, 0, tsresol, 0, 0, 0) // if_tsresol
		b = append(b, 0, 0, 0, 0)                   // opt_endofopt
	}
	return b
}

// ngEPB is an enhanced packet block body for interface iface at
// timestamp units ts.
func ngEPB(iface uint32, ts uint64, data []byte, origLen int) []byte {
	b := binary.LittleEndian.AppendUint32(nil, iface)
	b = binary.LittleEndian.AppendUint32(b, uint32(ts>>32))
	b = binary.LittleEndian.AppendUint32(b, uint32(ts))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(data)))
	b = binary.LittleEndian.AppendUint32(b, uint32(origLen))
	return append(b, data...)
}

func ngSHB() []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0x1A2B3C4D)
	b = binary.LittleEndian.AppendUint16(b, 1)
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = binary.LittleEndian.AppendUint64(b, 0xFFFFFFFFFFFFFFFF)
	return ngBlock(nil, 0x0A0D0D0A, b)
}

func TestReadPcapNGInterfaces(t *testing.T) {
	p1 := moldPacket(t, "NG", 1, "one")
	p2 := moldPacket(t, "NG", 2, "two")
	p3 := moldPacket(t, "NG", 3, "three")
	p4 := moldPacket(t, "NG", 4, "four")
	const sec = 1700000000
	// Four interfaces: Ethernet at the default microsecond resolution,
	// SLL2 at nanoseconds, raw IPv6 at milliseconds, and one of an
	// unknown link type.
	b := ngSHB()
	b = ngBlock(b, 1, ngIDB(LinkEthernet, 0))
	b = ngBlock(b, 1, ngIDB(LinkSLL2, 9))
	b = ngBlock(b, 1, ngIDB(LinkIPv6, 3))
	b = ngBlock(b, 1, ngIDB(LinkType(147), 9))
	b = ngBlock(b, 6, ngEPB(0, sec*1e6+1, ethernet(ipUDP(t, src4, dst4, p1), etherTypeVLAN), 0))
	b = ngBlock(b, 6, ngEPB(1, sec*1e9+2, sll2(ipUDP(t, src4, dst4, p2)), 0))
	b = ngBlock(b, 6, ngEPB(3, sec*1e9+3, []byte("opaque"), 0))
	b = ngBlock(b, 6, ngEPB(2, sec*1e3+4, ipUDP(t, src6, dst6, p3), 0))
	b = ngBlock(b, 6, ngEPB(1, sec*1e9+5, sll2(ipUDP(t, src6, dst6, p4)), 0))
	// Fix the EPB origLen fields written as 0: set them to caplen.
	evs, st := readAll(t, fixOrigLen(b), Config{})
	require.Len(t, evs, 4)
	require.Equal(t, [][]byte{p1, p2, p3, p4}, [][]byte{evs[0].Packet, evs[1].Packet, evs[2].Packet, evs[3].Packet})
	require.Equal(t, []int64{sec*1e9 + 1000, sec*1e9 + 2, sec*1e9 + 4e6, sec*1e9 + 5},
		[]int64{evs[0].Time, evs[1].Time, evs[2].Time, evs[3].Time})
	require.Equal(t, dst6, evs[2].Dst)
	require.Equal(t, []uint64{1, 2, 4, 5}, []uint64{evs[0].Frame, evs[1].Frame, evs[2].Frame, evs[3].Frame})
	require.EqualValues(t, 1, st.Skip(ReasonLinkType))
}

// fixOrigLen sets every EPB's original length to its captured length.
func fixOrigLen(b []byte) []byte {
	out := bytes.Clone(b)
	for off := 0; off+12 <= len(out); {
		typ := binary.LittleEndian.Uint32(out[off:])
		n := int(binary.LittleEndian.Uint32(out[off+4:]))
		if typ == 6 {
			copy(out[off+8+16:], out[off+8+12:off+8+16])
		}
		off += n
	}
	return out
}

func TestReadPcapNGWriter(t *testing.T) {
	// The same through pcapgo's own NgWriter, several interfaces.
	pkt := moldPacket(t, "NGW", 10, "x", "y")
	var buf bytes.Buffer
	w, err := pcapgo.NewNgWriterInterface(&buf, pcapgo.NgInterface{LinkType: layers.LinkTypeEthernet}, pcapgo.NgWriterOptions{})
	require.NoError(t, err)
	id, err := w.AddInterface(pcapgo.NgInterface{LinkType: layers.LinkType(LinkSLL)})
	require.NoError(t, err)
	ts := time.Unix(1700000000, 5)
	f0 := ethernet(ipUDP(t, src4, dst4, pkt))
	f1 := sll(ipUDP(t, src6, dst6, pkt))
	require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(f0), Length: len(f0)}, f0))
	require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: ts.Add(time.Nanosecond), CaptureLength: len(f1), Length: len(f1), InterfaceIndex: id}, f1))
	require.NoError(t, w.Flush())
	evs, _ := readAll(t, buf.Bytes(), Config{})
	require.Len(t, evs, 2)
	require.Equal(t, src4, evs[0].Src)
	require.Equal(t, src6, evs[1].Src)
	require.Equal(t, ts.UnixNano()+1, evs[1].Time)
}

func TestReadFilterAndSkips(t *testing.T) {
	ts := time.Unix(1700000000, 0)
	pkt := moldPacket(t, "F", 1, "m")
	otherPort := netip.AddrPortFrom(dst4.Addr(), 9999)
	otherGroup := netip.MustParseAddrPort("239.192.0.2:31001")
	notMold := ipUDP(t, src4, dst4, []byte("not moldudp64 at all, just text"))
	req := ipUDP(t, src4, dst4, wire.AppendRequest(nil, wire.Request{Session: [10]byte{'F', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '}, Seq: 1, Count: 5}))
	full := ethernet(ipUDP(t, src4, dst4, pkt))
	data := writePcap(t, LinkEthernet, true,
		frame{ts: ts, data: full},
		frame{ts: ts, data: ethernet(ipUDP(t, src4, otherPort, pkt))},
		frame{ts: ts, data: ethernet(ipUDP(t, src4, otherGroup, pkt))},
		frame{ts: ts, data: ethernet(notMold)},
		frame{ts: ts, data: ethernet(req)},
		frame{ts: ts, data: full[:40], origLen: len(full)},
		frame{ts: ts, data: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x08, 0x06, 0, 0}},
	)
	evs, st := readAll(t, data, Config{Ports: []uint16{dst4.Port()}, Dsts: []netip.Addr{dst4.Addr()}})
	require.Len(t, evs, 1)
	require.EqualValues(t, 7, st.Frames)
	require.EqualValues(t, 2, st.Skip(ReasonFiltered))
	require.EqualValues(t, 1, st.Skip(ReasonNotMoldUDP64))
	require.EqualValues(t, 1, st.Skip(ReasonRequest))
	require.EqualValues(t, 1, st.Skip(ReasonTruncated))
	require.EqualValues(t, 1, st.Skip(ReasonNotIP))
	require.EqualValues(t, 1, st.Truncated)

	evs, st = readAll(t, data, Config{})
	require.Len(t, evs, 3, "no filter: every port and group")
	require.Zero(t, st.Skip(ReasonFiltered))
}

func TestReadFragmentedCapture(t *testing.T) {
	msgs := make([]string, 30)
	for i := range msgs {
		msgs[i] = strings.Repeat(string(rune('a'+i%26)), 200)
	}
	pkt := moldPacket(t, "JUMBO", 1, msgs...)
	ts := time.Unix(1700000000, 0)
	var frames []frame
	for i, f := range frag4(ipUDP(t, src4, dst4, pkt), 1480) {
		frames = append(frames, frame{ts: ts.Add(time.Duration(i)), data: ethernet(f, etherTypeVLAN)})
	}
	for i, f := range frag6(ipUDP(t, src6, dst6, pkt), 1448, 1) {
		frames = append(frames, frame{ts: ts.Add(time.Duration(100 + i)), data: ethernet(f)})
	}
	// A lone first fragment that never completes.
	frames = append(frames, frame{ts: ts, data: ethernet(frag4(ipUDP(t, src4, dst4, pkt), 1480)[0])})
	evs, st := readAll(t, writePcap(t, LinkEthernet, true, frames...), Config{})
	require.Len(t, evs, 2)
	require.Equal(t, pkt, evs[0].Packet)
	require.Equal(t, pkt, evs[1].Packet)
	require.Equal(t, dst6, evs[1].Dst)
	require.EqualValues(t, 2, st.Reassembled)
	require.EqualValues(t, 1, st.ReassemblyDropped, "the lone fragment, given up at the end")
}

func TestReadBadFiles(t *testing.T) {
	good := writePcap(t, LinkEthernet, true,
		frame{ts: time.Unix(1, 0), data: ethernet(ipUDP(t, src4, dst4, moldPacket(t, "B", 1, "m")))},
		frame{ts: time.Unix(2, 0), data: ethernet(ipUDP(t, src4, dst4, moldPacket(t, "B", 2, "n")))})
	t.Run("truncated file", func(t *testing.T) {
		r, err := NewReader(bytes.NewReader(good[:len(good)-5]), Config{Name: "cut.pcap"})
		require.NoError(t, err)
		_, err = r.Next()
		require.NoError(t, err)
		_, err = r.Next()
		require.ErrorIs(t, err, ErrTruncatedFile)
		second := 24 + 16 + (len(good)-24-32)/2
		require.Contains(t, err.Error(), fmt.Sprintf("cut.pcap: packet 2 at byte offset %d", second))
		_, err = r.Next()
		require.ErrorIs(t, err, io.EOF, "reading stops at the error")
	})
	t.Run("cut inside a record header", func(t *testing.T) {
		r, err := NewReader(bytes.NewReader(good[:24+8]), Config{Name: "cut.pcap"})
		require.NoError(t, err)
		_, err = r.Next()
		require.ErrorIs(t, err, ErrTruncatedFile)
		require.Contains(t, err.Error(), "packet 1 at byte offset 24")
	})
	t.Run("garbage", func(t *testing.T) {
		_, err := NewReader(strings.NewReader("this is not a capture file at all"), Config{Name: "junk"})
		require.ErrorIs(t, err, ErrFormat)
		require.Contains(t, err.Error(), "junk")
	})
	t.Run("empty", func(t *testing.T) {
		_, err := NewReader(bytes.NewReader(nil), Config{Name: "empty.pcap"})
		require.ErrorIs(t, err, ErrFormat)
	})
	t.Run("header only", func(t *testing.T) {
		evs, st := readAll(t, good[:24], Config{})
		require.Empty(t, evs)
		require.Zero(t, st.Frames)
	})
	t.Run("record longer than the packet", func(t *testing.T) {
		bad := bytes.Clone(good)
		binary.LittleEndian.PutUint32(bad[24+12:], 10) // orig len < caplen
		r, err := NewReader(bytes.NewReader(bad), Config{Name: "bad.pcap"})
		require.NoError(t, err)
		_, err = r.Next()
		require.ErrorContains(t, err, "bad.pcap: packet 1 at byte offset 24")
	})
	t.Run("huge record length", func(t *testing.T) {
		bad := bytes.Clone(good)
		binary.LittleEndian.PutUint32(bad[24+8:], 0xFFFFFFF0)
		binary.LittleEndian.PutUint32(bad[24+12:], 0xFFFFFFF0)
		r, err := NewReader(bytes.NewReader(bad), Config{Name: "huge.pcap"})
		require.NoError(t, err)
		_, err = r.Next()
		require.Error(t, err)
		require.Contains(t, err.Error(), "huge.pcap: packet 1")
	})
	t.Run("pcapng truncated", func(t *testing.T) {
		b := ngSHB()
		b = ngBlock(b, 1, ngIDB(LinkEthernet, 9))
		f := ethernet(ipUDP(t, src4, dst4, moldPacket(t, "B", 1, "m")))
		b = ngBlock(b, 6, ngEPB(0, 1, f, len(f)))
		r, err := NewReader(bytes.NewReader(b[:len(b)-10]), Config{Name: "cut.pcapng"})
		require.NoError(t, err)
		_, err = r.Next()
		require.Error(t, err)
		require.Contains(t, err.Error(), "cut.pcapng: packet 1")
	})
}

// tsharkView is the decode of a capture as text: per packet "session seq
// count", per message "  seq hex".
func eventView(t testing.TB, evs []Event) string {
	var sb strings.Builder
	for _, ev := range evs {
		p, err := wire.ParsePacket(ev.Packet)
		require.NoError(t, err)
		fmt.Fprintf(&sb, "%s %d %d\n", p.Session.String(), p.Seq, p.Count)
		it := p.Messages()
		for msg, seq, ok := it.Next(); ok; msg, seq, ok = it.Next() {
			fmt.Fprintf(&sb, "  %d %x\n", seq, msg)
		}
	}
	return sb.String()
}

// needTshark returns tshark's path, skipping the test when it is missing
// (failing under CI=true, where .ci/run installs it).
func needTshark(t *testing.T) string {
	path, err := exec.LookPath("tshark")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("tshark not found under CI=true: install it (apt-get install -y tshark)")
		}
		t.Skip("tshark not installed")
	}
	return path
}

// tsharkDecode decodes file with tshark's MoldUDP64 dissector on port,
// in eventView's layout.
func tsharkDecode(t *testing.T, file string, port uint16) string {
	tshark := needTshark(t)
	cmd := exec.Command(tshark, "-r", file, "-d", fmt.Sprintf("udp.port==%d,moldudp64", port),
		"-T", "fields", "-e", "moldudp64.session", "-e", "moldudp64.sequence", "-e", "moldudp64.count",
		"-e", "moldudp64.msgseq", "-e", "moldudp64.msgdata", "-E", "separator=/t", "-E", "aggregator=,", "-E", "occurrence=a")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "tshark: %s", stderr.String())
	var sb strings.Builder
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		require.Len(t, f, 5, "tshark line %q", line)
		fmt.Fprintf(&sb, "%s %s %s\n", strings.TrimRight(f[0], " "), f[1], f[2])
		if f[3] == "" {
			continue
		}
		seqs, datas := strings.Split(f[3], ","), strings.Split(f[4], ",")
		require.Len(t, datas, len(seqs))
		for i := range seqs {
			fmt.Fprintf(&sb, "  %s %s\n", seqs[i], datas[i])
		}
	}
	return sb.String()
}

// TestSharedCapture: the real NASDAQ capture gives exactly the sessions,
// sequences and message bytes that tshark shows, checked against tshark
// when it is installed and against the golden file always.
func TestSharedCapture(t *testing.T) {
	data, err := os.ReadFile(sharedCapture)
	require.NoError(t, err)
	evs, st := readAll(t, data, Config{Name: sharedCapture})
	require.Len(t, evs, 2)
	require.EqualValues(t, 2, st.Frames)
	for _, ev := range evs {
		require.Equal(t, netip.MustParseAddrPort("206.200.127.138:49653"), ev.Src)
		require.Equal(t, netip.MustParseAddrPort("233.54.12.111:26477"), ev.Dst)
	}
	require.Equal(t, int64(1692711000007661955), evs[0].Time)
	require.Equal(t, int64(1692711038952561782), evs[1].Time)
	got := eventView(t, evs)
	golden := filepath.Join("testdata", "nasdaq-itch50-multiple-packets.golden")
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), got)
	require.Contains(t, got, "000010059B 14764496 1\n")
	require.Contains(t, got, "000010059B 19009117 38\n")

	t.Run("tshark", func(t *testing.T) {
		require.Equal(t, tsharkDecode(t, sharedCapture, 26477), got)
	})
}

func TestReaderAllocs(t *testing.T) {
	var frames []frame
	for i := range 300 {
		frames = append(frames, frame{ts: time.Unix(1, int64(i)), data: ethernet(ipUDP(t, src4, dst4, moldPacket(t, "A", wire.Seq(i+1), "msg")), etherTypeVLAN)})
	}
	data := writePcap(t, LinkEthernet, true, frames...)
	r, err := NewReader(bytes.NewReader(data), Config{})
	require.NoError(t, err)
	_, err = r.Next() // grow the buffers
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := r.Next(); err != nil && !errors.Is(err, io.EOF) {
			panic(err)
		}
	})
	require.Zero(t, allocs)
}

// runTshark runs tshark with args and returns its standard output.
func runTshark(tshark string, args ...string) ([]byte, error) {
	cmd := exec.Command(tshark, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("tshark %v: %w: %s", args, err, stderr.String())
	}
	return out, nil
}

// BenchmarkReadCapture reads a nanosecond pcap of 1000 VLAN-tagged
// Ethernet frames, each a 1472-byte MoldUDP64 packet.
func BenchmarkReadCapture(b *testing.B) {
	msgs := make([]string, 36)
	for i := range msgs {
		msgs[i] = strings.Repeat("x", 38)
	}
	var frames []frame
	for i := range 1000 {
		frames = append(frames, frame{ts: time.Unix(1, int64(i)), data: ethernet(ipUDP(b, src4, dst4, moldPacket(b, "BENCH", wire.Seq(1+36*i), msgs...)), etherTypeVLAN)})
	}
	data := writePcap(b, LinkEthernet, true, frames...)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		r, err := NewReader(bytes.NewReader(data), Config{})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			if _, err := r.Next(); err != nil {
				break
			}
			n++
		}
		if n != 1000 {
			b.Fatalf("%d events", n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/packet")
}

func TestReaderEvents(t *testing.T) {
	good := writePcap(t, LinkEthernet, true,
		frame{ts: time.Unix(1, 0), data: ethernet(ipUDP(t, src4, dst4, moldPacket(t, "I", 1, "m")))},
		frame{ts: time.Unix(2, 0), data: ethernet(ipUDP(t, src4, dst4, moldPacket(t, "I", 2, "n")))})
	r, err := NewReader(bytes.NewReader(good), Config{})
	require.NoError(t, err)
	var seqs []wire.Seq
	for ev, err := range r.Events() {
		require.NoError(t, err)
		p, perr := wire.ParsePacket(ev.Packet)
		require.NoError(t, perr)
		seqs = append(seqs, p.Seq)
	}
	require.Equal(t, []wire.Seq{1, 2}, seqs)

	r, err = NewReader(bytes.NewReader(good[:len(good)-3]), Config{})
	require.NoError(t, err)
	var errs []error
	for _, err := range r.Events() {
		errs = append(errs, err)
	}
	require.Len(t, errs, 2)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], ErrTruncatedFile)
}

// TestReadEveryLinkType writes a pcap of each link type with pcapgo and
// reads the datagram back through the Reader.
func TestReadEveryLinkType(t *testing.T) {
	pkt := moldPacket(t, "LINK", 9, "m1", "m2")
	v4, v6 := ipUDP(t, src4, dst4, pkt), ipUDP(t, src6, dst6, pkt)
	ts := time.Unix(1700000000, 42)
	for _, tc := range []struct {
		name string
		lt   LinkType
		data []byte
		dst  netip.AddrPort
	}{
		{"ethernet", LinkEthernet, ethernet(v4), dst4},
		{"ethernet-802.1Q-ipv6", LinkEthernet, ethernet(v6, etherTypeVLAN), dst6},
		{"ethernet-QinQ", LinkEthernet, ethernet(v4, etherTypeQinQ, etherTypeVLAN), dst4},
		{"sll", LinkSLL, sll(v4), dst4},
		{"sll2-ipv6", LinkSLL2, sll2(v6), dst6},
		{"raw", LinkRaw, v6, dst6},
		{"ipv4", LinkIPv4, v4, dst4},
		{"ipv6", LinkIPv6, v6, dst6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, st := readAll(t, writePcap(t, tc.lt, true, frame{ts: ts, data: tc.data}), Config{})
			require.Len(t, evs, 1, "skipped %v", st.Skipped)
			require.Equal(t, pkt, evs[0].Packet)
			require.Equal(t, tc.dst, evs[0].Dst)
			require.Equal(t, ts.UnixNano(), evs[0].Time)
		})
	}
	t.Run("unknown link type", func(t *testing.T) {
		evs, st := readAll(t, writePcap(t, LinkType(147), true, frame{ts: ts, data: v4}), Config{})
		require.Empty(t, evs)
		require.EqualValues(t, 1, st.Skip(ReasonLinkType))
	})
}
