// Command otel shows retrykit's OpenTelemetry metrics in Prometheus form.
//
// It starts a flaky HTTP server on 127.0.0.1, sends requests to it through
// a retryhttp.Transport whose Base is retryotel.NewAttemptTransport and
// whose Policy retryotel.Instrument made (retry outside, one otelhttp
// client span per attempt inside), serves the OpenTelemetry Prometheus exporter's /metrics
// on 127.0.0.1, scrapes it once and prints the retry series. It exits with
// status 1 when the scrape lacks a retry series or disagrees with what the
// server counted, so scripts/test-all.sh runs it as a check.
//
//	go run ./examples/otel
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"github.com/retrykit/retry/retryotel"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// calls is how many calls the client makes; call i fails i%4 times first,
// so with 3 attempts every fourth call gives up on a 503.
const calls = 12

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "examples/otel:", err)
		os.Exit(1)
	}
}

// flaky is the backend: it answers 503 to the first id%4 attempts of
// /item?id=N (it reads the attempt number from Retry-Attempt) and counts
// the requests and the distinct traceparents it receives.
type flaky struct {
	mu          sync.Mutex
	requests    int
	traceparent map[string]bool
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.Atoi(r.URL.Query().Get("id"))
	attempt := 1
	if v := r.Header.Get(retryhttp.HeaderAttempt); v != "" {
		attempt, _ = strconv.Atoi(v)
	}
	f.mu.Lock()
	f.requests++
	f.traceparent[r.Header.Get("traceparent")] = true
	f.mu.Unlock()
	if attempt <= id%4 {
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintf(w, "item %d\n", id)
}

// serve starts h on a free 127.0.0.1 port and returns its base URL and a
// function that stops it.
func serve(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

func run(out io.Writer) error {
	// OpenTelemetry set-up: metrics go to a Prometheus registry through the
	// OpenTelemetry Prometheus exporter; spans are sampled (not exported) so
	// that every attempt carries a real traceparent.
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	otel.SetTextMapPropagator(propagation.TraceContext{})

	backend := &flaky{traceparent: map[string]bool{}}
	backendURL, stopBackend, err := serve(backend)
	if err != nil {
		return err
	}
	defer stopBackend()
	metricsURL, stopMetrics, err := serve(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if err != nil {
		return err
	}
	defer stopMetrics()

	// The client: retry outside, per-attempt instrumentation inside.
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	policy := retry.Policy{MaxAttempts: 3, Initial: 5 * time.Millisecond, MaxDelay: 20 * time.Millisecond}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &retryhttp.Transport{
		Base:   retryotel.NewAttemptTransport(base, retryotel.WithMeterProvider(mp), retryotel.WithTracerProvider(tp)),
		Policy: retryotel.Instrument(policy, "http", retryotel.WithMeterProvider(mp)),
	}}

	ok, failed := 0, 0
	for id := range calls {
		resp, err := client.Get(backendURL + "/item?id=" + strconv.Itoa(id))
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			ok++
		} else {
			failed++
		}
	}
	backend.mu.Lock()
	requests, distinct := backend.requests, len(backend.traceparent)
	backend.mu.Unlock()
	fmt.Fprintf(out, "%d calls: %d succeeded, %d gave up; the server saw %d requests with %d distinct traceparents\n\n",
		calls, ok, failed, requests, distinct)

	// Scrape /metrics as Prometheus would.
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(metricsURL + "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	series := map[string]float64{}
	var perAttempt float64 // otelhttp's per-attempt request count, all label sets
	fmt.Fprintf(out, "GET %s/metrics (retry series):\n", "http://127.0.0.1:PORT")
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "retry_") && !strings.HasPrefix(line, "http_client_request_duration_seconds_count{") {
			continue
		}
		name, value, found := strings.Cut(line, " ")
		if !found {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return fmt.Errorf("scrape: bad value in %q", line)
		}
		series[name] = v
		if strings.HasPrefix(name, "retry_") && !strings.Contains(name, "_bucket{") || strings.Contains(name, `le="+Inf"`) ||
			strings.HasPrefix(name, "retry_call_attempts_bucket{") && v < calls {
			fmt.Fprintln(out, line)
		}
		if strings.HasPrefix(name, "http_client_request_duration_seconds_count{") {
			perAttempt += v
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}

	// The checks: every retry series is there and agrees with the server.
	const op = `retry_operation="http"`
	want := []struct {
		series string
		value  float64
	}{
		{`retry_call_attempts_count{` + op + `}`, calls},
		{`retry_call_attempts_sum{` + op + `}`, float64(requests)},
		{`retry_call_retry_delay_seconds_count{` + op + `}`, float64(calls - calls/4)},
		{`retry_call_gave_up_total{` + op + `,retry_reason="attempts"}`, calls / 4},
	}
	var errs []error
	for _, w := range want {
		got, found := series[w.series]
		switch {
		case !found:
			errs = append(errs, fmt.Errorf("scrape lacks %s", w.series))
		case got != w.value:
			errs = append(errs, fmt.Errorf("%s = %v, want %v", w.series, got, w.value))
		}
	}
	fmt.Fprintf(out, "\notelhttp, one layer down, counted %v attempts (http_client_request_duration_seconds_count)\n", perAttempt)
	if perAttempt != float64(requests) {
		errs = append(errs, fmt.Errorf("otelhttp counted %v attempts, the server %d", perAttempt, requests))
	}
	if distinct != requests {
		errs = append(errs, fmt.Errorf("%d distinct traceparents for %d requests: want one per attempt", distinct, requests))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintln(out, "\nok: the scrape shows the retry series and matches what the server counted")
	return nil
}
