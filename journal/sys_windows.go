package journal

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/windows"
)

// tryLock takes an exclusive lock on f's first byte without waiting
// (LockFileEx); held reports that another open file holds it.
func tryLock(f *os.File) (held bool, err error) {
	var ol windows.Overlapped
	err = windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
	return errors.Is(err, windows.ERROR_LOCK_VIOLATION), err
}

// unlinked reports false: os.FileInfo carries no link count on Windows.
func unlinked(fs.FileInfo) bool { return false }
