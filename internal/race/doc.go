// Package race tells whether the race detector is built in.
//
// The race detector slows code five to ten times and multiplies its memory,
// so tests that measure capacity or send full-size workloads scale them by
// [Enabled]. Timers are not stretched by it: tests drive timers with
// testing/synctest instead.
//
// Only tests and commands import this package.
package race
