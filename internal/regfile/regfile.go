// Package regfile opens files that must be regular files, the way every
// reader of files others may place (journal segments, counters files)
// needs: without following a symbolic link, without blocking on a FIFO
// or taking a terminal, and refusing anything but a regular file, checked
// on the open file so that a swap between a look and the open changes
// nothing.
package regfile

import (
	"errors"
	"io/fs"
	"os"
)

// ErrNotRegular: the path names a symbolic link, FIFO, socket, device or
// directory. Open's errors of that kind are an *Error that matches it.
var ErrNotRegular = errors.New("not a regular file")

// Error says what a path is instead of a regular file.
type Error struct {
	Path string
	Kind string // as Kind names it: "a symbolic link", "a FIFO (named pipe)", ...
}

func (e *Error) Error() string { return e.Path + " is " + e.Kind + ", not a regular file" }

// Unwrap makes an *Error match ErrNotRegular.
func (e *Error) Unwrap() error { return ErrNotRegular }

// Open opens path with flag (plus the flags that refuse links and never
// block) and perm, and checks on the open file that it is a regular file.
// The caller closes the file.
func Open(path string, flag int, perm fs.FileMode) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, flag|noFollow, perm)
	if err != nil {
		if kind := notRegularOpen(err); kind != "" {
			return nil, nil, &Error{Path: path, Kind: kind}
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, &Error{Path: path, Kind: Kind(fi.Mode())}
	}
	return f, fi, nil
}

// Kind names what a file mode says a file is, with its article: "a FIFO
// (named pipe)", "a regular file".
func Kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	case m.IsRegular():
		return "a regular file"
	}
	return "a special file"
}

// Owner is the uid of fi's owner; ok is false where the system does not
// say (off Unix).
func Owner(fi fs.FileInfo) (uid int, ok bool) {
	u := owner(fi)
	return u, u >= 0
}
