package retryredis_test

import (
	"context"
	"log"
	"net/http"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"github.com/retrykit/retry/retryredis"
	"github.com/retrykit/retry/retryshare"
)

// Every process of the fleet runs this: one Budget and one Throttle for
// the payments backend, shared through Redis under the prefix
// "payments-api". (Compiled, not run: it needs a server.)
func ExampleShareStore() {
	// The client is yours: address, AUTH, TLS, cluster or Sentinel. For the
	// syncs, the client's own retries are useless (the next sync is the
	// retry): MaxRetries -1 and one dial per sync.
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()

	budget, err := retry.NewBudget(retry.BudgetConfig{}) // the same config in every process
	if err != nil {
		log.Fatal(err)
	}
	shareB, err := retryshare.Budget(retryredis.ShareStore(rdb), "payments-api", budget)
	if err != nil {
		log.Fatal(err)
	}
	defer shareB.Close()

	var throttle retry.Throttle
	shareT, err := retryshare.Throttle(retryredis.ShareStore(rdb), "payments-api", &throttle)
	if err != nil {
		log.Fatal(err)
	}
	defer shareT.Close()

	client := &http.Client{Transport: &retryhttp.Transport{Policy: retry.Policy{Budget: budget, Throttle: &throttle}}}
	req, _ := http.NewRequestWithContext(context.Background(), "GET", "http://localhost:8080/pay", nil)
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close()
	}
}
