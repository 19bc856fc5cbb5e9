//go:build linux

package sock

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestRawFDCloseWakesEveryWaiter: a reader and a writer waiting in poll
// on one rawFD both return net.ErrClosed when it is closed, whichever
// wakes first (close's count on the eventfd is not used up by one), and
// close waits for them before it closes the descriptor.
func TestRawFDCloseWakesEveryWaiter(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fds[1])
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK|unix.EFD_SEMAPHORE)
	require.NoError(t, err)
	var deadline atomic.Int64
	r := &rawFD{fd: fds[0], efd: efd, deadline: &deadline}
	never := func(uintptr) bool { return false } // never ready: waits in poll
	done := make(chan error, 3)
	for range 2 {
		go func() { done <- r.Read(never) }()
	}
	go func() { done <- r.Write(never) }()
	time.Sleep(20 * time.Millisecond) // real time: all three wait in poll
	require.NoError(t, r.close())
	for range 3 {
		select {
		case err := <-done:
			require.True(t, errors.Is(err, net.ErrClosed), "%v", err)
		case <-time.After(5 * time.Second):
			t.Fatal("close did not wake every waiter")
		}
	}
	require.ErrorIs(t, r.close(), net.ErrClosed)
	require.ErrorIs(t, r.Control(func(uintptr) {}), net.ErrClosed)
}
