//go:build linux

package sock

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// InjectGSOFault makes every GSO train c sends fail with e instead of
// reaching the kernel. Call it before the first WriteBatch.
func InjectGSOFault(c *Conn, e syscall.Errno) { c.sys.gso.fault = e }

// SetNoCheck turns UDP checksums off on c's socket (SO_NO_CHECK), which
// makes the kernel refuse GSO trains (they need a checksum per segment).
func SetNoCheck(c *Conn) error {
	var serr error
	err := c.sys.rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_NO_CHECK, 1)
	})
	if err != nil {
		return err
	}
	return serr
}

// MaxGSOBytes is the largest train of an IPv4 or IPv6 Conn.
func MaxGSOBytes(v6 bool) int {
	if v6 {
		return min(maxGSOBytesIPv6, gsoTrainBytes)
	}
	return min(maxGSOBytesIPv4, gsoTrainBytes)
}

const MaxGSOSegments = maxGSOSegments

// Detached reports whether c was moved off Go's network poller.
func Detached(c *Conn) bool { return c.detached() }

// Fd is c's descriptor.
func Fd(c *Conn) int {
	fd := -1
	c.sys.rc.Control(func(f uintptr) { fd = int(f) })
	return fd
}
