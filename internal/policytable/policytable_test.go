package policytable_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/policytable"
	"github.com/retrykit/retry/retryhttp"
)

const guide = "../../docs/engine.md"

// TestPolicyTable: the table has a row for every Policy field and nothing
// else, every cell says honoured or refused, and the core's own columns
// (Do, retryhttp) hold.
func TestPolicyTable(t *testing.T) {
	tab, err := policytable.Read(guide)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Do", "retryhttp", "retrygrpc unary", "retrygrpc streams", "retrygax", "retryaws", "retryredis", "retryvalkey", "retrysql"}
	var cols []string
	for c := range tab {
		cols = append(cols, c)
	}
	slices.Sort(cols)
	slices.Sort(want)
	if !slices.Equal(cols, want) {
		t.Fatalf("columns %q, want %q", cols, want)
	}
	fields := policytable.Fields()
	for c, cells := range tab {
		var rows []string
		for f, cell := range cells {
			rows = append(rows, f)
			if !strings.HasPrefix(cell, "honoured") && !policytable.Refused(cell) {
				t.Errorf("%s, %s: cell %q says neither honoured nor refused", c, f, cell)
			}
		}
		slices.Sort(rows)
		sorted := slices.Sorted(slices.Values(fields))
		if !slices.Equal(rows, sorted) {
			t.Errorf("%s: rows %q, want one per Policy field %q", c, rows, sorted)
		}
	}
	for _, err := range policytable.Check(guide, "Do", "retry", func(p retry.Policy) error {
		return retry.Do(context.Background(), p, func(context.Context) error { return nil })
	}) {
		t.Error(err)
	}
	for _, err := range policytable.Check(guide, "retryhttp", "retryhttp", func(p retry.Policy) error {
		// Where the integration is made (NewClient, or Validate for a
		// struct literal), then where it is used.
		tr := &retryhttp.Transport{Base: okBase{}, Policy: p}
		if err := tr.Validate(); err != nil {
			return err
		}
		req, _ := http.NewRequest("GET", "http://127.0.0.1/", nil)
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}) {
		t.Error(err)
	}
}

type okBase struct{}

func (okBase) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
}

// TestCheckCatchesAModuleThatDisagrees: a module that refuses what its
// column honours, or honours what it refuses, or refuses without naming
// the field, fails the check.
func TestCheckCatchesAModuleThatDisagrees(t *testing.T) {
	refuseAll := func(p retry.Policy) error {
		return errors.New("retrygax: refused Policy.Initial Policy.Multiplier Policy.MaxDelay Policy.Jitter Policy.MaxAttempts Policy.MaxElapsed Policy.AttemptTimeout Policy.Retryable Policy.RetryExhausted Policy.Budget Policy.Throttle Policy.Observer Policy.Logger")
	}
	if errs := policytable.Check(guide, "retrygax", "retrygax", refuseAll); len(errs) != len(policytable.Fields())-1 {
		t.Errorf("a module refusing everything: %d errors, want one per honoured field (%d): %v", len(errs), len(policytable.Fields())-1, errs)
	}
	acceptAll := func(retry.Policy) error { return nil }
	if errs := policytable.Check(guide, "retrygax", "retrygax", acceptAll); len(errs) != 1 {
		t.Errorf("a module accepting everything: %d errors, want 1 (AttemptTimeout): %v", len(errs), errs)
	}
	unnamed := func(p retry.Policy) error {
		if p.AttemptTimeout != 0 {
			return errors.New("retrygax: no")
		}
		return nil
	}
	if errs := policytable.Check(guide, "retrygax", "retrygax", unnamed); len(errs) != 1 {
		t.Errorf("a refusal that does not name the field: %d errors, want 1: %v", len(errs), errs)
	}
}

// TestSampleForEveryField: every Policy field has a valid sample that is
// not its zero value.
func TestSampleForEveryField(t *testing.T) {
	for _, f := range policytable.Fields() {
		if _, err := policytable.Sample(f); err != nil {
			t.Error(err)
		}
	}
	if _, err := policytable.Sample("NoSuchField"); err == nil {
		t.Error("Sample of an unknown field: no error")
	}
}
