package itch_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/tools/itch"
	"github.com/mdbus/mdbus/tools/pcap"
	"github.com/mdbus/mdbus/wire"
)

// Cross-check against Wireshark's dissectors, run as tshark: a decoder
// written without ours in view, on the same bytes.
//
// What Wireshark's built-in dissectors can check (Wireshark 4.0, the one
// Debian 12 and .ci/run install):
//
//   - moldudp64 reads the MoldUDP64 framing: session, sequence and count
//     of every packet, and the sequence, length and bytes of every message.
//     Every one of them is compared with what tools/pcap and wire hand to
//     our decoder, so the bytes we decode are the messages Wireshark sees.
//   - nasdaq_itch ("Nasdaq TotalView-ITCH") implements TotalView-ITCH 2.00
//     and 3.00, not 5.0: it says so in its source header and labels every
//     message "Nasdaq TotalView-ITCH 3.0" (field nasdaq-itch.version = 3).
//     ITCH 3.0 is an ASCII protocol (order reference 9 digits, shares 6,
//     stock 6 characters, price 10 digits, time in separate T and M
//     messages). ITCH 5.0 is binary ("Data Types": big-endian integers,
//     Price(4) with 4 implied decimals, 8-character stock), and every
//     message carries stock locate (2 bytes), tracking number (2) and a
//     6-byte nanosecond timestamp after its type ("Message Formats"). So
//     past the type byte the two read different bytes with different
//     rules: on 5.0 bytes its order_reference, buy_sell, shares, stock and
//     price are ASCII readings of binary fields (0 and mojibake), and it
//     has no stock locate, tracking number or timestamp field at all. The
//     one field both decoders expose with one meaning is the message type
//     (byte 0 in every ITCH version), compared for every message. ITCH 5.0
//     types unknown to 3.0 (R Y L V W K J h U N O ...) still carry their
//     type byte in nasdaq-itch.message_type.
//   - Each message's length in the feed's own framing (moldudp64.msglen) is
//     compared with the length of its type in our layout table: NASDAQ's
//     encoder and our reading of the specification agree on every type
//     present.
//
// If a later Wireshark reports another nasdaq_itch version the test fails,
// so that the comparison is extended to the new fields rather than left
// thin without notice.

// tsharkPort is the UDP destination port of both captures (the one of
// testdata/nasdaq-itch50-multiple-packets.pcap).
const tsharkPort = 26477

// tsharkTimeout bounds one tshark run; each takes well under a second.
const tsharkTimeout = 2 * time.Minute

// builtinITCHVersion is the ITCH version Wireshark's nasdaq_itch dissector
// reports for messages that do not start with a digit.
const builtinITCHVersion = "3"

// moldMsg is one message of a capture and the packet that carried it.
type moldMsg struct {
	frame   int    // capture frame, from 1
	session string // MoldUDP64 session, padding kept
	pktSeq  uint64 // sequence of the packet's first message
	count   int    // messages in the packet
	seq     uint64 // the message's sequence
	data    []byte // the message
}

func (m moldMsg) String() string { return fmt.Sprintf("frame %d seq %d", m.frame, m.seq) }

// TestTshark compares tools/pcap + wire + itch with tshark on the real
// capture (2 packets, 39 messages) and on the 1,000-message sample wrapped
// in MoldUDP64 packets.
func TestTshark(t *testing.T) {
	bin := tsharkPath(t)
	for _, c := range []struct{ name, path string }{
		{"capture", "testdata/nasdaq-itch50-multiple-packets.pcap"},
		{"sample", samplePcap(t)},
	} {
		t.Run(c.name, func(t *testing.T) {
			ours := readCapture(t, c.path)
			require.NotEmpty(t, ours)
			framing := compareFraming(t, bin, c.path, ours)
			types := compareBuiltinITCH(t, bin, c.path, ours)
			t.Logf("%d messages in %d frames: %d framing values and %d ITCH values equal to tshark's", len(ours), ours[len(ours)-1].frame, framing, types)
		})
	}
}

// tsharkPath finds tshark, or skips (fails under CI=true, where .ci/run
// installs it).
func tsharkPath(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("tshark")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("tshark not on PATH under CI (.ci/run installs it): %v", err)
		}
		t.Skipf("tshark not on PATH (apt-get install tshark): %v", err)
	}
	return bin
}

// samplePcap writes testdata/nasdaq-itch50-1000-messages.bin as MoldUDP64
// packets of at most 1400 bytes in a pcap, and returns its path.
func samplePcap(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sample.pcap")
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	w, err := pcap.NewWriter(f)
	require.NoError(t, err)
	sess, err := wire.ParseSession("SAMPLE")
	require.NoError(t, err)
	// Addresses are bytes in a file: nothing is sent.
	src := netip.MustParseAddrPort("192.0.2.1:49653")
	dst := netip.MustParseAddrPort("233.54.12.111:" + strconv.Itoa(tsharkPort))
	const maxPayload = 1400
	var pkt []byte
	next, count := wire.Seq(1), 0
	ts := time.Date(2019, 12, 30, 14, 30, 0, 0, time.UTC).UnixNano()
	flush := func() {
		if count == 0 {
			return
		}
		hdr := wire.AppendHeader(nil, wire.Header{Session: sess, Seq: next, Count: uint16(count)})
		require.NoError(t, w.WritePacket(ts, src, dst, append(hdr, pkt...)))
		next += wire.Seq(count)
		pkt, count, ts = pkt[:0], 0, ts+1000
	}
	for _, m := range sample(t) {
		if wire.PacketLen(count+1, len(pkt)+len(m)) > maxPayload {
			flush()
		}
		pkt = append(pkt, byte(len(m)>>8), byte(len(m)))
		pkt = append(pkt, m...)
		count++
	}
	flush()
	require.NoError(t, f.Close())
	return path
}

// readCapture reads every message of a capture as the CLI does: tools/pcap
// finds the MoldUDP64 datagrams, wire splits them.
func readCapture(t *testing.T, path string) []moldMsg {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	r, err := pcap.NewReader(f, pcap.Config{Name: path, Ports: []uint16{tsharkPort}})
	require.NoError(t, err)
	var out []moldMsg
	for ev, err := range r.Events() {
		require.NoError(t, err)
		p, err := wire.ParsePacket(ev.Packet)
		require.NoError(t, err, "frame %d", ev.Frame)
		it := p.Messages()
		for msg, seq, ok := it.Next(); ok; msg, seq, ok = it.Next() {
			out = append(out, moldMsg{
				frame: int(ev.Frame), session: string(p.Session[:]), pktSeq: uint64(p.Seq),
				count: int(p.Count), seq: uint64(seq), data: bytes.Clone(msg),
			})
		}
	}
	return out
}

// tshark runs tshark on path with MoldUDP64 on tsharkPort, fields output
// (one line per frame, tab-separated, repeated fields joined by commas) of
// the given fields, and returns the lines split into fields. It reads no
// user preferences and resolves no names.
func tshark(t *testing.T, bin, path string, extra []string, fields ...string) [][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), tsharkTimeout)
	defer cancel()
	args := []string{"-n", "-r", path,
		"-d", "udp.port==" + strconv.Itoa(tsharkPort) + ",moldudp64",
		"-T", "fields", "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=,"}
	args = append(args, extra...)
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	// An empty configuration directory: no personal Decode As or
	// preference changes the dissection.
	cmd.Env = append(os.Environ(), "WIRESHARK_CONFIG_DIR="+t.TempDir())
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("tshark %s: no answer in %v", strings.Join(args, " "), tsharkTimeout)
	}
	require.NoError(t, err, "tshark %s: %s", strings.Join(args, " "), stderr.String())
	var rows [][]string
	for line := range strings.SplitSeq(strings.TrimRight(string(out), "\n"), "\n") {
		row := strings.Split(line, "\t")
		require.Len(t, row, len(fields), "tshark line %q: want fields %v", line, fields)
		rows = append(rows, row)
	}
	return rows
}

// byFrame groups messages by capture frame, in order.
func byFrame(msgs []moldMsg) map[int][]moldMsg {
	out := map[int][]moldMsg{}
	for _, m := range msgs {
		out[m.frame] = append(out[m.frame], m)
	}
	return out
}

// compareFraming checks tshark's MoldUDP64 reading of every packet and
// message against ours; it returns the number of values compared.
func compareFraming(t *testing.T, bin, path string, ours []moldMsg) int {
	t.Helper()
	rows := tshark(t, bin, path, nil, "frame.number", "moldudp64.session", "moldudp64.sequence",
		"moldudp64.count", "moldudp64.msgseq", "moldudp64.msglen", "moldudp64.msgdata")
	frames := byFrame(ours)
	compared, seen := 0, 0
	for _, row := range rows {
		frame, err := strconv.Atoi(row[0])
		require.NoError(t, err)
		msgs := frames[frame]
		if row[1] == "" { // not MoldUDP64 on our port: neither side reads it
			require.Empty(t, msgs, "frame %d: we read messages tshark does not", frame)
			continue
		}
		require.NotEmpty(t, msgs, "frame %d: tshark reads MoldUDP64 we do not: %q", frame, row)
		first := msgs[0]
		require.Equal(t, first.session, row[1], "frame %d: session", frame)
		require.Equal(t, strconv.FormatUint(first.pktSeq, 10), row[2], "frame %d: packet sequence", frame)
		require.Equal(t, strconv.Itoa(first.count), row[3], "frame %d: count", frame)
		seqs, lens, datas := strings.Split(row[4], ","), strings.Split(row[5], ","), strings.Split(row[6], ",")
		require.Len(t, seqs, len(msgs), "frame %d: messages", frame)
		require.Len(t, lens, len(msgs), "frame %d: lengths", frame)
		require.Len(t, datas, len(msgs), "frame %d: payloads", frame)
		for i, m := range msgs {
			require.Equal(t, strconv.FormatUint(m.seq, 10), seqs[i], "%v: sequence", m)
			require.Equal(t, strconv.Itoa(len(m.data)), lens[i], "%v: length", m)
			require.Equal(t, hex.EncodeToString(m.data), datas[i], "%v: bytes", m)
		}
		compared += 3 + 3*len(msgs)
		seen += len(msgs)
	}
	require.Equal(t, len(ours), seen, "messages tshark and we read")
	return compared
}

// compareBuiltinITCH checks Wireshark's nasdaq_itch dissector against our
// decoder on every message: the type both expose, the dissector's version
// (see the comment at the top), and the feed's length of each message
// against our length for its type. It returns the number of values
// compared.
func compareBuiltinITCH(t *testing.T, bin, path string, ours []moldMsg) int {
	t.Helper()
	rows := tshark(t, bin, path,
		[]string{"-d", "moldudp64.payload,nasdaq_itch", "-o", "nasdaq_itch.chi_x:FALSE"},
		"frame.number", "moldudp64.msgseq", "moldudp64.msglen", "nasdaq-itch.version", "nasdaq-itch.message_type")
	frames := byFrame(ours)
	compared, seen := 0, 0
	for _, row := range rows {
		frame, err := strconv.Atoi(row[0])
		require.NoError(t, err)
		msgs := frames[frame]
		if row[1] == "" {
			continue
		}
		seqs, lens, versions, types := strings.Split(row[1], ","), strings.Split(row[2], ","),
			strings.Split(row[3], ","), strings.Split(row[4], ",")
		require.Len(t, seqs, len(msgs), "frame %d: messages", frame)
		require.Len(t, versions, len(msgs), "frame %d: nasdaq_itch dissected every message", frame)
		require.Len(t, types, len(msgs), "frame %d: a type for every message", frame)
		for i, m := range msgs {
			require.Equal(t, strconv.FormatUint(m.seq, 10), seqs[i], "%v: sequence", m)
			require.Equal(t, builtinITCHVersion, versions[i],
				"%v: Wireshark's nasdaq_itch reports ITCH version %s, not 3.0: extend this comparison to the fields it now decodes", m, versions[i])
			var obj map[string]any
			js := itch.AppendJSON(nil, m.data)
			require.NoError(t, json.Unmarshal(js, &obj), "%v: %s", m, js)
			require.NotContains(t, obj, "error", "%v: %s", m, js)
			// tshark writes a character field as 'A'.
			require.Equal(t, "'"+obj["type"].(string)+"'", types[i], "%v: message type", m)
			require.Equal(t, strconv.Itoa(itch.Length(m.data[0])), lens[i], "%v: the feed's length against ours for type %c", m, m.data[0])
			seen++
		}
		compared += 3 * len(msgs)
	}
	require.Equal(t, len(ours), seen, "messages nasdaq_itch and we decoded")
	return compared
}
