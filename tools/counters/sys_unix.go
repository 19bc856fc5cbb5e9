//go:build unix

package counters

import (
	"errors"
	"os"
	"syscall"
)

// Flags that open a counters file without following a symbolic link,
// blocking on a FIFO or a device, or taking a terminal.
const (
	openReadFlags   = os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_NOCTTY
	openCreateFlags = os.O_RDWR | os.O_CREATE | os.O_EXCL | syscall.O_NOFOLLOW
)

// ownerOf is the uid of fi's owner, -1 if unknown.
func ownerOf(fi os.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// isLink reports whether err is the error of opening a symbolic link
// with O_NOFOLLOW.
func isLink(err error) bool { return errors.Is(err, syscall.ELOOP) }
