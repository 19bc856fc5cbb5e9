package wire_test

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/wire"
)

// Test data files; see testdata/README.md for their format and provenance.
const (
	goldenDir   = "testdata/golden"
	capturePcap = "testdata/nasdaq-itch50-multiple-packets.pcap"
	captureBin  = "testdata/nasdaq-itch50-1000-messages.bin"
)

// sentinels maps the names used in golden files to the package's errors.
var sentinels = map[string]error{
	"ErrShortHeader":      wire.ErrShortHeader,
	"ErrTruncatedMessage": wire.ErrTruncatedMessage,
	"ErrTrailingBytes":    wire.ErrTrailingBytes,
	"ErrEndOfSessionData": wire.ErrEndOfSessionData,
	"ErrHeartbeatData":    wire.ErrHeartbeatData,
	"ErrZeroSeq":          wire.ErrZeroSeq,
	"ErrSeqOverflow":      wire.ErrSeqOverflow,
	"ErrBadSession":       wire.ErrBadSession,
	"ErrRequestLen":       wire.ErrRequestLen,
	"ErrZeroCount":        wire.ErrZeroCount,
}

// isSentinel reports whether err matches one of the decoders' sentinels.
func isSentinel(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// golden is one hand-built vector from testdata/golden.
type golden struct {
	name    string
	kind    string // "packet" or "request"
	want    string // "ok" or a key of sentinels
	session *wire.Session
	seq     *wire.Seq
	count   *uint16
	msgs    [][]byte
	data    []byte
}

// loadGoldens reads every testdata/golden/*.hex file, sorted by name.
func loadGoldens(tb testing.TB) []golden {
	tb.Helper()
	paths, err := filepath.Glob(filepath.Join(goldenDir, "*.hex"))
	require.NoError(tb, err)
	require.NotEmpty(tb, paths, "no golden files in %s", goldenDir)
	sort.Strings(paths)
	gs := make([]golden, 0, len(paths))
	for _, p := range paths {
		g, err := parseGolden(p)
		require.NoError(tb, err)
		gs = append(gs, g)
	}
	return gs
}

// parseGolden parses one golden file: "key: value" lines, then a "hex:" line
// and the datagram as hex digits. Everything after '#' on a line is a
// comment; blank lines are ignored.
func parseGolden(path string) (golden, error) {
	g := golden{name: strings.TrimSuffix(filepath.Base(path), ".hex")}
	f, err := os.Open(path)
	if err != nil {
		return g, err
	}
	defer f.Close()
	var hexDigits strings.Builder
	inHex := false
	sc := bufio.NewScanner(f)
	for lineNo := 1; sc.Scan(); lineNo++ {
		line := sc.Text()
		if inHex {
			if i := strings.IndexByte(line, '#'); i >= 0 {
				line = line[:i]
			}
			hexDigits.WriteString(strings.Join(strings.Fields(line), ""))
			continue
		}
		// Values may be quoted strings containing '#', so strip comments
		// only outside quotes: a value is either a quoted string or a word.
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || trimmed[0] == '#' {
			continue
		}
		key, rest, ok := strings.Cut(trimmed, ":")
		if !ok {
			return g, fmt.Errorf("%s:%d: want \"key: value\", got %q", path, lineNo, line)
		}
		val, err := goldenValue(strings.TrimSpace(rest))
		if err != nil {
			return g, fmt.Errorf("%s:%d: %v", path, lineNo, err)
		}
		switch key {
		case "kind":
			g.kind = val
		case "want":
			g.want = val
		case "session":
			s, err := wire.ParseSession(val)
			if err != nil {
				return g, fmt.Errorf("%s:%d: %v", path, lineNo, err)
			}
			g.session = &s
		case "seq":
			n, err := strconv.ParseUint(val, 10, 64)
			if err != nil {
				return g, fmt.Errorf("%s:%d: %v", path, lineNo, err)
			}
			s := wire.Seq(n)
			g.seq = &s
		case "count":
			n, err := strconv.ParseUint(val, 10, 16)
			if err != nil {
				return g, fmt.Errorf("%s:%d: %v", path, lineNo, err)
			}
			c := uint16(n)
			g.count = &c
		case "msg":
			g.msgs = append(g.msgs, []byte(val))
		case "hex":
			if val != "" {
				return g, fmt.Errorf("%s:%d: hex: must end its line", path, lineNo)
			}
			inHex = true
		default:
			return g, fmt.Errorf("%s:%d: unknown key %q", path, lineNo, key)
		}
	}
	if err := sc.Err(); err != nil {
		return g, err
	}
	if !inHex {
		return g, fmt.Errorf("%s: no hex: section", path)
	}
	if g.data, err = hex.DecodeString(hexDigits.String()); err != nil {
		return g, fmt.Errorf("%s: %v", path, err)
	}
	if g.kind != "packet" && g.kind != "request" {
		return g, fmt.Errorf("%s: kind %q, want packet or request", path, g.kind)
	}
	if _, ok := sentinels[g.want]; !ok && g.want != "ok" {
		return g, fmt.Errorf("%s: want %q, want ok or a sentinel name", path, g.want)
	}
	if g.want == "ok" && (g.session == nil || g.seq == nil || g.count == nil) {
		return g, fmt.Errorf("%s: a valid vector needs session, seq and count", path)
	}
	return g, nil
}

// goldenValue returns a value as written: a Go-quoted string (which may hold
// '#' and escapes), or a bare word with any trailing comment removed.
func goldenValue(s string) (string, error) {
	if strings.HasPrefix(s, `"`) {
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return "", fmt.Errorf("bad string %s: %v", s, err)
		}
		if tail := strings.TrimSpace(s[len(q):]); tail != "" && tail[0] != '#' {
			return "", fmt.Errorf("text after string: %q", tail)
		}
		return strconv.Unquote(q)
	}
	if i := strings.IndexByte(s, '#'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s), nil
}

// udpDatagram is the payload of one UDP packet in a capture.
type udpDatagram struct {
	dstPort uint16
	payload []byte
}

// readPcapUDP extracts the UDP payloads from a nanosecond-resolution pcap of
// Ethernet (optionally 802.1Q-tagged) IPv4 frames. It parses only what the
// test needs and fails on anything else rather than guessing.
func readPcapUDP(tb testing.TB, path string) []udpDatagram {
	tb.Helper()
	b, err := os.ReadFile(path)
	require.NoError(tb, err)

	// Global header, 24 bytes: magic, version major/minor, thiszone,
	// sigfigs, snaplen, link type.
	const globalLen, recordLen = 24, 16
	require.GreaterOrEqual(tb, len(b), globalLen, "pcap global header")
	var bo binary.ByteOrder
	switch {
	case binary.LittleEndian.Uint32(b) == 0xa1b23c4d:
		bo = binary.LittleEndian
	case binary.BigEndian.Uint32(b) == 0xa1b23c4d:
		bo = binary.BigEndian
	default:
		tb.Fatalf("pcap magic %#x: want nanosecond pcap 0xa1b23c4d", binary.LittleEndian.Uint32(b))
	}
	require.Equal(tb, uint32(1), bo.Uint32(b[20:]), "pcap link type: want Ethernet")

	var out []udpDatagram
	for off := globalLen; off < len(b); {
		// Record header, 16 bytes: ts_sec, ts_nsec, incl_len, orig_len.
		require.GreaterOrEqual(tb, len(b)-off, recordLen, "pcap record header at %d", off)
		incl := int(bo.Uint32(b[off+8:]))
		orig := int(bo.Uint32(b[off+12:]))
		require.Equal(tb, orig, incl, "pcap record at %d is truncated by snaplen", off)
		off += recordLen
		require.GreaterOrEqual(tb, len(b)-off, incl, "pcap record data at %d", off)
		frame := b[off : off+incl]
		off += incl

		// Ethernet: dst(6) src(6) type(2), with any 802.1Q/802.1ad tags.
		require.GreaterOrEqual(tb, len(frame), 14)
		etype, l3 := binary.BigEndian.Uint16(frame[12:]), 14
		for etype == 0x8100 || etype == 0x88a8 {
			require.GreaterOrEqual(tb, len(frame), l3+4)
			etype = binary.BigEndian.Uint16(frame[l3+2:])
			l3 += 4
		}
		require.Equal(tb, uint16(0x0800), etype, "ethertype: want IPv4")

		// IPv4: version/IHL, total length, flags/fragment offset, protocol.
		ip := frame[l3:]
		require.GreaterOrEqual(tb, len(ip), 20)
		require.Equal(tb, byte(4), ip[0]>>4, "IP version")
		ihl := int(ip[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(ip[2:]))
		require.GreaterOrEqual(tb, ihl, 20)
		require.LessOrEqual(tb, total, len(ip))
		require.GreaterOrEqual(tb, total, ihl+8)
		require.Zero(tb, binary.BigEndian.Uint16(ip[6:])&0x3fff, "IPv4 fragment")
		require.Equal(tb, byte(17), ip[9], "IP protocol: want UDP")

		// UDP: src port, dst port, length (header included), checksum.
		udp := ip[ihl:total]
		udpLen := int(binary.BigEndian.Uint16(udp[4:]))
		require.Equal(tb, len(udp), udpLen, "UDP length")
		out = append(out, udpDatagram{
			dstPort: binary.BigEndian.Uint16(udp[2:]),
			payload: udp[8:udpLen:udpLen],
		})
	}
	return out
}

// readBlocks splits a MoldUDP64 message-block stream (2-byte big-endian
// length, then the message) into its messages.
func readBlocks(tb testing.TB, path string) [][]byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	require.NoError(tb, err)
	var msgs [][]byte
	for off := 0; off < len(b); {
		require.GreaterOrEqual(tb, len(b)-off, wire.MsgLenLen, "block length at %d", off)
		n := int(binary.BigEndian.Uint16(b[off:]))
		off += wire.MsgLenLen
		require.GreaterOrEqual(tb, len(b)-off, n, "block at %d", off)
		msgs = append(msgs, b[off:off+n:off+n])
		off += n
	}
	return msgs
}

// encodePacket encodes msgs as one packet with a payload limit of
// payloadSize, failing the test if they do not fit.
func encodePacket(tb testing.TB, s wire.Session, seq wire.Seq, payloadSize int, msgs ...[]byte) []byte {
	tb.Helper()
	var enc wire.Encoder
	enc.Reset(nil, s, seq, payloadSize)
	for i, m := range msgs {
		require.NoError(tb, enc.Add(m), "message %d", i)
	}
	return enc.Bytes()
}

// collect returns the messages of p and checks their sequence numbers.
func collect(tb testing.TB, p wire.Packet) [][]byte {
	tb.Helper()
	var msgs [][]byte
	it := p.Messages()
	for {
		m, seq, ok := it.Next()
		if !ok {
			break
		}
		require.Equal(tb, p.Seq+wire.Seq(len(msgs)), seq, "sequence of message %d", len(msgs))
		msgs = append(msgs, m)
	}
	return msgs
}

// mustSession is ParseSession for constants.
func mustSession(tb testing.TB, s string) wire.Session {
	tb.Helper()
	sess, err := wire.ParseSession(s)
	require.NoError(tb, err)
	return sess
}
