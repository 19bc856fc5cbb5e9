//go:build unix

package counters

import (
	"os"
	"syscall"
)

// mapFile maps size bytes of f shared, read-only or read-write.
func mapFile(f *os.File, size int, write bool) ([]byte, error) {
	prot := syscall.PROT_READ
	if write {
		prot |= syscall.PROT_WRITE
	}
	return syscall.Mmap(int(f.Fd()), 0, size, prot, syscall.MAP_SHARED)
}

func unmapFile(b []byte) error { return syscall.Munmap(b) }
