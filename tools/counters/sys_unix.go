//go:build unix

package counters

import (
	"os"
	"syscall"
)

// openCreateFlags create a counters file without following a symbolic
// link planted in its place.
const openCreateFlags = os.O_RDWR | os.O_CREATE | os.O_EXCL | syscall.O_NOFOLLOW
