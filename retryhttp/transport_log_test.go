package retryhttp_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"github.com/retrykit/retry/retrytest"
)

func TestLoggerAndObserverShowRedactedRequest(t *testing.T) {
	_, srv := newScript(t, 503, 200)
	var buf bytes.Buffer
	var rec retrytest.Recorder
	p := retry.Policy{Initial: retry.Immediate, MaxAttempts: 3,
		Logger:   slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Observer: &rec}
	c := client(t, &retryhttp.Transport{Policy: p})
	u := strings.Replace(srv.URL, "http://", "http://alice:hunter2@", 1) + "/v1/items?api_key=s3cr3t&page=2"
	req, _ := http.NewRequest("DELETE", u, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	events := rec.Of(retry.EventRetry)
	if len(events) != 1 || events[0].Attempt != 1 {
		t.Fatalf("events %+v", events)
	}
	for _, s := range []string{events[0].Err.Error(), buf.String()} {
		for _, want := range []string{"DELETE", "/v1/items", "api_key=xxx", "page=xxx", "503", "attempt 1", "alice"} {
			if !strings.Contains(s, want) {
				t.Errorf("%q lacks %q", s, want)
			}
		}
		for _, bad := range []string{"hunter2", "s3cr3t"} {
			if strings.Contains(s, bad) {
				t.Errorf("%q leaks %q", s, bad)
			}
		}
	}
	if !strings.Contains(buf.String(), "delay=") {
		t.Errorf("log lacks the wait: %s", buf.String())
	}
}
