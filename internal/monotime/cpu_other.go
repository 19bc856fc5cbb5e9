//go:build !unix

package monotime

import "time"

// ProcessCPU returns 0 where there is no getrusage(2).
func ProcessCPU() time.Duration { return 0 }
