package fanout

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mdbus/mdbus/internal/regfile"
)

// ErrNotPrivate marks a directory or ring file that another user could
// write to or that belongs to someone else: a reader would take its bytes
// for the feed, so it is neither written nor read. Match with errors.Is.
var ErrNotPrivate = errors.New("fanout: not private")

// ErrConfig marks a ReaderConfig or WriterConfig that is refused: a
// required field missing, or a negative value where the field has no
// "none". Match with errors.Is.
var ErrConfig = errors.New("fanout: invalid config")

// DirPrefix is the start of every user's default directory of ring files:
// user UID keeps them in DirPrefix + UID, on tmpfs (the data lives in
// memory and vanishes at reboot).
const DirPrefix = "/dev/shm/mdbus-fanout-"

// DefaultDir is this user's directory of ring files, DirPrefix + the
// effective uid.
func DefaultDir() string { return regfile.UserDir(DirPrefix) }

// errLocked: another writer holds the ring file.
var errLocked = errors.New("another writer holds it")

// Path returns the ring file of name in dir ("" for DefaultDir). A name
// that contains a slash is a path already and is returned as it is.
func Path(dir, name string) string {
	if strings.ContainsRune(name, '/') {
		return name
	}
	if dir == "" {
		dir = DefaultDir()
	}
	return filepath.Join(dir, name+".ring")
}

// mkdirPrivate creates dir mode 0700 if it is missing (missing parents
// 0755) and checks that it is ours and private.
func mkdirPrivate(dir string) error {
	if err := regfile.MkdirPrivate(dir); err != nil {
		return fmt.Errorf("fanout: directory %s: %w", dir, err)
	}
	fi, err := regfile.CheckDir(dir, ErrNotPrivate)
	if errors.Is(err, ErrNotPrivate) {
		return err
	}
	if err != nil {
		return fmt.Errorf("fanout: directory %s: %w", dir, err)
	}
	return checkOwner(dir, fi)
}

// checkOwner checks that fi (of name) belongs to us (root reads and
// writes anyone's) and that no one else may write to it.
func checkOwner(name string, fi os.FileInfo) error {
	if !supported {
		return nil
	}
	owner, ok := regfile.Owner(fi)
	if me := os.Geteuid(); !ok || (owner != me && me != 0) {
		return fmt.Errorf("%w: %s belongs to uid %d, not to you (uid %d): use a directory of your own (--dir)", ErrNotPrivate, name, owner, me)
	}
	return regfile.CheckMode(name, fi, ErrNotPrivate)
}
