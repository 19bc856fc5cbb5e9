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
		{[]string{"pcap", "export", "--journal", dir}, 2, "--out"},
		{[]string{"pcap", "export", "--journal", filepath.Join(dir, "j"), "--out", filepath.Join(dir, "o.pcap"), "--from", "yesterday"}, 2, "RFC 3339"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"mdbus"}, tc.args...), &stdout, &stderr)
		require.Equal(t, tc.code, code, "%v: %s", tc.args, stderr.String())
		require.Contains(t, stderr.String(), tc.want, "%v", tc.args)
	}
}
