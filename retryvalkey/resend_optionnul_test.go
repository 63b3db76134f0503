package retryvalkey_test

import (
	"context"
	"errors"
	"github.com/retrykit/retry"
	"testing"

	"github.com/retrykit/retry/internal/redistest"
)

// TestOptionWithNULAfterLostReply: the server reads an option up to its
// first NUL byte, so ZADD "INCR\x00", ZADD "nx\x00" and EXPIRE "NX\x00x"
// are ZADD INCR, ZADD NX and EXPIRE NX: after a lost reply each runs once
// and the call returns retry.ErrMaybeApplied.
func TestOptionWithNULAfterLostReply(t *testing.T) {
	srv := redistest.Start(t)
	c, _, fault := faultOnce(t, srv)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		words []string
		want  string // ZSCORE z m after one run; for EXPIRE, "" means a TTL is set
	}{
		{"zadd", []string{"z", "INCR\x00", "1", "m"}, "1"},
		{"zadd", []string{"z", "nx\x00", "1", "m"}, "1"},
		{"expire", []string{"z", "100", "NX\x00x"}, ""},
	} {
		if _, err := srv.Do("DEL", "z"); err != nil {
			t.Fatal(err)
		}
		if tc.name == "expire" {
			if _, err := srv.Do("ZADD", "z", "1", "m"); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		if n := srv.CallsDuring(t, tc.name, func() {
			fault.Store(tc.name)
			err = c.Do(ctx, c.B().Arbitrary(tc.name).Keys(tc.words[0]).Args(tc.words[1:]...).Build()).Error()
		}); n != 1 {
			t.Errorf("%s %q: the server ran it %d times; want 1", tc.name, tc.words, n)
		}
		if tc.want != "" {
			if s, _ := srv.Do("ZSCORE", "z", "m"); s != tc.want {
				t.Errorf("%s %q: score %s; want %s", tc.name, tc.words, s, tc.want)
			}
		} else if s, _ := srv.Do("TTL", "z"); s == "-1" {
			t.Errorf("%s %q: no TTL", tc.name, tc.words)
		}
		if !errors.Is(err, retry.ErrMaybeApplied) {
			t.Errorf("%s %q: %v; want retry.ErrMaybeApplied", tc.name, tc.words, err)
		}
	}
}
