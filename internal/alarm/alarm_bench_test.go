package alarm

import (
	"slices"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
)

// BenchmarkSet is the cost of a Set that arms the kernel's timer (near:
// a time under kernelMax away, a new one each time) and of one left to
// the Go timer (far).
func BenchmarkSet(b *testing.B) {
	for _, tc := range []struct {
		name string
		new  func() *Clock
		d    time.Duration
	}{{"go/near", NewGo, time.Millisecond}, {"kernel/near", New, time.Millisecond}, {"kernel/far", New, time.Hour}} {
		b.Run(tc.name, func(b *testing.B) {
			c := tc.new()
			defer c.Close()
			for i := range b.N {
				c.Set(monotime.Now().Add(tc.d + time.Duration(i)))
			}
		})
	}
}

// BenchmarkLate reports how late Wait returns after a wait of 100 µs set
// from the waiting goroutine, in an otherwise idle program: p50 and p99
// in µs.
func BenchmarkLate(b *testing.B) {
	for _, tc := range []struct {
		name string
		new  func() *Clock
	}{{"go", NewGo}, {"kernel", New}} {
		b.Run(tc.name, func(b *testing.B) {
			c := tc.new()
			defer c.Close()
			late := make([]time.Duration, 0, b.N)
			for range b.N {
				at := monotime.Now().Add(100 * time.Microsecond)
				c.Set(at)
				if !c.Wait() {
					b.Fatal("closed")
				}
				late = append(late, monotime.Now().Sub(at))
			}
			slices.Sort(late)
			b.ReportMetric(float64(late[len(late)/2])/1e3, "p50-late-µs")
			b.ReportMetric(float64(late[len(late)*99/100])/1e3, "p99-late-µs")
		})
	}
}
