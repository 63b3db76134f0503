package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/retrykit/retry"
)

// Memory model, in bytes. Every per-client structure is allocated once per
// Run (nothing grows with the number of requests), so the estimate is
// also a bound on what the run touches, up to the Go runtime's own few
// megabytes.
const (
	eventBytes    = 32         // one pending event (event): the client's whole state
	successBytes  = 8          // one success time, for the percentiles
	bucketBytes   = 96         // per slot with pending events: list, index entry, heap key
	selectBytes   = eventBytes // per request a slot accepts (capacity model)
	budgetBytes   = 184        // per budget window (one per process, or one shared)
	loadBytes     = 16         // per slot of Result.Load: the series and its copy
	runtimeBytes  = 16 << 20
	perClientBase = eventBytes + successBytes
)

// memory estimates the bytes that Run needs for s (resolved).
func (s *Scenario) memory() int64 {
	n := int64(s.Clients)
	total := float64(runtimeBytes) + float64(n)*perClientBase
	if s.Model == Contention {
		total += float64(n) * 4 // the version each client read
	}
	if s.Model == Capacity {
		// Each slot with pending events may hold a partly filled chunk.
		active := s.activeSlots()
		total += active * float64(chunkLen(n, active)*eventBytes+bucketBytes)
		if int64(s.Capacity) < n {
			total += float64(s.Capacity) * selectBytes
		}
	}
	if s.Budget != nil {
		total += float64(s.Processes) * budgetBytes
	}
	total += loadBytes * min(float64(maxSlots), float64(s.runSpan())/float64(s.Slot)+1)
	if total > math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return int64(total)
}

// activeSlots bounds the number of slots with pending events at any time.
func (s *Scenario) activeSlots() float64 {
	return min(float64(s.Clients), float64(s.span())/float64(s.Slot)+2)
}

// maxWait is the longest a client may wait between two requests.
func (s *Scenario) maxWait() time.Duration {
	w := s.RetryAfter
	if s.Policy.Initial != retry.Immediate {
		_, hi := s.Policy.Bounds(math.MaxInt32)
		w = max(w, hi)
	}
	return w
}

// span bounds how far ahead of the current time a pending event may be.
func (s *Scenario) span() time.Duration { return max(s.maxWait(), s.StartWindow) }

// runSpan bounds the virtual time the run covers (MaxTime when unbounded).
func (s *Scenario) runSpan() time.Duration {
	client := MaxTime
	if s.Policy.MaxElapsed > 0 {
		client = s.Policy.MaxElapsed
	}
	if ma := s.Policy.MaxAttempts; ma != retry.Unlimited {
		if ma == 0 {
			ma = retry.DefaultMaxAttempts
		}
		if w := s.maxWait(); w > 0 && int64(ma-1) < int64(client/w) {
			client = time.Duration(ma-1) * w
		} else if w == 0 {
			client = 0
		}
	}
	if s.Model == Contention {
		// Each call also takes four message delays; |Normal| rarely passes
		// eight standard deviations.
		return MaxTime
	}
	return min(MaxTime, s.StartWindow+client)
}

// byteSize formats b in binary units, as "4.0 GiB".
func byteSize(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit && exp < 4; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTP"[exp])
}
