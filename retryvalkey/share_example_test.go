package retryvalkey_test

import (
	"context"
	"log"
	"net/http"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"github.com/retrykit/retry/retryshare"
	"github.com/retrykit/retry/retryvalkey"
	"github.com/valkey-io/valkey-go"
)

// Every process of the fleet runs this: one Budget and one Throttle for
// the payments backend, shared through Valkey under the prefix
// "payments-api". (Compiled, not run: it needs a server.)
func ExampleShareStore() {
	// The client is yours: address, AUTH, TLS, cluster or Sentinel.
	rdb, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{"localhost:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()

	budget, err := retry.NewBudget(retry.BudgetConfig{}) // the same config in every process
	if err != nil {
		log.Fatal(err)
	}
	shareB, err := retryshare.Budget(retryvalkey.ShareStore(rdb), "payments-api", budget)
	if err != nil {
		log.Fatal(err)
	}
	defer shareB.Close()

	var throttle retry.Throttle
	shareT, err := retryshare.Throttle(retryvalkey.ShareStore(rdb), "payments-api", &throttle)
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
