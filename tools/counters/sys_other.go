//go:build !unix

package counters

import "os"

// Off Unix counters files are not supported (mapFile fails).
const openCreateFlags = os.O_RDWR | os.O_CREATE | os.O_EXCL
