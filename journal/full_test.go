//go:build unix

package journal

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/wire"
)

const fullEnvDir = "MDBUS_JOURNAL_FULL_DIR"

// TestFullDiskChild appends until the file size limit (RLIMIT_FSIZE, set
// in this child only) makes a write fail part way, as ENOSPC does.
func TestFullDiskChild(t *testing.T) {
	dir := os.Getenv(fullEnvDir)
	if dir == "" {
		t.Skip("the child of TestFullDisk")
	}
	signal.Ignore(syscall.SIGXFSZ) // the write then fails with EFBIG
	j, err := Open(dir, Config{Sync: SyncNone})
	require.NoError(t, err)
	w, err := j.Create(testSession, testSource, 1)
	require.NoError(t, err)
	const limit = 200_003 // not a record boundary: the last write is cut
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: limit, Max: limit}))
	var buf []byte
	var failed error
	for range 100_000 {
		buf = msgFor(buf, 12, w.Next())
		if failed = w.Append(w.Next(), tsFor(w.Next()), buf); failed != nil {
			break
		}
	}
	require.Error(t, failed)
	require.ErrorIs(t, w.Append(w.Next(), 0, buf), failed, "latched")
	require.ErrorIs(t, w.Sync(), failed)
	require.ErrorIs(t, w.Err(), failed)
	fmt.Printf("next %d err %v\n", w.Next(), failed)
	_ = w.Close()
	_ = j.Close()
}

func TestFullDisk(t *testing.T) {
	if os.Getenv(fullEnvDir) != "" {
		t.Skip("in the child")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFullDiskChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), fullEnvDir+"="+dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var next uint64
	var msg string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if f := strings.SplitN(sc.Text(), " ", 4); len(f) == 4 && f[0] == "next" {
			next, _ = strconv.ParseUint(f[1], 10, 64)
			msg = f[3]
		}
	}
	require.NotZero(t, next, "%s", out)
	require.Contains(t, msg, "file too large")
	require.Contains(t, msg, "journal: write ")
	j := openJ(t, dir, Config{})
	defer j.Close()
	require.Empty(t, j.TornTails(), "the writer cut its partial record itself")
	id, ok := j.Latest(testSession, testSource)
	require.True(t, ok)
	checkStream(t, j, id, 12, 1, wire.Seq(next))
	w, err := j.Resume(id)
	require.NoError(t, err)
	appendN(t, w, 12, 5)
	require.NoError(t, w.Close())
}
