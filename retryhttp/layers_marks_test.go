package retryhttp_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/retrykit/retry/retryhttp"
)

// Item 5: the attempt count and the exhausted mark survive body wrappers
// (http.Client.Timeout) and a response rebuilt from status, header and
// body bytes, as generated clients' error values keep them.
func TestMarksSurviveWrappers(t *testing.T) {
	t.Run("gave up", func(t *testing.T) {
		_, srv := newScript(t, 503)
		c := client(t, &retryhttp.Transport{Policy: fast})
		c.Timeout = time.Minute // net/http wraps the body
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if retryhttp.Attempts(resp) != 4 || !retryhttp.Exhausted(resp) {
			t.Fatalf("Attempts %d Exhausted %v behind Client.Timeout", retryhttp.Attempts(resp), retryhttp.Exhausted(resp))
		}
		if resp.Header.Get(retryhttp.HeaderExhausted) != "1" || resp.Header.Get(retryhttp.HeaderAttempt) != "4" {
			t.Fatalf("header %v", resp.Header)
		}
		// What a generated client keeps in its error value.
		rebuilt := &http.Response{StatusCode: resp.StatusCode, Header: resp.Header.Clone(), Body: io.NopCloser(bytes.NewReader(body))}
		if retryhttp.Attempts(rebuilt) != 4 || !retryhttp.Exhausted(rebuilt) {
			t.Fatalf("rebuilt: Attempts %d Exhausted %v", retryhttp.Attempts(rebuilt), retryhttp.Exhausted(rebuilt))
		}
	})
	t.Run("succeeded after retries", func(t *testing.T) {
		_, srv := newScript(t, 503, 200)
		c := client(t, &retryhttp.Transport{Policy: fast})
		c.Timeout = time.Minute
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if retryhttp.Attempts(resp) != 2 || retryhttp.Exhausted(resp) {
			t.Fatalf("Attempts %d Exhausted %v", retryhttp.Attempts(resp), retryhttp.Exhausted(resp))
		}
	})
	t.Run("nested transports", func(t *testing.T) {
		s, srv := newScript(t, 503)
		base := &http.Transport{}
		t.Cleanup(base.CloseIdleConnections)
		inner := &retryhttp.Transport{Base: base, Policy: fast}
		c := &http.Client{Timeout: time.Minute, Transport: &retryhttp.Transport{Base: inner, Policy: fast}}
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if s.n() != 4 || retryhttp.Attempts(resp) != 4 || !retryhttp.Exhausted(resp) {
			t.Fatalf("%d sends, Attempts %d; want one layer's 4", s.n(), retryhttp.Attempts(resp))
		}
	})
	t.Run("first attempt untouched", func(t *testing.T) {
		_, srv := newScript(t, 404)
		c := client(t, &retryhttp.Transport{Policy: fast})
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if _, ok := resp.Header[retryhttp.HeaderAttempt]; ok || retryhttp.Attempts(resp) != 1 || retryhttp.Exhausted(resp) {
			t.Fatalf("header %v", resp.Header)
		}
	})
}
