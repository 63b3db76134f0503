package retryredis_test

import (
	"context"
	"errors"
	"github.com/retrykit/retry"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/retrykit/retry/internal/faultproxy"
	"github.com/retrykit/retry/internal/redistest"
)

// onceProxy is a fault proxy that loses the reply of the next command
// named by arm, after the server ran it.
type onceProxy struct {
	*faultproxy.Proxy
	armed atomic.Pointer[string]
}

func startOnceProxy(t *testing.T, srv *redistest.Server) *onceProxy {
	p := &onceProxy{}
	p.Proxy = faultproxy.Start(t, srv.Addr(), faultproxy.Config{ResetAfter: 1, Match: func(n string) bool {
		a := p.armed.Load()
		return a != nil && *a == n && p.armed.CompareAndSwap(a, nil)
	}})
	return p
}

func (p *onceProxy) arm(name string) { p.armed.Store(&name) }

// TestOptionShapesAfterLostReply: ZADD INCR, ZADD NX and EXPIRE NX are not
// idempotent whatever type carries the option: go-redis writes a []byte or
// a *string as the same bulk string as a string, and the server reads an
// option up to a NUL byte. After a lost reply each runs once and the call
// returns retry.ErrMaybeApplied.
func TestOptionShapesAfterLostReply(t *testing.T) {
	srv := redistest.Start(t)
	px := startOnceProxy(t, srv)
	c := newClient(t, px.Addr(), testPolicy())
	ctx := context.Background()
	ptr := func(s string) *string { return &s }
	for _, opt := range []struct {
		what     string
		incr, nx any
	}{
		{"[]byte", []byte("INCR"), []byte("NX")},
		{"*string", ptr("incr"), ptr("nx")},
		{"string with NUL", "INCR\x00", "nx\x00x"},
	} {
		for _, tc := range []struct {
			name  string
			args  []any
			check func() string // what the server holds, "" if as after one run
		}{
			{"zadd", []any{"zadd", "z", opt.incr, 1, "m"}, func() string {
				if s, _ := srv.Do("ZSCORE", "z", "m"); s != "1" {
					return "score " + s + ", want 1"
				}
				return ""
			}},
			{"zadd", []any{"zadd", "z", opt.nx, 1, "m"}, func() string {
				if s, _ := srv.Do("ZSCORE", "z", "m"); s != "1" {
					return "score " + s + ", want 1"
				}
				return ""
			}},
			{"expire", []any{"expire", "z", 100, opt.nx}, func() string {
				if s, _ := srv.Do("TTL", "z"); s == "-1" {
					return "no TTL"
				}
				return ""
			}},
		} {
			t.Run(opt.what+"/"+strings.Join(words(tc.args), " "), func(t *testing.T) {
				if _, err := srv.Do("DEL", "z"); err != nil {
					t.Fatal(err)
				}
				if tc.name == "expire" {
					if _, err := srv.Do("ZADD", "z", "1", "m"); err != nil {
						t.Fatal(err)
					}
				}
				var err error
				if n := srv.CallsDuring(t, tc.name, func() { px.arm(tc.name); err = c.Do(ctx, tc.args...).Err() }); n != 1 {
					t.Errorf("the server ran it %d times; want 1", n)
				}
				if msg := tc.check(); msg != "" {
					t.Error(msg)
				}
				if !errors.Is(err, retry.ErrMaybeApplied) {
					t.Errorf("err = %v; want retry.ErrMaybeApplied", err)
				}
			})
		}
	}
}

// words shows a command's arguments for a test's name.
func words(args []any) []string {
	var w []string
	for _, a := range args {
		switch a := a.(type) {
		case string:
			w = append(w, strings.ReplaceAll(a, "\x00", "NUL"))
		case []byte:
			w = append(w, "[]byte("+string(a)+")")
		case *string:
			w = append(w, "&"+*a)
		default:
			w = append(w, "n")
		}
	}
	return w
}
