//go:build unix

package regfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestOpenRefusesAllButRegularFiles(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "reg")
	require.NoError(t, os.WriteFile(reg, []byte("x"), 0o600))
	f, fi, err := Open(reg, os.O_RDONLY, 0)
	require.NoError(t, err)
	require.True(t, fi.Mode().IsRegular())
	f.Close()
	uid, ok := Owner(fi)
	require.True(t, ok)
	require.Equal(t, os.Getuid(), uid)

	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(reg, link))
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, tc := range []struct {
		name, path string
		flag       int
	}{
		{"symlink", link, os.O_RDONLY},
		{"fifo-read", fifo, os.O_RDONLY},
		{"fifo-write", fifo, os.O_WRONLY},
		{"directory", dir, os.O_RDONLY},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, _, err := Open(tc.path, tc.flag, 0)
			require.True(t, errors.Is(err, ErrNotRegular), "%v", err)
			require.Less(t, time.Since(start), time.Second, "never blocks")
		})
	}
}

func TestKind(t *testing.T) {
	require.Equal(t, "a FIFO (named pipe)", Kind(os.ModeNamedPipe))
	require.Equal(t, "a regular file", Kind(0))
	require.Equal(t, "a directory", Kind(os.ModeDir))
}
