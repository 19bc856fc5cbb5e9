package counters

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/mdbus/mdbus/internal/regfile"
)

// DirPrefix is the start of every user's default directory: user UID
// keeps its counters files in DirPrefix + UID (tmpfs, so values cost no
// disk I/O and vanish at reboot).
const DirPrefix = "/dev/shm/mdbus-"

// DefaultDir is this user's directory of counters files,
// /dev/shm/mdbus-UID (effective uid), used when Config.Dir is "".
func DefaultDir() string { return regfile.UserDir(DirPrefix) }

// ErrNotPrivate marks a counters directory that other users could write
// to, or that belongs to someone else: its files could be planted or
// replaced, so it is neither written nor read. Match with errors.Is.
var ErrNotPrivate = errors.New("counters: directory not private")

// DirOwner returns the uid that a directory named DirPrefix+UID must
// belong to, and whether dir is named so.
func DirOwner(dir string) (uid int, ok bool) {
	base := filepath.Base(dir)
	n, found := strings.CutPrefix(base, filepath.Base(DirPrefix))
	if !found || n == "" {
		return 0, false
	}
	u, err := strconv.Atoi(n)
	if err != nil || u < 0 || strconv.Itoa(u) != n {
		return 0, false
	}
	return u, true
}

// mkdirPrivate creates dir mode 0700 if it is missing (missing parents
// 0755) and checks that it is ours and private.
func mkdirPrivate(dir string) error {
	if err := regfile.MkdirPrivate(dir); err != nil {
		return err
	}
	_, err := checkDir(dir, os.Geteuid())
	return err
}

// checkDir checks that dir is a directory (not a link to one) that no
// user but its owner may write to, owned by want (any owner when want is
// negative), and, when it is named DirPrefix+UID, owned by that UID. It
// returns the owner.
func checkDir(dir string, want int) (int, error) {
	fi, err := regfile.CheckDir(dir, ErrNotPrivate)
	if err != nil {
		return 0, err
	}
	owner := regOwner(fi)
	if owner < 0 {
		return 0, fmt.Errorf("%w: %s: no owner information", ErrNotPrivate, dir)
	}
	if u, named := DirOwner(dir); named && u != owner {
		return owner, fmt.Errorf("%w: %s belongs to %s, not to %s whose name it bears (another user made it first: remove it as root, or use --counters-dir)",
			ErrNotPrivate, dir, UserName(owner), UserName(u))
	}
	if want >= 0 && owner != want {
		return owner, fmt.Errorf("%w: %s belongs to %s, not to you (%s): use your own directory (--counters-dir), or run as that user or root",
			ErrNotPrivate, dir, UserName(owner), UserName(want))
	}
	return owner, regfile.CheckMode(dir, fi, ErrNotPrivate)
}

// readerOwner is the owner a reader expects of a directory: its own
// effective uid, or anyone's for root (which reads every user's files and
// checks that each belongs to its directory's owner).
func readerOwner() int {
	if u := os.Geteuid(); u != 0 {
		return u
	}
	return -1
}

// UserName returns the login name of uid, or "uid N" when it has none.
func UserName(uid int) string {
	if n := userNames.lookup(uid); n != "" {
		return n
	}
	return "uid " + strconv.Itoa(uid)
}

type nameCache struct {
	mu sync.Mutex
	m  map[int]string
}

var userNames = &nameCache{m: map[int]string{}}

func (c *nameCache) lookup(uid int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.m[uid]
	if !ok {
		if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
			n = u.Username
		}
		if len(c.m) < 1024 {
			c.m[uid] = n
		}
	}
	return n
}

// FileOwner is the uid of fi's owner; ok is false where the system does
// not say (off Unix).
func FileOwner(fi os.FileInfo) (uid int, ok bool) {
	u := regOwner(fi)
	return u, u >= 0
}

// regOwner is the uid of fi's owner, -1 where the system does not say.
func regOwner(fi os.FileInfo) int {
	if u, ok := regfile.Owner(fi); ok {
		return u
	}
	return -1
}
