package retryaws

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// ErrOtherRetryer is matched by the error of Check for a client whose
// Retryer is not a retryaws Retryer: the SDK's own retries are on, and a
// retry loop around its calls multiplies them.
var ErrOtherRetryer = errors.New("retryaws: the client retries with another Retryer")

// Check reports whether r, a client's Retryer (client.Options().Retryer),
// is a retryaws Retryer that governs the client's calls: nil if it is; an
// error for a nil *Retryer, which refuses every call; an
// error matching ErrMaxAttemptsOverride if the SDK wrapped it to override
// its attempt limit (such calls are refused unsent); an error for
// retry.AddWithMaxBackoffDelay around it, which would add the SDK's waits
// to the policy's; and an error matching ErrOtherRetryer otherwise (the
// SDK's standard retryer, say, left on by mistake). It sees through the
// SDK's other retry wrappers (retry.AddWithErrorCodes, …), which embed the
// Retryer they wrap. Call it once, after making a client.
func Check(r aws.Retryer) error {
	for range 16 { // wrappers are few; a cycle is not followed forever
		switch v := r.(type) {
		case nil:
			return fmt.Errorf("%w: it has none", ErrOtherRetryer)
		case *Retryer:
			if v == nil {
				return errNilRetryer{}
			}
			return nil
		}
		v := reflect.ValueOf(r)
		if v.Kind() == reflect.Pointer {
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct {
			break
		}
		t := v.Type()
		if t.PkgPath() == "github.com/aws/aws-sdk-go-v2/aws/retry" {
			switch t.Name() {
			case "withMaxAttempts":
				return &overrideError{max: int(v.FieldByName("Max").Int())}
			case "withMaxBackoffDelay":
				return errors.New("retryaws: retry.AddWithMaxBackoffDelay replaces the Retryer's RetryDelay: the SDK would wait its own backoff on top of the policy's wait")
			}
		}
		var inner aws.Retryer
		for i := range t.NumField() {
			if f := t.Field(i); f.Anonymous && f.IsExported() {
				if w, ok := v.Field(i).Interface().(aws.Retryer); ok {
					inner = w
					break
				}
			}
		}
		if inner == nil {
			break
		}
		r = inner
	}
	return fmt.Errorf("%w: a %T", ErrOtherRetryer, r)
}
