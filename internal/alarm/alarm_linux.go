package alarm

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// timerFD is a timerfd read through Go's network poller by a helper
// goroutine, which calls kick at each expiry. set is a relative
// timerfd_settime: monotime is Go's monotonic clock, whose origin the
// kernel does not share.
type timerFD struct {
	f    *os.File
	rc   syscall.RawConn
	done chan struct{} // closed when the helper returns
}

func newKernelTimer(kick func()) (kernelTimer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("alarm: timerfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "alarm-timerfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("alarm: timerfd: %w", err)
	}
	t := &timerFD{f: f, rc: rc, done: make(chan struct{})}
	go t.run(kick)
	return t, nil
}

// run reads the expirations until the descriptor is closed.
func (t *timerFD) run(kick func()) {
	defer close(t.done)
	var buf [8]byte // the expiration count
	for {
		if _, err := t.f.Read(buf[:]); err != nil {
			return // closed
		}
		kick()
	}
}

func (t *timerFD) set(d time.Duration) {
	// A zero it_value would disarm the timer: at least 1 ns.
	its := unix.ItimerSpec{Value: unix.NsecToTimespec(max(int64(d), 1))}
	// Control fails only once the file is closed: nothing to wake.
	_ = t.rc.Control(func(fd uintptr) {
		_ = unix.TimerfdSettime(int(fd), 0, &its, nil)
	})
}

func (t *timerFD) close() {
	_ = t.f.Close()
	<-t.done
}
