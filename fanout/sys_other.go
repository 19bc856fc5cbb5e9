//go:build !linux

package fanout

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"
)

// Ring files need shared file mappings and a futex shared between
// processes: Linux only. Elsewhere Create and Open fail with
// errors.ErrUnsupported.
const supported = false

var errUnsupported = fmt.Errorf("fanout: host fan-out is not supported on %s: %w", runtime.GOOS, errors.ErrUnsupported)

const (
	openReadFlags   = os.O_RDWR
	openWriteFlags  = os.O_RDWR
	openCreateFlags = os.O_RDWR | os.O_CREATE | os.O_EXCL
)

func mapFile(*os.File, int64, int, bool) ([]byte, error) { return nil, errUnsupported }
func unmapFile([]byte) error                             { return nil }
func lockFile(*os.File) error                            { return errUnsupported }
func futexWait(*atomic.Uint32, uint32, time.Duration)    {}
func futexWake(*atomic.Uint32)                           {}
func processAlive(int) bool                              { return false }
