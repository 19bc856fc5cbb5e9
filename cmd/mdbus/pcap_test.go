package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/tools/pcap"
	"github.com/mdbus/mdbus/wire"
)

const sharedCapture = "../../wire/testdata/nasdaq-itch50-multiple-packets.pcap"

func readEvents(t *testing.T, file string) []pcap.Event {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	r, err := pcap.NewReader(f, pcap.Config{})
	require.NoError(t, err)
	var evs []pcap.Event
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return evs
		}
		require.NoError(t, err)
		ev.Packet = bytes.Clone(ev.Packet)
		evs = append(evs, ev)
	}
}

// TestPcapCommandRoundTrip: mdbus pcap import, then export, gives back the
// captured MoldUDP64 packets byte for byte, with their times and addresses.
func TestPcapCommandRoundTrip(t *testing.T) {
	dir := t.TempDir()
	jdir, out := filepath.Join(dir, "j"), filepath.Join(dir, "x.pcap")
	var stdout, stderr bytes.Buffer
	code := run([]string{"mdbus", "pcap", "import", sharedCapture, "--journal", jdir, "--port", "26477"}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	require.Contains(t, stdout.String(), "39 messages appended")
	require.Contains(t, stdout.String(), "gaps: 1")

	stdout.Reset()
	code = run([]string{"mdbus", "pcap", "import", "--journal", jdir, sharedCapture}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	require.Contains(t, stdout.String(), "0 messages appended, 39 already held")

	code = run([]string{"mdbus", "pcap", "export", "--journal", jdir, "--out", out, "--group", "233.54.12.111:26477"}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	require.Equal(t, readEvents(t, sharedCapture), readEvents(t, out))

	code = run([]string{"mdbus", "pcap", "export", "--journal", jdir, "--out", out, "--session", "000010059B", "--from", "19009120", "--to", "19009129"}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	evs := readEvents(t, out)
	require.Len(t, evs, 1)
}

func TestPcapCommandErrors(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pcap")
	require.NoError(t, os.WriteFile(junk, []byte("definitely not a capture"), 0o644))
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"pcap"}, 2, "want a subcommand"},
		{[]string{"pcap", "import", sharedCapture}, 2, "--journal"},
		{[]string{"pcap", "import", "--journal", dir}, 2, "no capture FILE"},
		{[]string{"pcap", "import", junk, "--journal", filepath.Join(dir, "j")}, 1, "junk.pcap: pcap: not a pcap or pcapng file"},
		{[]string{"pcap", "import", sharedCapture, "--journal", filepath.Join(dir, "j"), "--gaps", "maybe"}, 2, "--gaps"},
		{[]string{"pcap", "import", sharedCapture, "--journal", filepath.Join(dir, "j2"), "--gaps", "fail"}, 1, "messages 14764497..19009116 missing"},
		{[]string{"pcap", "import", sharedCapture, "--group", "239.192.0.1:31001", "--speed", "0"}, 2, "--max sends as fast as possible"},
		{[]string{"pcap", "import", sharedCapture, "--group", "239.192.0.1:31001", "--speed", "2", "--max"}, 2, "give --speed or --max, not both"},
		{[]string{"pcap", "import", sharedCapture, "--journal", filepath.Join(dir, "j3"), "--max-streams", "-1"}, 2, "-max-streams: \"-1\" is negative"},
		{[]string{"pcap", "export", "--journal", dir}, 2, "--out"},
		{[]string{"pcap", "export", "--journal", filepath.Join(dir, "j"), "--out", filepath.Join(dir, "o.pcap"), "--from", "yesterday"}, 2, "RFC 3339"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"mdbus"}, tc.args...), &stdout, &stderr)
		require.Equal(t, tc.code, code, "%v: %s", tc.args, stderr.String())
		require.Contains(t, stderr.String(), tc.want, "%v", tc.args)
	}
}

// writeEvents writes evs as a capture.
func writeEvents(t *testing.T, file string, evs ...pcap.Event) {
	t.Helper()
	var buf bytes.Buffer
	w, err := pcap.NewWriter(&buf)
	require.NoError(t, err)
	for _, ev := range evs {
		require.NoError(t, w.WritePacket(ev.Time, ev.Src, ev.Dst, ev.Packet))
	}
	require.NoError(t, os.WriteFile(file, buf.Bytes(), 0o644))
}

// TestPcapImportSeveralCaptures (issue 18 item 9): captures given in an
// order other than their time order are read in time order (the shared
// capture's two packets, split into two files whose names sort the wrong
// way round, are both journaled); captures that overlap in time, so that a
// message arrives after its stream was split, are reported with exit 1.
func TestPcapImportSeveralCaptures(t *testing.T) {
	evs := readEvents(t, "../../../shared/testdata/nasdaq-itch50-multiple-packets.pcap")
	require.Len(t, evs, 2)
	dir := t.TempDir()
	second, first := filepath.Join(dir, "a.pcap"), filepath.Join(dir, "b.pcap")
	writeEvents(t, second, evs[1])
	writeEvents(t, first, evs[0])
	var stdout, stderr bytes.Buffer
	code := run([]string{"mdbus", "pcap", "import", second, first, "--journal", filepath.Join(dir, "j")}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	require.Contains(t, stdout.String(), "reading the captures in the order of their first packet's time: "+first+" "+second)
	require.Contains(t, stdout.String(), "39 messages appended, 0 already held, 0 duplicates, 0 late")

	// Overlapping captures: x holds sequences 1 and 3, y sequence 2,
	// captured between them; without a reorder window 2 is late.
	pkt := func(seq wire.Seq, ms int64) pcap.Event {
		var e wire.Encoder
		s, _ := wire.ParseSession("OVER")
		e.Reset(nil, s, seq, wire.MaxPayloadSize)
		require.NoError(t, e.Add([]byte("m")))
		return pcap.Event{Time: 1_700_000_000e9 + ms*1e6, Src: evs[0].Src, Dst: evs[0].Dst, Packet: bytes.Clone(e.Bytes())}
	}
	x, y := filepath.Join(dir, "x.pcap"), filepath.Join(dir, "y.pcap")
	writeEvents(t, x, pkt(1, 0), pkt(3, 2))
	writeEvents(t, y, pkt(2, 1))
	stdout.Reset()
	stderr.Reset()
	code = run([]string{"mdbus", "pcap", "import", y, x, "--reorder", "0", "--journal", filepath.Join(dir, "j2")}, &stdout, &stderr)
	require.Equal(t, 1, code, stdout.String())
	require.Contains(t, stdout.String(), "2 messages appended, 0 already held, 0 duplicates, 1 late")
	require.Contains(t, stderr.String(), "1 messages skipped as late")
	// The reorder window spans the files: with it, nothing is late.
	stdout.Reset()
	code = run([]string{"mdbus", "pcap", "import", y, x, "--journal", filepath.Join(dir, "j3")}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	require.Contains(t, stdout.String(), "3 messages appended, 0 already held, 0 duplicates, 0 late")
}
