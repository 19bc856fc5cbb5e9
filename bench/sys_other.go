//go:build !linux

package bench

import (
	"os/exec"
	"runtime"
)

// killWithParent does nothing: there is no parent-death signal here, so a
// child of an interrupted run is ended by its own context.
func killWithParent(*exec.Cmd) {}

// schedYield yields the goroutine's P; there is no portable sched_yield.
func schedYield() { runtime.Gosched() }
