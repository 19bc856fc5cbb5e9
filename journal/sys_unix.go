//go:build unix

package journal

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// tryLock takes an exclusive flock on f without waiting; held reports
// that another open file holds it.
func tryLock(f *os.File) (held bool, err error) {
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	return errors.Is(err, syscall.EWOULDBLOCK), err
}

// unlinked reports that the file fi describes has no name left on disk.
func unlinked(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 0
}
