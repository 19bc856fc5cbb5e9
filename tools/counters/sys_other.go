//go:build !unix

package counters

import "os"

// Off Unix there are no owners to check nor links to refuse at open:
// counters files are not supported there (mapFile fails).
const (
	openReadFlags   = os.O_RDONLY
	openCreateFlags = os.O_RDWR | os.O_CREATE | os.O_EXCL
)

func ownerOf(os.FileInfo) int { return -1 }

func isLink(error) bool { return false }
