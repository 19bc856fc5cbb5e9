// Package alarm is an alarm clock for one waiting goroutine that other
// goroutines set: Wait returns when the time set last is reached, and
// Set from any goroutine moves it, earlier or later.
//
// It exists because Go's timers are precise only while the program is
// busy. A goroutine asleep on a time.Timer is woken by whichever thread
// next looks at the timers: in a busy program that is soon, but a program
// with nothing else to run waits in its network poller, whose wait Go
// rounds up to whole milliseconds (runtime/netpoll_epoll.go: any delay
// under 1 ms waits 1 ms). A 100 µs wait in an idle subscriber took
// 1.0-1.3 ms on Linux, so a re-request meant to leave 100 µs after a gap
// left a millisecond later, and every repair waited with it (gap found to
// repaired p50 1.26 ms at 50,000 messages a second).
//
// So a Clock arms two timers for each time set: a Go timer at that time,
// and on Linux, for times under kernelMax (5 ms) away, a timerfd
// (CLOCK_MONOTONIC, the kernel's high-resolution timers) kernelLag (50
// µs) after it, read by a helper goroutine through Go's network poller,
// which wakes on the descriptor's readiness at once however long its own
// wait. Whichever fires first wakes the waiter. In a busy program the Go
// timer fires first, and the waiter's next Set moves the timerfd before it
// fires; in an idle one the timerfd fires, about 100 µs late here (the lag
// and the kernel's wake-up), not a millisecond. The lag is there because
// a timerfd at the time itself made a busy subscriber's repairs 20-40 µs
// slower at p50 (its expiry and the poller's wake-up cost more than a
// busy processor's look at its Go timers). Further times are left to the
// Go timer, whose millisecond is then a small part of the wait. Arming
// costs one timerfd_settime system call (1-2 µs on the development VM,
// BenchmarkSet).
//
// Nudge is the timerfd half alone, for a goroutine that already waits in
// a select of its own beside a Go timer (the publisher's sending
// goroutine): it calls a function instead of waking a Wait.
//
// One side effect: each wake-up restarts the rounding of the process's
// other Go timers. A Go timer due in 0.75 ms when the poller wakes for a
// timerfd waits a whole millisecond from then, 1.25 ms in all: the
// benchmark's paced sender slept later behind a publisher's lingering
// packets until it slept on a Clock too. Code that needs its own sub-
// millisecond waits should use a Clock.
//
// NewGo's clock has the Go timer only: its waits are Go timers and
// channels, so tests run it in a testing/synctest bubble on virtual time.
// New falls back to it where the platform has no timerfd or the kernel
// refuses one.
package alarm

import (
	"sync"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
)

// Never is the time of an alarm that is not set.
const Never = monotime.Time(1<<63 - 1)

// Clock is an alarm clock. Set and Close are safe for concurrent use;
// Wait must be called by one goroutine at a time.
type Clock struct {
	mu        sync.Mutex
	at        monotime.Time
	ping      chan struct{} // capacity 1: look at c.at again
	quit      chan struct{}
	closeOnce sync.Once
	t         *time.Timer // the waiter's
	nudge     *Nudge      // the kernel's timer; nil: the Go timer only
}

// kernelTimer is the platform's precise timer: set arms it to call its
// function d from now (d <= 0: at once), replacing the time before,
// without allocating; close stops it and waits for its goroutine to
// return. The Nudge calls both under its mutex, and set never after
// close.
type kernelTimer interface {
	set(d time.Duration)
	close()
}

// New returns a clock that wakes at the Go timer or the kernel's timer,
// whichever fires first, or NewGo's where the platform has none.
func New() *Clock {
	c := NewGo()
	c.nudge = NewNudge(c.kick)
	return c
}

// NewGo returns a clock on a Go timer alone, precise to about a
// millisecond in an idle program (see the package documentation) and
// usable under testing/synctest.
func NewGo() *Clock {
	return &Clock{at: Never, ping: make(chan struct{}, 1), quit: make(chan struct{})}
}

// Precise reports whether the clock has the kernel's timer beside the Go
// timer.
func (c *Clock) Precise() bool { return c.nudge.Precise() }

// Set makes Wait return at t (monotime), or at once when t is not after
// now; Never leaves the clock unset. It replaces the time set before. A
// Set after Close wakes nothing.
func (c *Clock) Set(at monotime.Time) {
	c.mu.Lock()
	c.at = at
	c.nudge.Set(at)
	c.mu.Unlock()
	c.kick()
}

// kick makes the waiter look at the time again.
func (c *Clock) kick() {
	select {
	case c.ping <- struct{}{}:
	default: // a kick is pending already
	}
}

// Wait blocks until the time set last is reached (then the clock is
// unset until the next Set) or Close is called; it returns false once
// the clock is closed.
func (c *Clock) Wait() bool {
	for {
		select {
		case <-c.quit:
			return false
		default:
		}
		c.mu.Lock()
		at := c.at
		now := monotime.Now()
		if at != Never && at <= now {
			c.at = Never
			c.mu.Unlock()
			return true
		}
		c.mu.Unlock()
		d := time.Duration(1<<63 - 1)
		if at != Never {
			d = at.Sub(now)
		}
		if c.t == nil {
			c.t = time.NewTimer(d)
		} else {
			c.t.Reset(d)
		}
		select {
		case <-c.quit:
			c.t.Stop()
			return false
		case <-c.t.C:
		case <-c.ping:
		}
	}
}

// Close wakes the waiter, which then returns false, and stops the
// kernel's timer and its goroutine. It is idempotent.
func (c *Clock) Close() {
	c.closeOnce.Do(func() {
		close(c.quit)
		c.nudge.Close()
	})
}

// Nudge is the kernel's half of a Clock, for a goroutine that waits in a
// select of its own beside a Go timer: it calls a function kernelLag
// after the time set, unless set again before. It arms the kernel's timer
// only for times under kernelMax away, where Go's millisecond matters; a
// later time leaves it as it was, and so may call the function early
// (the caller checks what is due). A nil *Nudge, or one where the
// platform has no kernel timer, does nothing. Set and Close are safe for
// concurrent use.
type Nudge struct {
	mu    sync.Mutex
	fd    kernelTimer   // nil: none
	armed monotime.Time // when fd fires; Never: disarmed
}

const (
	// kernelLag is how long after the time set the kernel's timer fires.
	kernelLag = 50 * time.Microsecond
	// kernelMax: times further away than this are left to the Go timer,
	// whose millisecond is then a small part of the wait.
	kernelMax = 5 * time.Millisecond
)

// NewNudge returns a Nudge that calls fn, on a goroutine of its own, at
// each expiry. fn must not block.
func NewNudge(fn func()) *Nudge {
	fd, err := newKernelTimer(fn)
	if err != nil {
		return &Nudge{armed: Never}
	}
	return &Nudge{fd: fd, armed: Never}
}

// Precise reports whether n has a kernel timer.
func (n *Nudge) Precise() bool { return n != nil && n.fd != nil }

// Set arms the kernel's timer for at+kernelLag when at is in the future
// but under kernelMax away and the timer is not armed for that already.
// It costs one system call when it arms, nothing otherwise.
func (n *Nudge) Set(at monotime.Time) {
	if !n.Precise() || at == Never {
		return
	}
	d := at.Sub(monotime.Now())
	if d <= 0 || d > kernelMax {
		return // due now (the caller wakes itself) or far: the Go timer's
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if fire := at.Add(kernelLag); fire != n.armed && n.armed != closed {
		n.armed = fire
		n.fd.set(d + kernelLag)
	}
}

// Close stops the kernel's timer and waits for its goroutine to return.
// It is idempotent.
func (n *Nudge) Close() {
	if !n.Precise() {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.armed != closed {
		n.armed = closed
		n.fd.close()
	}
}

// closed marks a Nudge whose timer is closed.
const closed = monotime.Time(-1 << 63)
