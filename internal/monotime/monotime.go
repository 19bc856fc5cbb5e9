// Package monotime gives monotonic timestamps as int64 nanoseconds, cheaper
// to store and compare than time.Time and immune to wall-clock steps, and
// the process's CPU time (ProcessCPU), the other clock a measurement reads.
package monotime

import "time"

// Time is a monotonic instant in nanoseconds since an arbitrary origin
// fixed at process start. Only differences between Times mean anything.
type Time int64

var origin = time.Now()

// Now returns the current monotonic time. It does not allocate.
func Now() Time { return Time(time.Since(origin)) }

// Add returns t+d.
func (t Time) Add(d time.Duration) Time { return t + Time(d) }

// Sub returns t-u.
func (t Time) Sub(u Time) time.Duration { return time.Duration(t - u) }

// Since returns the time elapsed since t.
func Since(t Time) time.Duration { return time.Duration(Now() - t) }

// Wall converts t to a wall-clock time.Time (for deadlines on sockets).
func (t Time) Wall() time.Time { return origin.Add(time.Duration(t)) }
