//go:build unix

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// runBounded runs mdbus with args, failing the test if it does not return
// within 10 s (a FIFO in the journal must never block a command).
func runBounded(t *testing.T, args ...string) (int, string) {
	t.Helper()
	type result struct {
		code int
		out  string
	}
	done := make(chan result, 1)
	go func() {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"mdbus"}, args...), &stdout, &stderr)
		done <- result{code, stdout.String() + stderr.String()}
	}()
	select {
	case r := <-done:
		return r.code, r.out
	case <-time.After(10 * time.Second):
		t.Fatalf("mdbus %v blocked", args)
		return 0, ""
	}
}

// TestJournalVerifyLayout: journal verify exits 1 and names the file when
// a segment is a FIFO, a link, or gone from the middle of a stream, and
// neither it nor list, dump or pcap export blocks on the FIFO.
func TestJournalVerifyLayout(t *testing.T) {
	jdir := filepath.Join(t.TempDir(), "j")
	code, out := runBounded(t, "pcap", "import", sharedCapture, "--journal", jdir, "--port", "26477")
	require.Equal(t, 0, code, out)
	code, out = runBounded(t, "journal", "verify", jdir)
	require.Equal(t, 0, code, out)
	// Owner-only by default.
	require.NoError(t, filepath.WalkDir(jdir, func(p string, d os.DirEntry, err error) error {
		require.NoError(t, err)
		fi, err := d.Info()
		require.NoError(t, err)
		if p != jdir {
			require.Zero(t, fi.Mode().Perm()&0o077, "%s is %v", p, fi.Mode())
		}
		return nil
	}))

	segs, err := filepath.Glob(filepath.Join(jdir, "*", "*.seg"))
	require.NoError(t, err)
	require.NotEmpty(t, segs)
	require.NoError(t, os.Remove(segs[0]))
	require.NoError(t, syscall.Mkfifo(segs[0], 0o600))
	code, out = runBounded(t, "journal", "verify", jdir)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "FIFO (named pipe) in place of a segment")
	require.Contains(t, out, segs[0])
	for _, args := range [][]string{
		{"journal", "list", jdir},
		{"journal", "dump", jdir},
		{"pcap", "export", "--journal", jdir, "--out", filepath.Join(t.TempDir(), "x.pcap")},
	} {
		runBounded(t, args...) // must return; what it says about the gap is its own business
	}

	require.NoError(t, os.Remove(segs[0]))
	require.NoError(t, os.Symlink("/dev/null", segs[0]))
	code, out = runBounded(t, "journal", "verify", jdir)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "symbolic link in place of a segment")
}

func TestJournalWriteFlagErrors(t *testing.T) {
	for _, mode := range []string{"0400", "777x", "01777"} {
		code, out := runBounded(t, "record", "--journal", t.TempDir(), "--journal-mode", mode)
		require.Equal(t, 2, code, "--journal-mode %s: %s", mode, out)
	}
	code, out := runBounded(t, "record", "--journal", t.TempDir(), "--max-streams", "0")
	require.Equal(t, 2, code, out)
}
