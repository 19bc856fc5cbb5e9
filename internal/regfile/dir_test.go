//go:build unix

package regfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

var errNotPrivate = errors.New("x: not private")

// TestPrivateDir: MkdirPrivate makes a 0700 directory; CheckDir refuses
// a link or a file, CheckMode a directory others may write to, each
// wrapping the caller's error.
func TestPrivateDir(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "a", "b")
	require.NoError(t, MkdirPrivate(dir))
	require.NoError(t, MkdirPrivate(dir), "an existing directory is fine")
	fi, err := CheckDir(dir, errNotPrivate)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	require.NoError(t, CheckMode(dir, fi, errNotPrivate))

	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(dir, link))
	_, err = CheckDir(link, errNotPrivate)
	require.ErrorIs(t, err, errNotPrivate)
	require.ErrorContains(t, err, "symbolic link")

	file := filepath.Join(base, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err = CheckDir(file, errNotPrivate)
	require.ErrorIs(t, err, errNotPrivate)
	require.ErrorContains(t, err, "not a directory")

	_, err = CheckDir(filepath.Join(base, "missing"), errNotPrivate)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.NotErrorIs(t, err, errNotPrivate)

	require.NoError(t, os.Chmod(dir, 0o770))
	fi, err = CheckDir(dir, errNotPrivate)
	require.NoError(t, err)
	err = CheckMode(dir, fi, errNotPrivate)
	require.ErrorIs(t, err, errNotPrivate)
	require.ErrorContains(t, err, "mode 0770")
}
