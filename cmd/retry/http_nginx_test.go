//go:build linux

// Linux only: nginx is started with Pdeathsig so that it never outlives a
// killed test binary.

package main_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

// The nginx end-to-end test puts a real rate limiter between the retrying
// clients and a local backend: nginx on 127.0.0.1 answers 429 with
// "Retry-After: 1" when limit_req (20 r/s, burst 5) rejects a request
// under /rate/, and 503 when limit_conn (2 at a time) rejects one under
// /busy/. A burst through the retryhttp transport and through the `retry
// http` binary must complete with 200 for every request.

const (
	nginxBurst       = 100 // requests per client kind
	nginxConcurrency = 20
)

// nginxBinary finds nginx, or skips the test (fails it when
// RETRYKIT_REQUIRE_NGINX=1, as CI sets).
func nginxBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("RETRYKIT_REQUIRE_NGINX") == "1" {
		t.Fatal("nginx is not installed but RETRYKIT_REQUIRE_NGINX=1: install it (Debian: apt-get install -y nginx)")
	}
	t.Skip("nginx not installed: skipping the rate-limiter end-to-end test (Debian: apt-get install -y nginx; CI sets RETRYKIT_REQUIRE_NGINX=1 to make this a failure)")
	return ""
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

const nginxConf = `daemon off;
%[1]s
worker_processes 1;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log notice;
events { worker_connections 512; }
http {
  default_type text/plain;
  log_format plain '$status $uri';
  access_log %[2]s/access.log plain;
  client_body_temp_path %[2]s/client_body;
  proxy_temp_path %[2]s/proxy;
  fastcgi_temp_path %[2]s/fastcgi;
  uwsgi_temp_path %[2]s/uwsgi;
  scgi_temp_path %[2]s/scgi;

  limit_req_zone $binary_remote_addr zone=rate:1m rate=20r/s;
  # retry http processes start far slower than the transport's goroutines
  # (tens of milliseconds each on a loaded machine): their own, lower limit,
  # so that their burst still meets the limiter.
  limit_req_zone $binary_remote_addr zone=ratecli:1m rate=3r/s;
  limit_req_status 429;
  limit_conn_zone $binary_remote_addr zone=conns:1m;
  limit_conn_status 503;

  upstream backend {
    server %[3]s;
    keepalive 16;
  }
  server {
    listen 127.0.0.1:%[4]d;
    proxy_http_version 1.1;
    proxy_set_header Connection "";

    location /rate/ {
      limit_req zone=rate burst=5 nodelay;
      error_page 429 = @limited;
      proxy_pass http://backend;
    }
    location /rate/cli/ {
      limit_req zone=ratecli burst=3 nodelay;
      error_page 429 = @limited;
      proxy_pass http://backend;
    }
    location @limited {
      add_header Retry-After 1 always;
      return 429 "rate limited\n";
    }
    location /busy/ {
      limit_conn conns 2;
      proxy_pass http://backend;
    }
  }
}
`

type nginxServer struct {
	url, dir string
}

// startNginx runs nginx in the foreground in front of backend, with every
// file it writes inside a temporary directory; it is stopped at cleanup.
func startNginx(t *testing.T, backend string) *nginxServer {
	t.Helper()
	bin := nginxBinary(t)
	dir := t.TempDir()
	port := freePort(t)
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;" // workers would otherwise run as nobody and not reach the 0700 temp dir
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, user, dir, backend, port), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir+"/", "-e", filepath.Join(dir, "error.log"), "-c", conf)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM) // fast shutdown: the master stops its workers
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-done:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited: %v\n%s\n%s", err, out.String(), log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not listen on %s within 10s: %s", addr, out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return &nginxServer{url: "http://" + addr, dir: dir}
}

// statuses counts the access log's lines by status for URIs with prefix.
func (n *nginxServer) statuses(t *testing.T, prefix string) map[string]int {
	t.Helper()
	f, err := os.Open(filepath.Join(n.dir, "access.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		status, uri, ok := strings.Cut(sc.Text(), " ")
		if ok && strings.HasPrefix(uri, prefix) {
			m[status]++
		}
	}
	return m
}

// backend answers every request with its path after a short pause (so
// limit_conn has concurrent requests to refuse) and counts them by path.
type backend struct {
	mu   sync.Mutex
	hits map[string]int
}

func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	time.Sleep(2 * time.Millisecond)
	b.mu.Lock()
	b.hits[r.URL.Path]++
	b.mu.Unlock()
	io.WriteString(w, "ok "+r.URL.Path+"\n")
}

// burst runs do for nginxBurst request paths, nginxConcurrency at a time,
// half under /rate/ and half under /busy/, and returns the paths.
func burst(kind string, do func(path string)) []string {
	paths := make([]string, nginxBurst)
	sem := make(chan struct{}, nginxConcurrency)
	var wg sync.WaitGroup
	for i := range paths {
		loc := "/rate/"
		if i%2 == 1 {
			loc = "/busy/"
		}
		paths[i] = fmt.Sprintf("%s%s/%d", loc, kind, i)
		wg.Add(1)
		sem <- struct{}{}
		go func(p string) {
			defer func() { <-sem; wg.Done() }()
			do(p)
		}(paths[i])
	}
	wg.Wait()
	return paths
}

// e2ePolicy retries quickly on 503 (no Retry-After) and leaves the 1 s
// waits to the 429's Retry-After.
var e2ePolicy = retry.Policy{
	Initial:     10 * time.Millisecond,
	MaxDelay:    300 * time.Millisecond,
	Jitter:      retry.FullJitter(),
	MaxAttempts: 60,
	MaxElapsed:  40 * time.Second,
}

func TestNginxRateLimiterEndToEnd(t *testing.T) {
	be := &backend{hits: map[string]int{}}
	bs := httptest.NewServer(be)
	defer bs.Close()
	ng := startNginx(t, bs.Listener.Addr().String())

	// A plain client sees the limiter: the header arrives on the 429.
	probe := &http.Client{Timeout: 5 * time.Second}
	saw429 := false
	for i := 0; i < 20 && !saw429; i++ {
		resp, err := probe.Get(ng.url + "/rate/probe")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			saw429 = true
			if v := resp.Header.Get("Retry-After"); v != "1" {
				t.Fatalf("nginx 429 has Retry-After %q, want 1", v)
			}
		}
	}
	if !saw429 {
		t.Fatal("20 back-to-back requests never got a 429: the rate limiter is not working")
	}
	probe.CloseIdleConnections()
	time.Sleep(300 * time.Millisecond) // let the limiter's bucket drain a little

	check := func(t *testing.T, kind string, paths []string, failures []string, took time.Duration) {
		t.Helper()
		for _, f := range failures {
			t.Error(f)
		}
		be.mu.Lock()
		for _, p := range paths {
			if n := be.hits[p]; n != 1 {
				t.Errorf("%s reached the backend %d times, want once", p, n)
			}
		}
		be.mu.Unlock()
		// nginx writes a log line after sending the response: give the
		// last lines a moment to land.
		var rate, busy map[string]int
		for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			rate, busy = ng.statuses(t, "/rate/"+kind+"/"), ng.statuses(t, "/busy/"+kind+"/")
			if rate["200"]+busy["200"] >= len(paths) || time.Now().After(deadline) {
				break
			}
		}
		if rate["200"]+busy["200"] != len(paths) {
			t.Errorf("nginx logged %d successes, want %d", rate["200"]+busy["200"], len(paths))
		}
		// The transport's burst is fast enough to hit both limits every
		// time. The CLI's processes start one by one, slowly on a loaded
		// machine, so two of them may never overlap on /busy/: there, at
		// least one rejection of either kind must have been retried.
		if kind == "cli" && rate["429"]+busy["503"] == 0 || kind != "cli" && (rate["429"] == 0 || busy["503"] == 0) {
			t.Errorf("no rejections to retry (429: %d, 503: %d): the burst did not hit the limits", rate["429"], busy["503"])
		}
		t.Logf("%s: %d requests (%d concurrent), %d failed, in %v; nginx rejected %d attempts with 429 (limit_req, Retry-After 1) and %d with 503 (limit_conn); %d attempts in all",
			kind, len(paths), nginxConcurrency, len(failures), took.Round(time.Millisecond), rate["429"], busy["503"],
			rate["200"]+busy["200"]+rate["429"]+busy["503"])
	}

	t.Run("transport", func(t *testing.T) {
		base := &http.Transport{MaxIdleConnsPerHost: nginxConcurrency}
		defer base.CloseIdleConnections()
		c := &http.Client{Transport: &retryhttp.Transport{Base: base, Policy: e2ePolicy, MaxServerWait: 5 * time.Second}}
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		defer cancel()
		var mu sync.Mutex
		var failures []string
		start := time.Now()
		paths := burst("transport", func(p string) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ng.url+p, nil)
			resp, err := c.Do(req)
			if err != nil {
				mu.Lock()
				failures = append(failures, fmt.Sprintf("%s: %v", p, err))
				mu.Unlock()
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != "ok "+p+"\n" {
				mu.Lock()
				failures = append(failures, fmt.Sprintf("%s: final %s %q", p, resp.Status, body))
				mu.Unlock()
			}
		})
		check(t, "transport", paths, failures, time.Since(start))
	})

	t.Run("cli", func(t *testing.T) {
		bin := filepath.Join(t.TempDir(), "retry")
		build := exec.Command("go", "build", "-o", bin, ".")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		defer cancel()
		var mu sync.Mutex
		var failures []string
		start := time.Now()
		paths := burst("cli", func(p string) {
			cmd := exec.CommandContext(ctx, bin, "http",
				"--initial", "10ms", "--max-delay", "300ms", "--jitter", "full",
				"--attempts", "60", "--max-elapsed", "40s", ng.url+p)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if err != nil || stdout.String() != "ok "+p+"\n" {
				mu.Lock()
				failures = append(failures, fmt.Sprintf("retry http %s: %v, stdout %q, stderr %q", p, err, stdout.String(), stderr.String()))
				mu.Unlock()
			}
		})
		check(t, "cli", paths, failures, time.Since(start))
	})
}
