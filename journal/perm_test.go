//go:build unix

package journal

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// modes lists the permission of everything under dir, by path.
func modes(t *testing.T, dir string) map[string]fs.FileMode {
	t.Helper()
	out := map[string]fs.FileMode{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		fi, err := d.Info()
		require.NoError(t, err)
		out[p] = fi.Mode().Perm()
		return nil
	}))
	return out
}

// TestPermissions: journal files and directories are owner-only by
// default whatever the umask, a wider Perm is set exactly, and compaction
// and repair keep a segment's mode.
func TestPermissions(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	for _, c := range []struct {
		perm, file, dir fs.FileMode
	}{{0, 0o600, 0o700}, {0o640, 0o640, 0o750}} {
		dir := filepath.Join(t.TempDir(), "j")
		j := openJ(t, dir, Config{Sync: SyncNone, SegmentBytes: MinSegmentBytes, Perm: c.perm})
		w, err := j.Create(testSession, testSource, 1)
		require.NoError(t, err)
		appendN(t, w, 1, 10_000)
		require.NoError(t, w.End(w.Next()))
		require.NoError(t, w.Close())
		n, err := j.Compact()
		require.NoError(t, err)
		require.NotZero(t, n)
		require.NoError(t, j.Close())
		for p, m := range modes(t, dir) {
			fi, err := os.Lstat(p)
			require.NoError(t, err)
			if fi.IsDir() {
				require.Equal(t, c.dir, m, p)
			} else {
				require.Equal(t, c.file, m, p)
			}
		}
	}
}
