package retryotel_test

import (
	"net/http"
	"testing"

	"github.com/retrykit/retry"
)

// NewAttemptTransport: "the span of the returned response ends when the caller
// closes its body, as with otelhttp". A 503 that the transport read in full
// before the wait (to free the connection) and then returned because the
// Budget refused the retry has its span ended before RoundTrip returns. The
// doc now says so; this test pins the behaviour it describes.
func TestReturnedResponseSpanEndsWhenDrained(t *testing.T) {
	withTraceContext(t)
	rec := newRecorder(t, func(*http.Request, int) int { return http.StatusServiceUnavailable })
	p := fastHTTP(3)
	p.Budget, _ = retry.NewBudget(retry.BudgetConfig{Ratio: -1, MinPerSecond: -1}) // refuses every retry
	st := newSetup(t, p)
	resp, err := st.client.Get(rec.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || len(rec.seen()) != 1 {
		t.Fatalf("status %d after %d requests, want the one 503", resp.StatusCode, len(rec.seen()))
	}
	if n := len(clientSpans(st.sr.Ended())); n != 1 {
		t.Errorf("%d attempt spans ended before the caller closed the body of the drained 503, want 1", n)
	}
}
