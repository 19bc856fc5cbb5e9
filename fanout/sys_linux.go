//go:build linux

package fanout

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const supported = true

// futex(2) operations (linux/futex.h); golang.org/x/sys/unix has no names for them.
const (
	futexWaitOp = 0
	futexWakeOp = 1
)

// Flags that open a ring file without following a symbolic link, blocking
// on a FIFO or taking a terminal.
const (
	openReadFlags   = os.O_RDWR | syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_NOCTTY
	openWriteFlags  = os.O_RDWR | syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_NOCTTY
	openCreateFlags = os.O_RDWR | os.O_CREATE | os.O_EXCL | syscall.O_NOFOLLOW
)

// mapFile maps size bytes of f at off, shared, read-only or read-write.
func mapFile(f *os.File, off int64, size int, write bool) ([]byte, error) {
	prot := unix.PROT_READ
	if write {
		prot |= unix.PROT_WRITE
	}
	return unix.Mmap(int(f.Fd()), off, size, prot, unix.MAP_SHARED)
}

func unmapFile(b []byte) error { return unix.Munmap(b) }

// lockFile takes the writer's lock on f (flock, exclusive, without
// waiting): one writer per file; the kernel releases it when the writer
// dies, so a crashed writer's file can be taken over.
func lockFile(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return errLocked
	}
	return err
}

// futexWait sleeps while *w == val, at most d. It returns on a wake-up,
// a changed word, a signal or the timeout alike: callers recheck. The
// futex is shared (no FUTEX_PRIVATE_FLAG): the word lives in a file
// mapping that other processes wait on too.
func futexWait(w *atomic.Uint32, val uint32, d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWaitOp, uintptr(val),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWake wakes every waiter on w, in every process.
func futexWake(w *atomic.Uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWakeOp, uintptr(1<<31-1), 0, 0, 0)
}

// processAlive reports whether pid names a live process (signal 0).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
