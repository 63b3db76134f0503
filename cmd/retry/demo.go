package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/spf13/cobra"
)

// demoHandler fails the first request with 503, the second with 429 and
// Retry-After: 1, and answers 200 from then on, telling log about each.
type demoHandler struct {
	n   atomic.Int32
	log func(string)
}

func (h *demoHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := h.n.Add(1)
	switch n {
	case 1:
		h.log(fmt.Sprintf("request %d: answering 503 Service Unavailable", n))
		http.Error(w, "busy, try again", http.StatusServiceUnavailable)
	case 2:
		h.log(fmt.Sprintf("request %d: answering 429 Too Many Requests, Retry-After: 1", n))
		w.Header().Set("Retry-After", "1")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	default:
		h.log(fmt.Sprintf("request %d: answering 200 OK", n))
		fmt.Fprintln(w, "hello from the retry demo server")
	}
}

func newDemoCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demo [policy flags]",
		Short: "Watch a retry cycle against a local flaky server (no network needed)",
		Long: `demo starts an HTTP server on 127.0.0.1 that answers the first request with 503,
the second with 429 and Retry-After: 1, and then 200, and runs retry http against it
with the default policy (or the policy flags given). It takes a few seconds.`,
		Args: noArgs,
	}
	pf := addPolicyFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		p, err := pf.policy()
		if err != nil {
			return err
		}
		stderr := cmd.ErrOrStderr()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return &exitError{code: 1, msg: "demo: " + err.Error()}
		}
		h := &demoHandler{log: func(s string) { fmt.Fprintln(stderr, "  server: "+s) }}
		srv := &http.Server{Handler: h}
		go srv.Serve(ln)
		defer srv.Shutdown(context.Background())
		url := "http://" + ln.Addr().String() + "/hello"
		fmt.Fprintf(stderr, "demo: a local server at %s fails twice (503, then 429 with Retry-After: 1), then answers.\n", url)
		fmt.Fprintf(stderr, "demo: running: retry http%s %s\n", pf.commandLine(), url)
		o := &httpOptions{}
		req, err := o.request(url)
		if err != nil {
			return err
		}
		return doHTTP(cmd.Context(), p, pf, req, "", cmd.OutOrStdout(), stderr)
	}
	return cmd
}
