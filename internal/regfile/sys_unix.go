//go:build unix

package regfile

import (
	"errors"
	"io/fs"
	"syscall"
)

// noFollow refuses a symbolic link, never blocks on a FIFO and never
// takes a terminal.
const noFollow = syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_NOCTTY

// notRegularOpen names what an error of opening with noFollow says the
// path is: a link (ELOOP) or a FIFO with no reader, opened for writing
// (ENXIO); "" for other errors.
func notRegularOpen(err error) string {
	switch {
	case errors.Is(err, syscall.ELOOP):
		return "a symbolic link"
	case errors.Is(err, syscall.ENXIO):
		return "a FIFO (named pipe)"
	}
	return ""
}

func owner(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}
