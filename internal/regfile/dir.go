package regfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// A private directory is one a reader may trust the files of: a real
// directory (not a link to one) that no user but its owner may write to,
// so that nobody else can plant, replace or remove what is in it. Each
// caller decides whose it must be and wraps its own ErrNotPrivate.

// MkdirPrivate creates dir mode 0700 if it is missing, and its missing
// parents 0755. It does not check a dir that exists: follow with CheckDir
// and CheckMode.
func MkdirPrivate(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}

// CheckDir returns the FileInfo of dir, not following a link. A link or
// anything but a directory is an error that wraps notPrivate; a failed
// look (a missing dir) is the os error as it is.
func CheckDir(dir string, notPrivate error) (fs.FileInfo, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("%w: %s is a symbolic link (remove it; mdbus creates the directory itself)", notPrivate, dir)
	case !fi.IsDir():
		return nil, fmt.Errorf("%w: %s is not a directory", notPrivate, dir)
	}
	return fi, nil
}

// CheckMode refuses, with an error that wraps notPrivate and says the
// fix, a file or directory (fi, of name) that its group or other users
// may write to.
func CheckMode(name string, fi fs.FileInfo, notPrivate error) error {
	if m := fi.Mode().Perm(); m&0o022 != 0 {
		return fmt.Errorf("%w: %s has mode %04o: other users may change it (chmod go-w %s, or remove it and let mdbus create it 0700)",
			notPrivate, name, m, name)
	}
	return nil
}

// UserDir is prefix followed by the effective uid: this user's own
// directory among those of every user under one shared parent
// (/dev/shm).
func UserDir(prefix string) string { return prefix + strconv.Itoa(os.Geteuid()) }
