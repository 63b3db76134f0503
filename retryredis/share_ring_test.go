package retryredis_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/redistest"
	"github.com/retrykit/retry/retryredis"
	"github.com/retrykit/retry/retryshare"
)

// A Ring sends the keyless SCRIPT LOAD to a random shard while EVALSHA
// goes to the shard of the prefix's keys: after each SCRIPT FLUSH (what a
// shard's restart does), the reload landed on the wrong shard two times in
// three, the sync failed and the process fell back to local decisions.
// The script is now loaded on the keys' shard, within the same sync.
func TestShareRingScriptFlushed(t *testing.T) {
	addrs := map[string]string{}
	var srvs []*redistest.Server
	for i := range 3 {
		s := redistest.Start(t)
		srvs = append(srvs, s)
		addrs["shard"+strconv.Itoa(i)] = s.Addr()
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: addrs, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, MaxRetries: -1, DialerRetries: 1})
	defer ring.Close()
	b, _ := retry.NewBudget(retry.BudgetConfig{})
	s, err := retryshare.Budget(retryredis.ShareStore(ring), "ring", b)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !waitFor(2*time.Second, s.Shared) {
		t.Fatalf("did not join: %+v", s.Stats())
	}
	const flushes = 10
	for range flushes {
		for _, srv := range srvs {
			if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
				t.Fatal(err)
			}
		}
		before := s.Stats().Syncs
		if !waitFor(time.Second, func() bool { return s.Stats().Syncs >= before+1 }) {
			t.Fatalf("no sync after SCRIPT FLUSH: %+v", s.Stats())
		}
	}
	st := s.Stats()
	t.Logf("after %d flushes of every shard: %+v", flushes, st)
	if st.Failures != 0 || st.Fallbacks != 0 || !s.Shared() {
		t.Errorf("stats after %d SCRIPT FLUSHes: %+v, shared %v; want no failed sync and no fallback", flushes, st, s.Shared())
	}
	loads := 0
	for _, srv := range srvs {
		n, _ := srv.CommandCalls("script|load")
		loads += n
	}
	if loads < flushes {
		t.Errorf("SCRIPT LOAD ran %d times on the shards, want once per flush at least (%d)", loads, flushes)
	}
}
