package retryredis_test

import (
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/account"
	"github.com/retrykit/retry/internal/faultproxy"
	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retryredis"
	"github.com/retrykit/retry/retryshare"
)

// TestShareLostRepliesNotCountedTwice: half the syncs' EVALSHA replies are
// lost after Redis ran the script (the proxy resets the connection). The
// next sync used to push the same counts again, so the fleet saw this
// process's first attempts several times over; the store must hold each
// once.
func TestShareLostRepliesNotCountedTwice(t *testing.T) {
	srv := redistest.Start(t)
	px := faultproxy.Start(t, srv.Addr(), faultproxy.Config{ResetAfter: 0.5, Seed: 1,
		Match: func(name string) bool { return name == "evalsha" }})
	b, _ := retry.NewBudget(retry.BudgetConfig{})
	const first = 1000
	s, err := retryshare.Budget(retryredis.ShareStore(shareClient(t, px.Addr())), "lost", b, retryshare.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range first {
		account.RecordAttempt(b)
		if i%100 == 99 {
			time.Sleep(110 * time.Millisecond) // about 100 per sync
		}
	}
	if !waitFor(2*time.Second, func() bool { _, ra, _ := px.Counts("evalsha"); return ra >= 3 && s.Shared() }) {
		t.Fatalf("no lost replies or no rejoin: %+v", s.Stats())
	}
	time.Sleep(250 * time.Millisecond)
	keys, err := srv.Do("KEYS", "{lost}:budget:*")
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, k := range strings.Fields(keys) {
		if strings.Contains(k, ":p:") {
			continue // the process's mark key
		}
		v, _ := srv.Do("HGET", k, "a")
		n, _ := strconv.ParseInt(v, 10, 64)
		sum += n
	}
	if _, ra, _ := px.Counts("evalsha"); sum != first {
		t.Fatalf("%d first attempts made, the store counts %d (%d replies lost)", first, sum, ra)
	}
}
