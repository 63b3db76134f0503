// Package inventory is a small client of an inventory HTTP API, written as
// a retrykit user would write one, and tested in inventory_test.go with
// the retrytest kit only: no sockets, no sleeps, each test in
// milliseconds.
//
//	GET  /stock/{sku}       → 200 with the count as text
//	POST /reservations      → 201; body "sku n"; Idempotency-Key header
//
// Stock is safe to repeat and is retried on 429, 5xx and lost replies.
// Reserve carries an Idempotency-Key, so retryhttp may send it again after
// a lost reply; the server must apply one key once.
package inventory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

// ErrRejected is returned when the service refuses a request (a 4xx):
// retrying it would not help.
var ErrRejected = errors.New("inventory: request rejected")

// Client talks to one inventory service.
type Client struct {
	base string
	http *http.Client
}

// New returns a client of the service at base (such as
// "https://inventory.internal") that sends through rt (nil means
// http.DefaultTransport) and retries as p says.
func New(base string, rt http.RoundTripper, p retry.Policy) *Client {
	return &Client{base: strings.TrimSuffix(base, "/"),
		http: &http.Client{Transport: &retryhttp.Transport{Base: rt, Policy: p}}}
}

// Stock returns how many items of sku are in stock.
func (c *Client) Stock(ctx context.Context, sku string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/stock/"+sku, nil)
	if err != nil {
		return 0, err
	}
	body, err := c.do(req, http.StatusOK)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(body))
}

// Reserve reserves n items of sku. Its retries carry one Idempotency-Key.
func (c *Client) Reserve(ctx context.Context, sku string, n int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/reservations",
		strings.NewReader(fmt.Sprintf("%s %d", sku, n)))
	if err != nil {
		return err
	}
	key := make([]byte, 16)
	rand.Read(key)
	req.Header.Set("Idempotency-Key", hex.EncodeToString(key))
	_, err = c.do(req, http.StatusCreated)
	return err
}

func (c *Client) do(req *http.Request, want int) (string, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("inventory: %s %s: %w", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("inventory: %s %s: %w", req.Method, req.URL.Path, err)
	}
	switch {
	case resp.StatusCode == want:
		return string(b), nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests:
		return "", fmt.Errorf("%w: %s", ErrRejected, resp.Status)
	}
	return "", fmt.Errorf("inventory: %s %s: %s", req.Method, req.URL.Path, resp.Status)
}
