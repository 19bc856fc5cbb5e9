package journal

import (
	"os"
	"syscall"
)

// fdatasync makes f's data durable without its metadata where the size is
// unchanged (fdatasync(2)), retrying on EINTR.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
