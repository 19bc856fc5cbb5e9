//go:build !unix

package journal

import "time"

// cpuTime is 0 where getrusage(2) is missing: benchmarks then report no
// CPU time.
func cpuTime() time.Duration { return 0 }
