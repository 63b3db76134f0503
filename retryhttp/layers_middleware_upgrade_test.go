package retryhttp_test

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/retrykit/retry/retryhttp"
)

type logSink struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestMiddlewareSwitchingProtocolsNoSecondHeader: a handler that answers 101
// Switching Protocols and flushes it before hijacking (as WebSocket
// libraries do) behaves under Middleware as without it. net/http treats
// 101 as the final header, but Middleware took it for an informational one
// and, at the Flush, wrote a 200 on top of it ("http: superfluous
// response.WriteHeader call" in the server's log for every upgrade).
func TestMiddlewareSwitchingProtocolsNoSecondHeader(t *testing.T) {
	upgrade := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "Upgrade")
		w.Header().Set("Upgrade", "echo")
		w.WriteHeader(http.StatusSwitchingProtocols)
		w.(http.Flusher).Flush()
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		line, _ := brw.ReadString('\n')
		brw.WriteString(line)
		brw.Flush()
	})
	for _, tc := range []struct {
		name string
		h    http.Handler
	}{{"bare", upgrade}, {"Middleware", retryhttp.Middleware(upgrade)}} {
		t.Run(tc.name, func(t *testing.T) {
			var logs logSink
			srv := httptest.NewUnstartedServer(tc.h)
			srv.Config.ErrorLog = log.New(&logs, "", 0)
			srv.Start()
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "echo")
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			rw, ok := resp.Body.(io.ReadWriteCloser)
			if resp.StatusCode != http.StatusSwitchingProtocols || !ok {
				t.Fatalf("status %d, body %T", resp.StatusCode, resp.Body)
			}
			io.WriteString(rw, "ping\n")
			b := make([]byte, 5)
			if _, err := io.ReadFull(rw, b); err != nil || string(b) != "ping\n" {
				t.Errorf("echo %q, %v", b, err)
			}
			rw.Close()
			srv.Close() // waits for the handler, and so for its log
			if s := logs.String(); s != "" {
				t.Errorf("server log: %s", s)
			}
		})
	}
}
