package retrygrpc_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/retrykit/retry/retrygrpc"
)

func FuzzParsePushback(f *testing.F) {
	for _, s := range []string{"0", "200", "-1", "", "+5", "1.5", "9223372036854775807", "99999999999999999999999", " 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := retrygrpc.ParsePushback(v)
		if d < 0 {
			t.Fatalf("ParsePushback(%q) = %v, negative", v, d)
		}
		if !ok {
			if d != 0 {
				t.Fatalf("ParsePushback(%q) = %v, false", v, d)
			}
			return
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil && err.(*strconv.NumError).Err != strconv.ErrRange {
			t.Fatalf("ParsePushback(%q) ok, but it is not a decimal integer", v)
		}
		if err == nil && n <= uint64(1<<63-1)/uint64(time.Millisecond) && d != time.Duration(n)*time.Millisecond {
			t.Fatalf("ParsePushback(%q) = %v, want %d ms", v, d, n)
		}
	})
}
