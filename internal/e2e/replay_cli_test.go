//go:build linux

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// buildMdbus builds the mdbus binary into a temporary directory.
func buildMdbus(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mdbus")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/mdbus/mdbus/cmd/mdbus").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// opsLab is the start of every test that runs mdbus processes: inside
// the lab, not under -short, a temporary directory, the mdbus binary
// (buildMdbus) and a counters directory in it.
func opsLab(t *testing.T) (tmp, bin, ctr string) {
	t.Helper()
	netlab.Require(t)
	if testing.Short() {
		t.Skip("builds and runs the mdbus binary")
	}
	tmp = t.TempDir()
	return tmp, buildMdbus(t), filepath.Join(tmp, "counters")
}

// writeJournal writes a journal in a new temporary directory holding one
// stream of session, from 127.0.0.1:7, incarnation 1, with the records
// recs (ended at the sequence after the last when end is set), and
// returns the directory.
func writeJournal(t *testing.T, session string, recs []journal.Record, end bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "src")
	j, err := journal.Open(dir, journal.Config{})
	require.NoError(t, err)
	sess, err := wire.ParseSession(session)
	require.NoError(t, err)
	w, err := j.Create(sess, netip.MustParseAddrPort("127.0.0.1:7"), 1)
	require.NoError(t, err)
	for _, r := range recs {
		require.NoError(t, w.Append(r.Seq, r.Time, r.Data))
	}
	if end {
		require.NoError(t, w.End(recs[len(recs)-1].Seq+1))
	}
	require.NoError(t, w.Close())
	require.NoError(t, j.Close())
	return dir
}

// TestReplayRecordCLI: mdbus replay prints a journal as JSON lines and
// text, and mdbus record journals what mdbus replay publishes, so that
// record -> replay -> record gives back the same messages, sequences and
// session.
func TestReplayRecordCLI(t *testing.T) {
	_, bin, _ := opsLab(t)
	const n = 2000
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).UnixNano()
	msg := func(i int) []byte { return fmt.Appendf(nil, "message %d %s", i, strings.Repeat("x", i%50)) }
	var recs []journal.Record
	for i := 1; i <= n; i++ {
		recs = append(recs, journal.Record{Seq: wire.Seq(i), Time: t0 + int64(i)*int64(time.Microsecond), Data: msg(i)})
	}
	src := writeJournal(t, "CLI", recs, true)

	out, err := exec.Command(bin, "replay", "--journal", src, "--print", "json", "--to", "2", "--progress", "0").Output()
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, 2)
	var rec struct {
		Session string `json:"session"`
		Seq     uint64 `json:"seq"`
		TimeNS  int64  `json:"time_ns"`
		Hex     string `json:"hex"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &rec))
	require.Equal(t, "CLI", rec.Session)
	require.Equal(t, uint64(2), rec.Seq)
	require.Equal(t, t0+2000, rec.TimeNS)
	require.Equal(t, fmt.Sprintf("%x", msg(2)), rec.Hex)
	out, err = exec.Command(bin, "replay", "--journal", src, "--print", "text", "--from", "7", "--to", "7", "--progress", "0").Output()
	require.NoError(t, err)
	require.Equal(t, "CLI 7 2026-11-30T12:00:00.000007Z "+string(msg(7))+"\n", string(out))

	// record <- replay
	dst := filepath.Join(t.TempDir(), "dst")
	group := "239.192.30.1:32110"
	logs := t.TempDir()
	recCmd := exec.Command(bin, "record", "--group", group, "--journal", dst, "--stats", "50ms")
	stdout, err := os.Create(filepath.Join(logs, "stdout"))
	require.NoError(t, err)
	stderr, err := os.Create(filepath.Join(logs, "stderr"))
	require.NoError(t, err)
	recCmd.Stdout, recCmd.Stderr = stdout, stderr
	require.NoError(t, recCmd.Start())
	defer recCmd.Process.Kill()
	waitFile := func(name, want string) {
		t.Helper()
		waitFor(t, 30*time.Second, func() bool {
			b, _ := os.ReadFile(filepath.Join(logs, name))
			return strings.Contains(string(b), want)
		})
	}
	waitFile("stderr", "mdbus record: journaling") // printed once joined
	out, err = exec.Command(bin, "replay", "--journal", src, "--group", group, "--rate", "20000", "--progress", "0").CombinedOutput()
	require.NoError(t, err, "%s", out)
	waitFile("stdout", fmt.Sprintf("journaled %d msgs", n))
	waitFile("stdout", "1 incarnations, 1 ended")
	require.NoError(t, recCmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, recCmd.Wait())
	b, _ := os.ReadFile(filepath.Join(logs, "stderr"))
	t.Logf("record: %s", strings.TrimSpace(string(b)))

	j2, err := journal.Open(dst, journal.Config{ReadOnly: true})
	require.NoError(t, err)
	defer j2.Close()
	streams := j2.Streams()
	require.Len(t, streams, 1)
	session, _ := wire.ParseSession("CLI")
	require.Equal(t, session, streams[0].ID.Session)
	require.Equal(t, wire.Seq(1), streams[0].First)
	require.Equal(t, wire.Seq(n+1), streams[0].Next)
	require.True(t, streams[0].Ended, "the replay's end of session was recorded")
	r, err := j2.OpenReader(streams[0].ID)
	require.NoError(t, err)
	defer r.Close()
	for i := 1; i <= n; i++ {
		rec, err := r.Next()
		require.NoError(t, err)
		require.Equal(t, wire.Seq(i), rec.Seq)
		require.Equal(t, string(msg(i)), string(rec.Data))
	}
	_, err = r.Next()
	require.True(t, errors.Is(err, io.EOF))
}
