package retrygrpc_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/policytable"
	"github.com/retrykit/retry/retrygrpc"
	"google.golang.org/grpc"
)

// TestPolicyTable: the constructors refuse exactly the Policy fields that
// the table in docs/engine.md says they refuse, naming them: the unary
// interceptor none, the stream interceptor AttemptTimeout, and
// DialOptions, which installs both, what either refuses (the streams'
// column, as the unary column refuses nothing).
func TestPolicyTable(t *testing.T) {
	unary := func(p retry.Policy) error {
		_, err := retrygrpc.UnaryClientInterceptor(p)
		return err
	}
	for _, err := range policytable.Check("../docs/engine.md", "retrygrpc unary", "retrygrpc", unary) {
		t.Error(err)
	}
	stream := func(p retry.Policy) error {
		_, err := retrygrpc.StreamClientInterceptor(p)
		return err
	}
	for _, err := range policytable.Check("../docs/engine.md", "retrygrpc streams", "retrygrpc", stream) {
		t.Error(err)
	}
	dial := func(p retry.Policy) error {
		_, err := retrygrpc.DialOptions(p)
		return err
	}
	for _, err := range policytable.Check("../docs/engine.md", "retrygrpc streams", "retrygrpc", dial) {
		t.Error(err)
	}
}

// TestConstructorsRefuse: each constructor refuses an invalid Policy with
// the error of p.Validate, naming the field and itself, and WithHedging
// with a nil Hedger, and returns nothing to install.
func TestConstructorsRefuse(t *testing.T) {
	build := map[string]func(retry.Policy, ...retrygrpc.Option) (any, error){
		"UnaryClientInterceptor": func(p retry.Policy, o ...retrygrpc.Option) (any, error) {
			ic, err := retrygrpc.UnaryClientInterceptor(p, o...)
			return ic, err
		},
		"StreamClientInterceptor": func(p retry.Policy, o ...retrygrpc.Option) (any, error) {
			ic, err := retrygrpc.StreamClientInterceptor(p, o...)
			return ic, err
		},
		"DialOptions": func(p retry.Policy, o ...retrygrpc.Option) (any, error) {
			dopts, err := retrygrpc.DialOptions(p, o...)
			return dopts, err
		},
	}
	for name, f := range build {
		v, err := f(retry.Policy{Multiplier: 0.5})
		if !errors.Is(err, retry.ErrInvalidPolicy) || !strings.Contains(err.Error(), "Multiplier") || !strings.HasPrefix(err.Error(), "retrygrpc: "+name+": ") {
			t.Errorf("%s(Multiplier 0.5): %v; want the validation error, naming Multiplier, from %s", name, err, name)
		}
		if v, err := f(retry.Policy{MaxAttempts: -5}); !errors.Is(err, retry.ErrInvalidPolicy) || !isNil(v) {
			t.Errorf("%s(MaxAttempts -5): %v, %v; want ErrInvalidPolicy and nothing", name, v, err)
		}
		if !isNil(v) {
			t.Errorf("%s(Multiplier 0.5) returned %v with its error", name, v)
		}
		v, err = f(retry.Policy{}, retrygrpc.WithHedging(nil))
		if err == nil || !strings.Contains(err.Error(), "retrygrpc: WithHedging with a nil *retry.Hedger") || !isNil(v) {
			t.Errorf("%s(WithHedging(nil)): %v, %v; want the nil-Hedger error and nothing", name, v, err)
		}
		if _, err := f(retry.Policy{}, retrygrpc.WithHedging(&retry.Hedger{})); err != nil {
			t.Errorf("%s(WithHedging(&retry.Hedger{})): %v", name, err)
		}
	}
}

// isNil reports whether a constructor's result is its type's nil.
func isNil(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case []grpc.DialOption:
		return v == nil
	case grpc.UnaryClientInterceptor:
		return v == nil
	case grpc.StreamClientInterceptor:
		return v == nil
	}
	return false
}

// TestHedgedMethodOutsideWithMethods: WithHedging naming a method that
// WithMethods leaves out (so it would be called once, and hedged anyway)
// is refused by every constructor, naming the method; naming it in both
// is accepted.
func TestHedgedMethodOutsideWithMethods(t *testing.T) {
	const a, b = "/svc.S/A", "/svc.S/B"
	build := map[string]func(...retrygrpc.Option) error{
		"UnaryClientInterceptor": func(o ...retrygrpc.Option) error {
			_, err := retrygrpc.UnaryClientInterceptor(retry.Policy{}, o...)
			return err
		},
		"StreamClientInterceptor": func(o ...retrygrpc.Option) error {
			_, err := retrygrpc.StreamClientInterceptor(retry.Policy{}, o...)
			return err
		},
		"DialOptions": func(o ...retrygrpc.Option) error {
			_, err := retrygrpc.DialOptions(retry.Policy{}, o...)
			return err
		},
	}
	h := &retry.Hedger{}
	for name, f := range build {
		err := f(retrygrpc.WithMethods(b), retrygrpc.WithHedging(h, a))
		if err == nil || !strings.HasPrefix(err.Error(), "retrygrpc: "+name+": WithHedging names "+a) {
			t.Errorf("%s(WithMethods(B), WithHedging(h, A)): %v; want a refusal naming A", name, err)
		}
		if err := f(retrygrpc.WithHedging(h, a), retrygrpc.WithMethods(a, b)); err != nil {
			t.Errorf("%s(WithHedging(h, A), WithMethods(A, B)): %v", name, err)
		}
	}
}
