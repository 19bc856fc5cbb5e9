package monotime

import (
	"runtime"
	"testing"
	"time"
)

// TestProcessCPU: CPU time does not go back, and a busy loop of 20 ms of
// wall time adds some (getrusage counts in ticks or finer).
func TestProcessCPU(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("no getrusage")
	}
	c0 := ProcessCPU()
	end := time.Now().Add(20 * time.Millisecond)
	x := 0
	for time.Now().Before(end) {
		x++
	}
	c1 := ProcessCPU()
	if c1 <= c0 {
		t.Fatalf("ProcessCPU %v after %v, a 20 ms busy loop (%d turns) in between", c1, c0, x)
	}
}
