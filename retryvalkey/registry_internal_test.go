package retryvalkey

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestRegistryConcurrent: goroutines register words, some shared by
// several of them at once (a pinned command) and many in the same bucket,
// look them up and unregister them. A lookup finds the call itself, or
// nil only when another call registered the word too (then the call knows
// it is shared); none finds another call. Afterwards nothing is left
// registered.
func TestRegistryConcurrent(t *testing.T) {
	words := make([]string, 2*buckets) // at least one bucket holds two words
	hot := words[:4]                   // shared by the goroutines
	var r retryer
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			k := new(kept)
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 2000 {
				c := r.begin(ctx, k, false)
				var w []*string
				for range 1 + rng.IntN(3) { // one word, or a pipeline's
					pick := words
					if rng.IntN(2) == 0 {
						pick = hot
					}
					w = append(w, &pick[rng.IntN(len(pick))])
				}
				for _, x := range w {
					r.add(c, x)
				}
				for _, x := range w {
					if got := r.find(x); got != c && (got != nil || !c.shared.Load()) {
						t.Errorf("find: %p, want the call %p (or nil, it being shared: %v)", got, c, c.shared.Load())
						return
					}
				}
				r.end(c)
			}
		})
	}
	wg.Wait()
	if len(r.calls) != 0 {
		t.Errorf("%d words left in the map", len(r.calls))
	}
	for i := range r.b {
		if b := &r.b[i]; b.k != nil || b.more != 0 {
			t.Fatalf("bucket %d: word %p, %d in the map; want none", i, b.k, b.more)
		}
	}
}
