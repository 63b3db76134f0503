package retryhttp_test

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

// BenchmarkPacingLoopback sends the same work (20 GETs, one caller after
// another, or 4 callers at once) to a loopback server that enforces 5
// requests per 1 s window and says so in RateLimit fields on every
// answer, with and without a Pacer, and reports the requests it refused
// with 429 ("429s") and those it served ("200s"). The policy's own waits
// are 10-20 ms; hints are honoured in both runs. Run it once:
//
//	go test -run '^$' -bench BenchmarkPacingLoopback -benchtime 1x ./retryhttp/
func BenchmarkPacingLoopback(b *testing.B) {
	for _, callers := range []int{1, 4} {
		for _, paced := range []bool{false, true} {
			name := "callers=" + strconv.Itoa(callers) + "/paced=" + strconv.FormatBool(paced)
			b.Run(name, func(b *testing.B) {
				for b.Loop() {
					ok, refused := pacingRun(b, callers, paced)
					b.ReportMetric(float64(refused), "429s")
					b.ReportMetric(float64(ok), "200s")
				}
			})
		}
	}
}

func pacingRun(b *testing.B, callers int, paced bool) (ok, refused int) {
	const q, w, work = 5, time.Second, 20
	var mu sync.Mutex
	var win int64
	var n int
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		mu.Lock()
		now := time.Now()
		if cur := now.UnixNano() / int64(w); cur != win {
			win, n = cur, 0
		}
		t := int64(math.Ceil(time.Unix(0, (win+1)*int64(w)).Sub(now).Seconds()))
		code, left := 200, 0
		if n < q {
			n++
			left = q - n
			ok++
		} else {
			code = 429
			refused++
		}
		mu.Unlock()
		rw.Header().Set("RateLimit-Policy", `"default";q=5;w=1`)
		rw.Header().Set("RateLimit", `"default";r=`+strconv.Itoa(left)+`;t=`+strconv.FormatInt(t, 10))
		rw.WriteHeader(code)
	}))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tr := &retryhttp.Transport{Base: base, Policy: retry.Policy{Initial: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond, MaxAttempts: 50}}
	if paced {
		tr.Pace = &retryhttp.Pacer{}
	}
	c := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range work / callers {
				resp, err := c.Get(srv.URL)
				if err != nil {
					b.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Errorf("status %d", resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return ok, refused
}
