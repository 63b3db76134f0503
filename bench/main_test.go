package bench

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test or benchmark leaves a goroutine behind
// (servers, transports and retry loops of every library included).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// cristalhq/hedgedhttp keeps a pool of worker goroutines for the
		// life of the process, by design.
		goleak.IgnoreAnyFunction("github.com/cristalhq/hedgedhttp.runInPool.func1"))
}
