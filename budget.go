package retry

// Budget: placeholder being replaced by the full implementation (issue 6).
type Budget struct{}

func (b *Budget) record(isRetry bool) {}
func (b *Budget) allowRetry() bool    { return true }
