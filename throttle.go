package retry

// Throttle: placeholder being replaced by the full implementation (issue 6).
type Throttle struct{}

func (t *Throttle) allow() bool      { return true }
func (t *Throttle) record(err error) {}
