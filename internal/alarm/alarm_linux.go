package alarm

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// timerFD is a timerfd read through Go's network poller by a helper
// goroutine, which calls kick at each expiry. set is a relative
// timerfd_settime: monotime is Go's monotonic clock, whose origin the
// kernel does not share.
type timerFD struct {
	f    *os.File
	fd   int             // f's descriptor, for set: only under the Nudge's mutex, before close
	its  unix.ItimerSpec // set's, so that arming allocates nothing
	done chan struct{}   // closed when the helper returns
}

func newKernelTimer(kick func()) (kernelTimer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("alarm: timerfd_create: %w", err)
	}
	t := &timerFD{f: os.NewFile(uintptr(fd), "alarm-timerfd"), fd: fd, done: make(chan struct{})}
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
	// A zero it_value would disarm the timer: at least 1 ns. The raw
	// descriptor, not the file's RawConn.Control, whose closure allocated
	// twice per call: the Nudge's mutex keeps set and close apart, and
	// close comes last, so the descriptor is still this timer's.
	t.its.Value = unix.NsecToTimespec(max(int64(d), 1))
	_ = unix.TimerfdSettime(t.fd, 0, &t.its, nil)
}

func (t *timerFD) close() {
	_ = t.f.Close()
	<-t.done
}
