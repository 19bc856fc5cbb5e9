//go:build !linux

package replay

import "runtime"

// Yield gives up the processor between looks at the clock: without a
// precise sleep the pacer spins for up to Spin before each message.
func (realClock) Yield() { runtime.Gosched() }
