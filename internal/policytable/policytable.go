// Package policytable reads the table "Policy field × module" of
// docs/engine.md, which says what each module does with each retry.Policy
// field, and makes the policies with which each module's tests hold the
// module to its column: a field that a module refuses must make its
// constructor fail with an error naming the field and the module; every
// other field must be accepted.
package policytable

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/retrykit/retry"
)

// Heading is the heading of the table's section in docs/engine.md.
const Heading = "## Policy field × module"

// Table is the table: for each column (its heading, such as "retrygax"
// or "retrygrpc streams"), each field's cell.
type Table map[string]map[string]string

// Read reads the table from the engine guide at path.
func Read(path string) (Table, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	text := string(b)
	i := strings.Index(text, Heading+"\n")
	if i < 0 {
		return nil, fmt.Errorf("policytable: %s has no %q", path, Heading)
	}
	var cols []string
	t := Table{}
	for _, line := range strings.Split(text[i:], "\n")[1:] {
		if !strings.HasPrefix(line, "|") {
			if cols != nil {
				break // the end of the table
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for k := range cells {
			cells[k] = strings.TrimSpace(cells[k])
		}
		switch {
		case cols == nil:
			cols = cells
			for _, c := range cols[1:] {
				t[c] = map[string]string{}
			}
		case strings.HasPrefix(cells[0], "---"):
		default:
			if len(cells) != len(cols) {
				return nil, fmt.Errorf("policytable: row %q has %d cells, want %d", cells[0], len(cells), len(cols))
			}
			field := strings.Trim(cells[0], "`")
			for k, c := range cols[1:] {
				t[c][field] = cells[k+1]
			}
		}
	}
	return t, nil
}

// Refused reports whether a cell says that the module refuses the field.
func Refused(cell string) bool { return strings.HasPrefix(cell, "refused") }

// Fields returns the names of retry.Policy's fields, in order.
func Fields() []string {
	rt := reflect.TypeFor[retry.Policy]()
	var names []string
	for i := range rt.NumField() {
		names = append(names, rt.Field(i).Name)
	}
	return names
}

// Sample returns a valid policy whose field named field is set to a
// value other than its zero, and every other field zero. It fails for a
// field it does not know: a new Policy field needs a sample, a row in
// the table, and a decision in every module.
func Sample(field string) (retry.Policy, error) {
	var p retry.Policy
	switch field {
	case "Initial":
		p.Initial = 10 * time.Millisecond
	case "Multiplier":
		p.Multiplier = 1.5
	case "MaxDelay":
		p.MaxDelay = 10 * time.Second
	case "Jitter":
		p.Jitter = retry.FullJitter()
	case "MaxAttempts":
		p.MaxAttempts = 3
	case "MaxElapsed":
		p.MaxElapsed = time.Minute
	case "AttemptTimeout":
		p.AttemptTimeout = time.Second
	case "Retryable":
		p.Retryable = func(error) bool { return true }
	case "RetryExhausted":
		p.RetryExhausted = true
	case "Budget":
		b, err := retry.NewBudget(retry.BudgetConfig{})
		if err != nil {
			return p, err
		}
		p.Budget = b
	case "Throttle":
		th, err := retry.NewThrottle(retry.ThrottleConfig{})
		if err != nil {
			return p, err
		}
		p.Throttle = th
	case "Observer":
		p.Observer = retry.ObserverFunc(func(context.Context, retry.Event) {})
	case "Logger":
		p.Logger = slog.New(slog.DiscardHandler)
	default:
		return p, fmt.Errorf("policytable: no sample for Policy.%s", field)
	}
	if reflect.ValueOf(p).FieldByName(field).IsZero() {
		return p, fmt.Errorf("policytable: the sample of Policy.%s is its zero value", field)
	}
	return p, p.Validate()
}

// Check holds a module to its column of the table at path: for every
// Policy field, build (the module's constructor, given the field's
// sample) must fail, with an error naming "Policy.<field>" and the
// module, exactly when the table says the module refuses it.
func Check(path, column, module string, build func(retry.Policy) error) []error {
	t, err := Read(path)
	if err != nil {
		return []error{err}
	}
	col, ok := t[column]
	if !ok {
		return []error{fmt.Errorf("policytable: no column %q", column)}
	}
	var errs []error
	for _, f := range Fields() {
		cell, ok := col[f]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: no cell for Policy.%s", column, f))
			continue
		}
		p, err := Sample(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		berr := build(p)
		named := berr != nil && strings.Contains(berr.Error(), "Policy."+f) && strings.Contains(berr.Error(), module)
		switch {
		case Refused(cell) && !named:
			errs = append(errs, fmt.Errorf("%s: the table refuses Policy.%s, but building with it gave %v (want an error naming the field and the module)", column, f, berr))
		case !Refused(cell) && berr != nil:
			errs = append(errs, fmt.Errorf("%s: the table accepts Policy.%s, but building with it was refused: %v", column, f, berr))
		}
	}
	return errs
}

// T is what Test needs of a *testing.T.
type T interface {
	Helper()
	Error(args ...any)
}

// Test reports every disagreement that Check finds as a test error.
func Test(t T, path, column, module string, build func(retry.Policy) error) {
	t.Helper()
	for _, err := range Check(path, column, module, build) {
		t.Error(err)
	}
}
