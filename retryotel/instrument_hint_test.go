package retryotel_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"github.com/retrykit/retry/retryotel"
)

// TestSpanEventNamesTheHint: the "retry" span event of a wait that a
// server hint set carries retry.hint; one the policy set does not.
func TestSpanEventNamesTheHint(t *testing.T) {
	for _, tc := range []struct {
		name    string
		initial time.Duration
		want    string
	}{
		{"hint", 10 * time.Millisecond, "RateLimit t=2"},
		{"policy", 5 * time.Second, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mp, _ := newMeter(t)
				tp, sr := newTracer(t)
				n := 0
				base := funcRT(func(r *http.Request) (*http.Response, error) {
					n++
					code, h := 200, http.Header{}
					if n == 1 {
						code, h = 429, http.Header{"Ratelimit": {`"default";r=0;t=2`}}
					}
					return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
				})
				p := retryotel.Instrument(retry.Policy{Initial: tc.initial, Jitter: retry.NoJitter()}, "http", retryotel.WithMeterProvider(mp))
				tr := &retryhttp.Transport{Base: base, Policy: p}
				ctx, span := tp.Tracer("test").Start(t.Context(), "call")
				req, _ := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1/", nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				span.End()
				var got []string
				for _, e := range sr.Ended()[0].Events() {
					for _, kv := range e.Attributes {
						if kv.Key == retryotel.AttrHint {
							got = append(got, kv.Value.AsString())
						}
					}
				}
				if strings.Join(got, ",") != tc.want {
					t.Fatalf("retry.hint %q; want %q", got, tc.want)
				}
			})
		})
	}
}

// TestSpanEventHeld: a request a retryhttp.Pacer holds adds a
// "retry.held" event with the hold and the hint.
func TestSpanEventHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp, _ := newMeter(t)
		tp, sr := newTracer(t)
		base := funcRT(func(r *http.Request) (*http.Response, error) {
			h := http.Header{"Ratelimit": {`"default";r=0;t=2`}}
			return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
		})
		p := retryotel.Instrument(retry.Policy{}, "http", retryotel.WithMeterProvider(mp))
		tr := &retryhttp.Transport{Base: base, Policy: p, Pace: &retryhttp.Pacer{}}
		ctx, span := tp.Tracer("test").Start(t.Context(), "call")
		for range 2 {
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1/", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		span.End()
		var got []string
		for _, e := range sr.Ended()[0].Events() {
			s := e.Name
			for _, kv := range e.Attributes {
				s += fmt.Sprintf(" %s=%v", kv.Key, kv.Value.Emit())
			}
			got = append(got, s)
		}
		if want := "[retry.held retry.attempt=1 retry.delay=2 retry.hint=RateLimit t=2]"; fmt.Sprint(got) != want {
			t.Fatalf("span events %q; want %s", got, want)
		}
	})
}
