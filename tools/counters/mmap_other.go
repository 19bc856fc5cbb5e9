//go:build !unix

package counters

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

// mapFile fails: counters files are shared memory maps, implemented for
// Unix only. Commands then run without counters (--counters=false).
func mapFile(*os.File, int, bool) ([]byte, error) {
	return nil, fmt.Errorf("counters files are not supported on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func unmapFile([]byte) error { return nil }
