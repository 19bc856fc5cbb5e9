//go:build !linux

package journal

import "os"

// fdatasync is f.Sync where there is no fdatasync(2): on macOS that is
// fsync(2), which, like Linux's fdatasync, may leave data in the drive's
// cache (F_FULLFSYNC would not); on Windows FlushFileBuffers.
func fdatasync(f *os.File) error { return f.Sync() }
