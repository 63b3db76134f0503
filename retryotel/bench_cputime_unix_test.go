//go:build unix

package retryotel_test

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user + system) the process has used. On a
// shared machine it is a steadier measure than wall time: time spent
// waiting for a CPU is not counted.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
