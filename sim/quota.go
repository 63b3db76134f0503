package sim

import "fmt"

// RetryQuota is the AWS SDKs' retry quota in standard mode, modelled as
// the SDKs keep it rather than as a windowed [retry.Budget]: a bucket of
// Capacity tokens, full at the start, with no time window. A retry takes
// RetryCost tokens, and a call whose retry finds fewer gives up (the
// SDKs' quota-exceeded error). An attempt answered in time puts tokens
// back: the RetryCost its retry took, or NoRetryIncrement after a first
// attempt, up to Capacity. The quota thus refills only through
// successes: in a stuck state it runs dry after Capacity/RetryCost
// retries and stays dry until calls succeed again.
type RetryQuota struct {
	Capacity         int // tokens in a full bucket; must be positive
	RetryCost        int // tokens a retry takes; must be positive
	NoRetryIncrement int // tokens a success at the first attempt puts back; not negative
}

// AWSRetryQuota returns the SDKs' figures (retry behaviour 2.1, AWS SDK
// for Go v2 v1.48): 500 tokens, 14 per retry of a transient error, 1 back
// per success at the first attempt. The open model's failures, timeouts
// and 503s from a full queue, are transient errors to the SDKs; their 5
// tokens per throttling retry would apply to a 429, which the model does
// not send.
func AWSRetryQuota() RetryQuota { return RetryQuota{Capacity: 500, RetryCost: 14, NoRetryIncrement: 1} }

func (q RetryQuota) validate() error {
	if q.Capacity <= 0 || q.RetryCost <= 0 || q.NoRetryIncrement < 0 {
		return fmt.Errorf("%w: Quota %+v: want a positive Capacity and RetryCost, and NoRetryIncrement not negative", ErrScenario, q)
	}
	return nil
}

// quotaModel is a RetryQuota per process, or one for the fleet.
type quotaModel struct {
	on     bool
	q      RetryQuota
	shared bool
	tokens []int64
}

func (m *quotaModel) init(q RetryQuota, processes int, shared bool) {
	n := processes
	if shared {
		n = 1
	}
	*m = quotaModel{on: true, q: q, shared: shared, tokens: make([]int64, n)}
	for i := range m.tokens {
		m.tokens[i] = int64(q.Capacity)
	}
}

func (m *quotaModel) at(c int32) *int64 {
	if m.shared {
		return &m.tokens[0]
	}
	return &m.tokens[c]
}

// retry takes a retry's tokens for process c, or reports that too few
// are left.
func (m *quotaModel) retry(c int32) bool {
	t := m.at(c)
	if *t < int64(m.q.RetryCost) {
		return false
	}
	*t -= int64(m.q.RetryCost)
	return true
}

// success puts tokens back for process c after an attempt answered in
// time; retried says the attempt was a retry.
func (m *quotaModel) success(c int32, retried bool) {
	t := m.at(c)
	back := int64(m.q.NoRetryIncrement)
	if retried {
		back = int64(m.q.RetryCost)
	}
	*t = min(*t+back, int64(m.q.Capacity))
}
