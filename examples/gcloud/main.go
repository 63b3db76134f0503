// Command gcloud shows retryhttp.Transport under a generated Google Cloud
// REST client (Cloud Storage JSON API): every call the client makes is
// retried on 408, 429 and 5xx with the retry policy, and a 503 with
// Retry-After is honoured. Run without arguments, it serves a fake Storage
// endpoint on loopback that fails twice before answering, and lists its
// buckets through the generated client.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
	"google.golang.org/api/option"
	storage "google.golang.org/api/storage/v1"
)

func main() {
	var calls atomic.Int32
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"kind":  "storage#buckets",
			"items": []map[string]string{{"name": "my-bucket"}},
		})
	}))
	defer fake.Close()

	hc := &http.Client{Transport: &retryhttp.Transport{
		Policy: retry.Policy{Initial: 100 * time.Millisecond, MaxAttempts: 5},
	}}
	ctx := context.Background()
	svc, err := storage.NewService(ctx,
		option.WithHTTPClient(hc), // the retrying transport under the generated client
		option.WithEndpoint(fake.URL+"/storage/v1/"),
	)
	if err != nil {
		log.Fatal(err)
	}
	list, err := svc.Buckets.List("my-project").Context(ctx).Do()
	if err != nil {
		log.Fatal(err)
	}
	for _, b := range list.Items {
		fmt.Println("bucket:", b.Name)
	}
	fmt.Println("requests sent:", calls.Load())
}
